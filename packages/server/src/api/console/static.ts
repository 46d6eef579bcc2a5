import { createHash } from "node:crypto";
import { readFile, realpath, stat } from "node:fs/promises";
import { extname, join, sep } from "node:path";
import { fileURLToPath } from "node:url";
import type { FastifyReply, FastifyRequest } from "fastify";
import type { ApiInstance } from "../instance.js";

/**
 * Issue #14: where the console's build is (packages/console, `npm run build`): `index.html`, other
 * files beside it, and content-hashed files under `assets/`, each with `.br` and `.gz` siblings made
 * at build time. From this file (packages/server/dist/api/console/) that is packages/console/dist.
 */
export const CONSOLE_DIST_DIR = fileURLToPath(new URL("../../../../console/dist", import.meta.url));

const TYPES: Readonly<Record<string, string>> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".map": "application/json",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".webp": "image/webp",
  ".woff2": "font/woff2",
  ".woff": "font/woff",
  ".txt": "text/plain; charset=utf-8",
  ".wasm": "application/wasm",
};

/** One path segment of a file we serve: no dot files (so no `.` or `..`), no separators, no escapes. */
const SEGMENT = /^[A-Za-z0-9_][A-Za-z0-9._~-]{0,199}$/;
const IMMUTABLE = "public, max-age=31536000, immutable";
/** A Host header fit to be named in the CSP (anything else: the CSP names no websocket source). */
const HOST = /^[A-Za-z0-9.-]{1,253}(?::\d{1,5})?$|^\[[0-9A-Fa-f:.]{2,45}\](?::\d{1,5})?$/;

/**
 * The index page's CSP: everything from this origin only, no inline script or style, websockets to
 * this host (CSP 3 lets 'self' cover ws: of the same host; older engines need it named).
 */
export function consoleCsp(host: string | undefined): string {
  const ws = host && HOST.test(host) ? ` ws://${host} wss://${host}` : "";
  return [
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "font-src 'self'",
    `connect-src 'self'${ws}`,
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join("; ");
}

/** The encodings the client accepts with a q above zero (RFC 9110 §12.5.3). */
function accepted(header: string | string[] | undefined): Set<string> {
  const out = new Set<string>();
  for (const part of (Array.isArray(header) ? header.join(",") : (header ?? "")).split(",")) {
    const [name, ...params] = part.trim().toLowerCase().split(";");
    if (!name) continue;
    const q = params.map((p) => p.trim()).find((p) => p.startsWith("q="));
    if (q !== undefined && !(Number(q.slice(2)) > 0)) continue;
    out.add(name);
  }
  if (out.has("*")) out.add("br").add("gzip");
  return out;
}

async function fileSize(path: string): Promise<number | undefined> {
  try {
    const st = await stat(path);
    return st.isFile() ? st.size : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The file for the segments under `root`, or undefined: every segment must be a plain name, and the
 * real path (symbolic links followed) must still be inside the build.
 */
async function findFile(root: string, segments: readonly string[]): Promise<string | undefined> {
  if (segments.length === 0 || segments.length > 8 || !segments.every((s) => SEGMENT.test(s))) return undefined;
  let real: string;
  let realRoot: string;
  try {
    realRoot = await realpath(root);
    real = await realpath(join(root, ...segments));
  } catch {
    return undefined;
  }
  if (!real.startsWith(realRoot + sep)) return undefined;
  return (await fileSize(real)) === undefined ? undefined : real;
}

/** The headers of the console's pages: revalidated on every load, under the console's CSP. */
function pageHeaders(req: FastifyRequest): Record<string, string> {
  return {
    "cache-control": "no-cache",
    "content-security-policy": consoleCsp(req.headers.host),
    "referrer-policy": "same-origin",
    "cross-origin-opener-policy": "same-origin",
  };
}

/** The page for a console that was not built (404: nothing to serve here, not a server fault). */
function notBuilt(reply: FastifyReply, dir: string): FastifyReply {
  return reply
    .code(404)
    .type("text/html; charset=utf-8")
    .headers({
      "cache-control": "no-store",
      "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'",
      "x-content-type-options": "nosniff",
    })
    .send(
      `<!doctype html><html><head><meta charset="utf-8"><title>ums console not built</title>` +
        `<style>body{font:16px system-ui;margin:4em auto;max-width:36em}</style></head><body>` +
        `<h1>The console is not built</h1><p>This server found no <code>index.html</code> in ` +
        `<code>${dir.replace(/[&<>"']/g, "")}</code>. Build it with <code>npm run build</code> in the ums checkout ` +
        "and reload; the API at <code>/v1</code> works without it.</p></body></html>\n",
    );
}

async function sendFile(
  req: FastifyRequest,
  reply: FastifyReply,
  file: string,
  headers: Record<string, string>,
): Promise<FastifyReply> {
  const encodings = accepted(req.headers["accept-encoding"]);
  let path = file;
  let encoding: string | undefined;
  for (const [name, suffix] of [
    ["br", ".br"],
    ["gzip", ".gz"],
  ] as const) {
    if (encodings.has(name) && (await fileSize(file + suffix)) !== undefined) {
      path = file + suffix;
      encoding = name;
      break;
    }
  }
  let body: Buffer;
  try {
    body = await readFile(path);
  } catch {
    // Gone between the look and the read (a rebuild): as if it had never been there.
    return reply.code(404).type("text/plain; charset=utf-8").header("cache-control", "no-store").send("not found\n");
  }
  const etag = `"${createHash("sha256").update(body).digest("base64url").slice(0, 27)}"`;
  reply.headers({
    ...headers,
    "content-type": TYPES[extname(file).toLowerCase()] ?? "application/octet-stream",
    "x-content-type-options": "nosniff",
    vary: "Accept-Encoding",
    etag,
  });
  if (encoding) reply.header("content-encoding", encoding);
  const match = req.headers["if-none-match"];
  if (match?.split(",").some((t) => t.trim().replace(/^W\//, "") === etag)) {
    return reply.code(304).send();
  }
  return reply.code(200).send(body);
}

/**
 * Issue #14: the console, served by `ums serve` itself: `/` → `/console/`; the index page (for
 * `/console/` and any path of the page's own that is not a file, so its links survive a reload)
 * with `Cache-Control: no-cache` and a strict CSP; `assets/` (content-hashed names) with a year's
 * immutable caching; `.br`/`.gz` siblings chosen by Accept-Encoding. No route here needs a token: the
 * page signs in itself (session.ts).
 */
export function consoleStaticRoutes(app: ApiInstance, dir: string = CONSOLE_DIST_DIR): void {
  const hide = { schema: { hide: true } };
  const redirect = (to: string) => async (_req: FastifyRequest, reply: FastifyReply) =>
    reply.code(302).header("location", to).header("cache-control", "no-cache").send();
  app.get("/", hide, redirect("/console/"));

  const serve = async (req: FastifyRequest, reply: FastifyReply) => {
    const rawPath = (req.raw.url ?? "/").split("?")[0] ?? "/";
    // `/console` (fastify's ignoreTrailingSlash routes it here too): the page's relative links need the slash.
    if (rawPath === "/console") return redirect("/console/")(req, reply);
    let segments: string[];
    try {
      segments = rawPath
        .slice("/console/".length)
        .split("/")
        .filter((s) => s !== "")
        .map((s) => decodeURIComponent(s));
    } catch {
      segments = ["%"];
    }
    const isAsset = segments[0] === "assets";
    const file = segments.length > 0 ? await findFile(dir, segments) : undefined;
    if (file && isAsset) return sendFile(req, reply, file, { "cache-control": IMMUTABLE });
    if (file && !file.endsWith(".html")) return sendFile(req, reply, file, { "cache-control": "no-cache" });
    if (file) return sendFile(req, reply, file, pageHeaders(req));
    // A hashed file that is not there is an old page's: 404, never the index in its place.
    if (isAsset || (segments.length > 0 && !file && /\.[a-z0-9]+$/i.test(segments[segments.length - 1] ?? ""))) {
      return reply.code(404).type("text/plain; charset=utf-8").header("cache-control", "no-store").send("not found\n");
    }
    const index = await findFile(dir, ["index.html"]);
    if (!index) return notBuilt(reply, dir);
    return sendFile(req, reply, index, pageHeaders(req));
  };
  app.get("/console", hide, serve);
  app.get("/console/*", hide, serve);
}
