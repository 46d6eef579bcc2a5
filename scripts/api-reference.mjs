// Renders docs/API.md (and docs/openapi.json) from the OpenAPI document the server serves at
// `GET /v1/openapi.json`, built in-process from the route schemas without units
// (packages/server/src/api/openapi-document.ts). Needs the build (`npx tsc -b`) first.
//
//   node scripts/api-reference.mjs          writes the files (`npm run docs`; `npm run build` runs it)
//   node scripts/api-reference.mjs --check  exits 1 when a checked-in file differs from what it renders
//
// The output is deterministic: tags, paths, methods, statuses, schemas and error codes are sorted,
// and both files go through biome's formatter, so `npx biome ci .` accepts them as written.
import { spawnSync } from "node:child_process";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { pathToFileURL } from "node:url";

const root = new URL("..", import.meta.url).pathname;
export const COMMAND = "npm run docs";
export const API_MD = "docs/API.md";
export const OPENAPI_JSON = "docs/openapi.json";

const METHODS = ["get", "head", "post", "put", "patch", "delete", "options"];
/** The tag of the `/v1/sprites` compatibility routes (packages/server/src/api/app.ts). */
const COMPAT_TAG = "sprites";

// ---- Small markdown helpers -------------------------------------------------------------------

/** Text for a table cell: one line, pipes escaped. */
const cell = (s) =>
  String(s ?? "")
    .replace(/\s+/g, " ")
    .trim()
    .replace(/\|/g, "\\|");

/** A code span that survives backticks in its text. */
const code = (s) => {
  const t = String(s);
  return t.includes("`") ? `\`\` ${t} \`\`` : `\`${t}\``;
};

/** The anchor GitHub gives a heading that is a single word. */
const anchor = (title) => `#${title.toLowerCase()}`;

function table(head, rows) {
  if (rows.length === 0) return "";
  return [
    `| ${head.join(" | ")} |`,
    `| ${head.map(() => "---").join(" | ")} |`,
    ...rows.map((r) => `| ${r.map(cell).join(" | ")} |`),
  ].join("\n");
}

// ---- Schemas ----------------------------------------------------------------------------------

const isObject = (s) => s && (s.type === "object" || s.properties);
/** A named object schema gets a section of its own under "Schemas" and a link everywhere else. */
const isNamed = (s) => isObject(s) && typeof s.title === "string";

/** A short type expression for a schema: `string`, `"unit" \| "public"`, `Unit[]`, `integer \| null`. */
export function typeOf(s) {
  if (!s || typeof s !== "object") return "any";
  if (isNamed(s)) return `[${s.title}](${anchor(s.title)})`;
  const alts = s.anyOf ?? s.oneOf;
  if (alts) return [...new Set(alts.map(typeOf))].join(" | ");
  if (s.const !== undefined) return code(JSON.stringify(s.const));
  if (s.enum) return s.enum.map((v) => code(JSON.stringify(v))).join(" | ");
  if (s.type === "array") {
    const item = typeOf(s.items);
    return item.includes(" | ") ? `(${item})[]` : `${item}[]`;
  }
  if (isObject(s)) {
    if (!s.properties && s.additionalProperties && typeof s.additionalProperties === "object") {
      return `map of ${typeOf(s.additionalProperties)}`;
    }
    return "object";
  }
  if (Array.isArray(s.type)) return s.type.join(" | ");
  if (s.format) return `${s.type} (${s.format})`;
  return s.type ?? "any";
}

function bounds(what, min, max, exclusiveMin, exclusiveMax) {
  const lo = min ?? exclusiveMin;
  const hi = max ?? exclusiveMax;
  if (lo === undefined && hi === undefined) return undefined;
  const left = lo === undefined ? "" : `${lo} ${exclusiveMin !== undefined ? "<" : "≤"} `;
  const right = hi === undefined ? "" : ` ${exclusiveMax !== undefined ? "<" : "≤"} ${hi}`;
  return `${left}${what}${right}`;
}

/** The validation a schema applies, in words (the non-null alternative of a nullable value). */
export function constraints(s) {
  if (!s || typeof s !== "object") return "";
  const alts = (s.anyOf ?? s.oneOf)?.filter((a) => a.type !== "null");
  if (alts?.length === 1) return constraints(alts[0]);
  const c = [
    bounds("length", s.minLength, s.maxLength),
    bounds("value", s.minimum, s.maximum, s.exclusiveMinimum, s.exclusiveMaximum),
    bounds("items", s.minItems, s.maxItems),
    bounds("keys", s.minProperties, s.maxProperties),
    s.multipleOf !== undefined ? `multiple of ${s.multipleOf}` : undefined,
    s.uniqueItems ? "unique items" : undefined,
    s.pattern !== undefined ? `pattern ${code(s.pattern)}` : undefined,
  ].filter(Boolean);
  if (s.type === "array" && s.items && !isNamed(s.items)) {
    const each = constraints(s.items);
    if (each) c.push(`each: ${each}`);
  }
  return c.join("; ");
}

const defaultOf = (s) => (s && s.default !== undefined ? code(JSON.stringify(s.default)) : "");
const describe = (s) => s?.description ?? s?.["x-message"] ?? "";

/** One row per field; unnamed nested objects are flattened into `parent.child` (and `list[].child`). */
function fieldRows(s, prefix = "") {
  const rows = [];
  const required = new Set(s.required ?? []);
  for (const [name, f] of Object.entries(s.properties ?? {})) {
    const path = `${prefix}${name}`;
    rows.push([code(path), typeOf(f), required.has(name) ? "yes" : "", defaultOf(f), constraints(f), describe(f)]);
    for (const inner of nestedObjects(f)) rows.push(...fieldRows(inner.schema, `${path}${inner.suffix}.`));
  }
  return rows;
}

/** The unnamed object schemas inside a field (directly, as array items, or as one alternative). */
function nestedObjects(f) {
  if (!f || typeof f !== "object" || isNamed(f)) return [];
  if (isObject(f) && f.properties) return [{ schema: f, suffix: "" }];
  if (f.type === "array") return nestedObjects(f.items).map((n) => ({ ...n, suffix: `[]${n.suffix}` }));
  return (f.anyOf ?? f.oneOf ?? []).flatMap(nestedObjects);
}

const FIELD_HEAD = ["Field", "Type", "Required", "Default", "Constraints", "Description"];

function fieldsTable(s) {
  return table(FIELD_HEAD, fieldRows(s));
}

/** Every named object schema in the document, by title; two different shapes under one title fail. */
function namedSchemas(doc) {
  const byTitle = new Map();
  const visit = (s) => {
    if (Array.isArray(s)) s.forEach(visit);
    else if (s && typeof s === "object") {
      if (isNamed(s)) {
        const seen = byTitle.get(s.title);
        if (seen && JSON.stringify(seen) !== JSON.stringify(s)) {
          throw new Error(`two different schemas are titled ${s.title}; give one another title`);
        }
        byTitle.set(s.title, s);
      }
      Object.values(s).forEach(visit);
    }
  };
  visit(doc.paths);
  return [...byTitle.entries()].sort(([a], [b]) => a.localeCompare(b, "en"));
}

// ---- Operations -------------------------------------------------------------------------------

function parametersTable(op) {
  const params = [...(op.parameters ?? [])].sort((a, b) => (a.in === "path" ? 0 : 1) - (b.in === "path" ? 0 : 1));
  const rows = params.map((p) => [
    code(p.name),
    p.in,
    typeOf(p.schema),
    p.required ? "yes" : "",
    defaultOf(p.schema),
    constraints(p.schema),
    p.description ?? describe(p.schema),
  ]);
  return table(["Name", "In", "Type", "Required", "Default", "Constraints", "Description"], rows);
}

function bodySection(op) {
  const body = op.requestBody;
  if (!body) return [];
  const out = [];
  for (const [type, media] of Object.entries(body.content ?? {}).sort(([a], [b]) => a.localeCompare(b, "en"))) {
    const s = media.schema ?? {};
    const req = body.required ? "required" : "optional";
    if (isNamed(s)) {
      out.push(`**Request body** (${code(type)}, ${req}): ${typeOf(s)}.`);
    } else if (isObject(s) && s.properties) {
      out.push(`**Request body** (${code(type)}, ${req}):`, fieldsTable(s));
    } else {
      out.push(`**Request body** (${code(type)}, ${req}): ${typeOf(s)}. ${describe(s)}`.trim());
    }
  }
  return out;
}

const DEFAULT_DESCRIPTION = "Default Response";

function responsesSection(op) {
  const statuses = Object.keys(op.responses ?? {}).sort();
  const rows = [];
  const inline = [];
  for (const status of statuses) {
    const r = op.responses[status];
    const media = Object.entries(r.content ?? {}).sort(([a], [b]) => a.localeCompare(b, "en"));
    const s = media[0]?.[1].schema;
    let body = "";
    if (s && (s.type || s.anyOf || s.oneOf || s.properties || s.title)) {
      body = typeOf(s);
      if (!isNamed(s) && isObject(s) && s.properties) {
        body = `object (fields below)`;
        inline.push(`**Response ${code(status)}**:`, fieldsTable(s));
      } else if (s.type === "array" && isObject(s.items) && !isNamed(s.items) && s.items.properties) {
        inline.push(`**Response ${code(status)}**, each item:`, fieldsTable(s.items));
      }
    }
    // fastify's placeholder, or the words of the body's own schema (ErrorBody), say nothing here.
    const description = r.description === DEFAULT_DESCRIPTION || r.description === s?.description ? "" : r.description;
    rows.push([code(status), body || (media.length ? "" : "none"), description]);
  }
  return ["**Responses**:", table(["Status", "Body", "Description"], rows), ...inline];
}

/** Operations of one path that differ only in their method are shown once, with all the methods. */
function groupedOperations(ops) {
  const groups = [];
  for (const o of ops) {
    const key = JSON.stringify(o.op);
    const same = groups.find((g) => g.path === o.path && g.key === key);
    if (same) same.methods.push(o.method);
    else groups.push({ path: o.path, key, op: o.op, methods: [o.method] });
  }
  return groups;
}

function operationSection(g) {
  const { op } = g;
  const heading = `### ${g.methods.map((m) => code(m.toUpperCase())).join(" ")} ${code(g.path)}`;
  const parts = [heading, op.summary ?? ""];
  if (op.description) parts.push(op.description);
  if (Array.isArray(op.security) && op.security.length === 0) parts.push("No authentication.");
  const params = parametersTable(op);
  if (params) parts.push("**Parameters**:", params);
  parts.push(...bodySection(op), ...responsesSection(op));
  return parts.filter((p) => p !== "");
}

/**
 * The `/v1/sprites` routes repeat the `/v1/units` ones: one table, with each route's summary, which
 * says where its shape differs (the full schemas are in openapi.json).
 */
function compatSection(ops) {
  return [
    [
      "Every route under `/v1/units` is also served under `/v1/sprites`, in the shapes the public Sprites",
      "clients expect where those differ from the spec; the summary says where. The full schemas are in",
      "[openapi.json](openapi.json).",
    ].join(" "),
    table(
      ["Method", "Path", "Summary"],
      groupedOperations(ops).map((g) => [
        g.methods.map((m) => code(m.toUpperCase())).join(" "),
        code(g.path),
        g.op.summary ?? "",
      ]),
    ),
  ];
}

// ---- Error codes ------------------------------------------------------------------------------

/**
 * The error codes of `@ums/protocol` with the status and meaning their doc comments give
 * (`/** 404: no unit of that name … *\/ UnitNotFound: "UMS_UNIT_NOT_FOUND"`).
 */
async function errorCodes() {
  const protocol = join(root, "packages/protocol");
  const { ErrorCode } = await import(pathToFileURL(join(protocol, "dist/index.js")).href);
  const sources = readdirSync(join(protocol, "src"))
    .filter((f) => f.endsWith(".ts") && !f.endsWith(".test.ts"))
    .sort()
    .map((f) => readFileSync(join(protocol, "src", f), "utf8"))
    .join("\n");
  const rows = Object.entries(ErrorCode).map(([key, value]) => {
    const m = new RegExp(`/\\*\\*((?:(?!\\*/)[\\s\\S])*)\\*/\\s*${key}\\s*:`).exec(sources);
    const text = (m?.[1] ?? "")
      .split("\n")
      .map((l) => l.replace(/^\s*\*\s?/, "").trim())
      .join(" ")
      .trim();
    const status = /^(\d{3}):\s*/.exec(text);
    return { code: value, status: status?.[1] ?? "", meaning: status ? text.slice(status[0].length) : text };
  });
  return rows.sort((a, b) => a.status.localeCompare(b.status) || a.code.localeCompare(b.code));
}

// ---- The documents ----------------------------------------------------------------------------

/** The document with paths sorted and methods in a fixed order, so that route registration order does not matter. */
function sortedDocument(doc) {
  const paths = {};
  for (const path of Object.keys(doc.paths).sort()) {
    const ops = doc.paths[path];
    paths[path] = Object.fromEntries(
      Object.keys(ops)
        .sort((a, b) => METHODS.indexOf(a) - METHODS.indexOf(b) || a.localeCompare(b))
        .map((m) => [m, ops[m]]),
    );
  }
  return { ...doc, paths };
}

export function renderMarkdown(doc, codes) {
  const ops = Object.entries(doc.paths).flatMap(([path, o]) =>
    Object.entries(o).map(([method, op]) => ({ path, method, op, tag: op.tags?.[0] ?? "other" })),
  );
  const tags = [...new Set(ops.map((o) => o.tag))].sort();
  const out = [
    "# API reference",
    `<!-- Generated by scripts/api-reference.mjs from the OpenAPI document; do not edit: run \`${COMMAND}\`. -->`,
    `${doc.info.title}. ${doc.info.description ?? ""}`.trim(),
    [
      "This reference is generated from the OpenAPI 3.1 document that the server serves at",
      "`GET /v1/openapi.json` (checked in as [openapi.json](openapi.json)); the route schemas in",
      "`packages/server/src/api/` are its source. The interface itself is specified in the spec",
      "(unit service interface); [ARCHITECTURE.md](ARCHITECTURE.md) explains the server behind it.",
    ].join(" "),
    [
      "Every route takes `Authorization: Bearer <token>` unless it says otherwise. Request bodies are JSON",
      "unless a route says otherwise; unknown fields are rejected. Errors answer with",
      "[ErrorBody](#errorbody) (`{error, code}`) or, for `400`, [ValidationErrorBody](#validationerrorbody)",
      "(`{errors, code}`); [Error codes](#error-codes) lists every `code` with its status.",
    ].join(" "),
    "## Contents",
    [
      ...tags.map((t) => {
        const n = ops.filter((o) => o.tag === t).length;
        return `- [${t}](#${t}): ${n} operation${n === 1 ? "" : "s"}`;
      }),
      "- [Schemas](#schemas)",
      "- [Error codes](#error-codes)",
    ].join("\n"),
  ];
  for (const tag of tags) {
    out.push(`## ${tag}`);
    const mine = ops
      .filter((o) => o.tag === tag)
      .sort((a, b) => a.path.localeCompare(b.path) || METHODS.indexOf(a.method) - METHODS.indexOf(b.method));
    if (tag === COMPAT_TAG) out.push(...compatSection(mine));
    else for (const g of groupedOperations(mine)) out.push(...operationSection(g));
  }
  out.push("## Schemas", "The named object schemas the operations above refer to.");
  for (const [title, s] of namedSchemas(doc)) {
    out.push(`### ${title}`);
    if (s.description) out.push(s.description);
    if (s.properties) out.push(fieldsTable(s));
    else out.push(`${typeOf({ ...s, title: undefined })}.`);
  }
  out.push(
    "## Error codes",
    "Every error body carries one of these codes; clients branch on the code, never on the message. The status is the one the code is answered with.",
    table(
      ["Status", "Code", "Meaning"],
      codes.map((c) => [c.status, code(c.code), c.meaning]),
    ),
  );
  return `${out.join("\n\n")}\n`;
}

/** Text as biome's formatter writes it for `path` (the repository's biome.json applies). */
function biomeFormat(path, text) {
  const biome = join(root, "node_modules/.bin/biome");
  const r = spawnSync(biome, ["format", `--stdin-file-path=${path}`], { cwd: root, input: text, encoding: "utf8" });
  if (r.status !== 0) throw new Error(`biome format ${path} failed: ${r.stderr || r.stdout}`);
  return r.stdout;
}

/** The files this script writes, by path relative to the repository root, with their content. */
export async function generate() {
  const { openApiDocument } = await import(
    pathToFileURL(join(root, "packages/server/dist/api/openapi-document.js")).href
  );
  const doc = sortedDocument(await openApiDocument());
  return {
    [API_MD]: biomeFormat(API_MD, renderMarkdown(doc, await errorCodes())),
    [OPENAPI_JSON]: biomeFormat(OPENAPI_JSON, `${JSON.stringify(doc, null, 2)}\n`),
  };
}

/** A message per checked-in file that differs from `files` (empty: up to date). */
export function staleFiles(files, read = (p) => readFileSync(join(root, p), "utf8")) {
  return Object.entries(files)
    .filter(([path, text]) => {
      try {
        return read(path) !== text;
      } catch {
        return true;
      }
    })
    .map(([path]) => `${path} is stale: run ${COMMAND}`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const files = await generate();
  if (process.argv.includes("--check")) {
    const stale = staleFiles(files);
    for (const m of stale) console.error(m);
    process.exit(stale.length ? 1 : 0);
  }
  for (const [path, text] of Object.entries(files)) writeFileSync(join(root, path), text);
  console.error(`wrote ${Object.keys(files).join(", ")}`);
}
