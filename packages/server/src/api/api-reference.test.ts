import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { pathToFileURL } from "node:url";
import { ErrorCode } from "@ums/protocol";

// packages/server/dist/api/ → the repository root.
const root = new URL("../../../../", import.meta.url).pathname;

interface Generator {
  COMMAND: string;
  API_MD: string;
  OPENAPI_JSON: string;
  generate(): Promise<Record<string, string>>;
  staleFiles(files: Record<string, string>, read?: (path: string) => string): string[];
}

const load = async (): Promise<Generator> =>
  (await import(pathToFileURL(join(root, "scripts/api-reference.mjs")).href)) as Generator;

/** Rendering takes seconds (biome formats 400 kB): once for the whole file. */
let rendered: Promise<Record<string, string>> | undefined;
const generated = async () => {
  rendered ??= load().then((g) => g.generate());
  return rendered;
};

describe("docs/API.md, the API reference", () => {
  it("is what scripts/api-reference.mjs renders from the current route schemas", async () => {
    const g = await load();
    const stale = g.staleFiles(await generated());
    assert.deepEqual(stale, [], stale.join("\n"));
  });

  it("has a heading for every operation (a table row under /v1/sprites) and a row for every error code", async () => {
    const g = await load();
    const files = await generated();
    const md = files[g.API_MD] ?? "";
    const doc = JSON.parse(files[g.OPENAPI_JSON] ?? "{}") as { paths: Record<string, Record<string, unknown>> };
    const headings = md.split("\n").filter((l) => l.startsWith("### `"));
    const rows = md.split("\n").filter((l) => l.startsWith("| `"));
    const operations = Object.entries(doc.paths).flatMap(([path, ops]) => Object.keys(ops).map((m) => ({ path, m })));
    assert.ok(operations.length >= 40, `${operations.length} operations`);
    for (const { path, m } of operations) {
      const method = `\`${m.toUpperCase()}\``;
      if (path.startsWith("/v1/sprites")) {
        const row = new RegExp(`^\\| [^|]*${method}[^|]*\\| \`${path.replace(/[{}*]/g, "\\$&")}\` +\\|`);
        assert.ok(
          rows.some((r) => row.test(r)),
          `${m.toUpperCase()} ${path} has a row`,
        );
        assert.ok(
          doc.paths[path.replace("/v1/sprites", "/v1/units")]?.[m],
          `${m.toUpperCase()} ${path} has a /v1/units twin`,
        );
      } else {
        assert.ok(
          headings.some((h) => h.includes(method) && h.endsWith(` \`${path}\``)),
          `${m.toUpperCase()} ${path} has a heading`,
        );
      }
    }
    for (const code of Object.values(ErrorCode)) assert.match(md, new RegExp(`\\| \`${code}\` +\\|`), code);
  });

  it("reports a checked-in file that differs, naming the command that regenerates it", async () => {
    const g = await load();
    const files = { [g.API_MD]: "# API reference\n" };
    assert.deepEqual(
      g.staleFiles(files, () => "# API reference (edited by hand)\n"),
      [`docs/API.md is stale: run ${g.COMMAND}`],
    );
    assert.deepEqual(
      g.staleFiles(files, () => "# API reference\n"),
      [],
    );
    assert.deepEqual(
      g.staleFiles(files, () => {
        throw new Error("ENOENT");
      }),
      [`docs/API.md is stale: run ${g.COMMAND}`],
    );
    assert.equal(g.COMMAND, "npm run docs");
    assert.match(readFileSync(join(root, "package.json"), "utf8"), /"docs": "node scripts\/api-reference.mjs"/);
  });
});
