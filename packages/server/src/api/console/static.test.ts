import assert from "node:assert/strict";
import { mkdir, mkdtemp, rename, rm, symlink, writeFile } from "node:fs/promises";
import http from "node:http";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { brotliCompressSync, brotliDecompressSync, gunzipSync, gzipSync } from "node:zlib";
import { startSqliteServer, type TestServer } from "../../testing/server.js";

interface Raw {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Buffer;
}

/** A request with the path exactly as given (fetch would normalise `..` away). */
function raw(base: string, path: string, headers: Record<string, string> = {}, method = "GET"): Promise<Raw> {
  const u = new URL(base);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: u.port, path, method, headers, timeout: 20_000 }, (res) => {
      const chunks: Buffer[] = [];
      res.on("data", (c: Buffer) => chunks.push(c));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on("error", reject);
    });
    req.on("timeout", () => req.destroy(new Error(`no answer to ${path}`)));
    req.on("error", reject);
    req.end();
  });
}

const INDEX =
  '<!doctype html><html><head><script type="module" src="/console/assets/app-3f2a9c1d.js"></script></head><body></body></html>\n';
const APP = `console.log(${JSON.stringify("x".repeat(4000))});\n`;

describe("the console's files", () => {
  let s: TestServer;
  let root: string;
  let dist: string;

  before(async () => {
    root = await mkdtemp(join(tmpdir(), "ums-console-"));
    dist = join(root, "dist");
    await mkdir(join(dist, "assets"), { recursive: true });
    await writeFile(join(dist, "index.html"), INDEX);
    await writeFile(join(dist, "favicon.svg"), "<svg xmlns='http://www.w3.org/2000/svg'/>");
    await writeFile(join(dist, ".env"), "SECRET=1");
    const app = join(dist, "assets", "app-3f2a9c1d.js");
    await writeFile(app, APP);
    await writeFile(`${app}.br`, brotliCompressSync(APP));
    await writeFile(`${app}.gz`, gzipSync(APP));
    await writeFile(join(dist, "assets", "style-77aa01.css"), "body{color:red}");
    await writeFile(join(root, "secret.txt"), "outside the build");
    await symlink(join(root, "secret.txt"), join(dist, "assets", "link.txt"));
    s = await startSqliteServer({ consoleDir: dist });
  });
  after(async () => {
    await s?.close();
    await rm(root, { recursive: true, force: true });
  });

  it("sends / and /console to /console/", async () => {
    for (const path of ["/", "/console", "/console?x=1"]) {
      const r = await raw(s.url, path);
      assert.equal(r.status, 302, path);
      assert.equal(r.headers.location, "/console/", path);
    }
  });

  it("serves the index revalidated, under a strict CSP, for the page's own paths too", async () => {
    for (const path of ["/console/", "/console/index.html", "/console/units/web-1", "/console/units/web-1/terminal"]) {
      const r = await raw(s.url, path, { host: "ums.example:7070" });
      assert.equal(r.status, 200, path);
      assert.equal(r.body.toString(), INDEX, path);
      assert.equal(r.headers["content-type"], "text/html; charset=utf-8");
      assert.equal(r.headers["cache-control"], "no-cache");
      assert.equal(r.headers["x-content-type-options"], "nosniff");
      const csp = String(r.headers["content-security-policy"]);
      assert.match(csp, /(^|; )default-src 'self'(;|$)/);
      assert.match(csp, /(^|; )script-src 'self'(;|$)/, "no inline script");
      assert.match(csp, /(^|; )connect-src 'self' ws:\/\/ums\.example:7070 wss:\/\/ums\.example:7070(;|$)/);
      assert.match(csp, /frame-ancestors 'none'/);
      assert.ok(!csp.includes("unsafe"), csp);
    }
    const odd = await raw(s.url, "/console/", { host: "evil.example; script-src *" });
    assert.equal(odd.status, 200);
    assert.match(String(odd.headers["content-security-policy"]), /connect-src 'self';/, "a strange Host is not echoed");
    const head = await raw(s.url, "/console/", {}, "HEAD");
    assert.equal(head.status, 200);
    assert.equal(head.body.length, 0);
    const again = await raw(s.url, "/console/", {
      "if-none-match": String((await raw(s.url, "/console/")).headers.etag),
    });
    assert.equal(again.status, 304, "revalidation answers 304 while the build is unchanged");
  });

  it("serves hashed assets immutable and precompressed by Accept-Encoding", async () => {
    const path = "/console/assets/app-3f2a9c1d.js";
    const cases: [string | undefined, string | undefined][] = [
      ["gzip, deflate, br, zstd", "br"],
      ["br", "br"],
      ["gzip", "gzip"],
      ["br;q=0, gzip;q=0.8", "gzip"],
      ["*", "br"],
      ["identity", undefined],
      [undefined, undefined],
    ];
    for (const [accept, encoding] of cases) {
      const r = await raw(s.url, path, accept === undefined ? {} : { "accept-encoding": accept });
      assert.equal(r.status, 200, String(accept));
      assert.equal(r.headers["cache-control"], "public, max-age=31536000, immutable");
      assert.equal(r.headers["content-type"], "text/javascript; charset=utf-8");
      assert.equal(r.headers.vary, "Accept-Encoding");
      assert.equal(r.headers["content-encoding"], encoding, String(accept));
      const body = encoding === "br" ? brotliDecompressSync(r.body) : encoding === "gzip" ? gunzipSync(r.body) : r.body;
      assert.equal(body.toString(), APP, String(accept));
      if (encoding) assert.ok(r.body.length < APP.length / 10, "the compressed file was sent");
    }
    const css = await raw(s.url, "/console/assets/style-77aa01.css", { "accept-encoding": "br" });
    assert.equal(css.status, 200);
    assert.equal(css.headers["content-encoding"], undefined, "no sibling: sent as it is");
    assert.equal(css.headers["content-type"], "text/css; charset=utf-8");
    const icon = await raw(s.url, "/console/favicon.svg");
    assert.equal(icon.status, 200);
    assert.equal(icon.headers["cache-control"], "no-cache", "not hashed: revalidated");
    assert.equal(icon.headers["content-type"], "image/svg+xml");
  });

  it("never serves a file outside the build, a dot file or a missing asset (404, never 500)", async () => {
    const paths = [
      "/console/../secret.txt",
      "/console/%2e%2e/secret.txt",
      "/console/assets/..%2f..%2fsecret.txt",
      "/console/assets/%2e%2e%2f%2e%2e%2fsecret.txt",
      "/console/assets/..%5c..%5csecret.txt",
      "/console/assets/link.txt",
      "/console/.env",
      "/console/%2eenv",
      "/console/assets/app-3f2a9c1d.js%00.png",
      "/console/assets/%E0%A4%A",
      "/console/assets/missing-0000.js",
      "/console/assets/",
      "/console/assets",
      `/console/assets/${"a".repeat(300)}.js`,
      "/console/nothing.js",
      "/console/assets/app-3f2a9c1d.js/x",
    ];
    for (const path of paths) {
      const r = await raw(s.url, path);
      assert.ok(r.status === 404 || r.status === 400, `${path}: ${r.status}`);
      assert.ok(!r.body.toString().includes("outside the build") && !r.body.toString().includes("SECRET"), path);
    }
    for (const path of [`/console/${"a/".repeat(20)}b`, "/console//etc/passwd", "/console/%2Fetc%2Fpasswd"]) {
      const page = await raw(s.url, path);
      assert.equal(page.status, 200, `${path}: a path of the page's own gets the index`);
      assert.equal(page.body.toString(), INDEX, path);
    }
  });

  it("a missing build answers a clear page (404), not a 500; it is served again once built", async () => {
    await rename(dist, `${dist}.away`);
    try {
      const page = await raw(s.url, "/console/");
      assert.equal(page.status, 404);
      assert.match(page.headers["content-type"] ?? "", /^text\/html/);
      assert.match(page.body.toString(), /The console is not built/);
      assert.match(page.body.toString(), /npm run build/);
      assert.equal((await raw(s.url, "/console/assets/app-3f2a9c1d.js")).status, 404);
      assert.equal((await raw(s.url, "/")).status, 302);
    } finally {
      await rename(`${dist}.away`, dist);
    }
    assert.equal((await raw(s.url, "/console/")).status, 200);
  });

  it("the API beside it is unchanged: /v1 still needs a token", async () => {
    assert.equal((await raw(s.url, "/v1/units")).status, 401);
    assert.equal((await raw(s.url, "/healthz")).status, 200);
  });
});
