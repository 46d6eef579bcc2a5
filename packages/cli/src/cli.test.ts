// The CLI contract, through the real launcher bin/ums: every test spawns it as a user would, with a
// data dir of its own, and stops only the processes it started (by PID).

import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer, type Server } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, describe, it, type TestContext } from "node:test";
import { fileURLToPath } from "node:url";
import { freePort, testDialects } from "@ums/server/testing";

const ROOT = resolve(fileURLToPath(import.meta.url), "../../../..");
const UMS = join(ROOT, "bin", "ums");
const TOKEN_RE = /^ums_[0-9A-Za-z]{43}$/;

/** The environment without any UMS_* setting of whoever runs the tests (nor node:test's own marker). */
const BASE_ENV: NodeJS.ProcessEnv = Object.fromEntries(
  Object.entries(process.env).filter(([k]) => !k.startsWith("UMS_") && k !== "NODE_TEST_CONTEXT"),
);

const started = new Set<ChildProcess>();
after(() => {
  for (const child of started) killChild(child);
});

function alive(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

function killChild(child: ChildProcess): void {
  if (alive(child) && child.pid !== undefined) {
    try {
      process.kill(child.pid, "SIGKILL");
    } catch {}
  }
}

function spawnUms(args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): ChildProcess {
  const child = spawn(UMS, args, {
    cwd: opts.cwd ?? ROOT,
    env: { ...BASE_ENV, ...opts.env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  started.add(child);
  child.on("exit", () => started.delete(child));
  return child;
}

interface RunResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

function collect(child: ChildProcess): { stdout: () => string; stderr: () => string } {
  let stdout = "";
  let stderr = "";
  child.stdout?.setEncoding("utf8").on("data", (d: string) => {
    stdout += d;
  });
  child.stderr?.setEncoding("utf8").on("data", (d: string) => {
    stderr += d;
  });
  return { stdout: () => stdout, stderr: () => stderr };
}

function exited(child: ChildProcess): Promise<{ code: number | null; signal: NodeJS.Signals | null }> {
  if (!alive(child)) return Promise.resolve({ code: child.exitCode, signal: child.signalCode });
  return new Promise((res) => child.once("close", (code, signal) => res({ code, signal })));
}

/** Runs `ums ARGS` to completion; one that is still running after `timeoutMs` is killed (and fails). */
async function ums(args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string; timeoutMs?: number } = {}) {
  const child = spawnUms(args, opts);
  const out = collect(child);
  const timer = setTimeout(() => killChild(child), opts.timeoutMs ?? 15_000);
  const { code, signal } = await exited(child);
  clearTimeout(timer);
  return { code, signal, stdout: out.stdout(), stderr: out.stderr() } satisfies RunResult;
}

async function umsOk(args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<string> {
  const r = await ums(args, opts);
  assert.equal(r.code, 0, `ums ${args.join(" ")} failed (${r.code}): ${r.stderr}`);
  return r.stdout;
}

async function createToken(dataDir: string, org: string, ...extra: string[]): Promise<string> {
  const token = (await umsOk(["token", "create", "--org", org, "--data-dir", dataDir, ...extra])).trim();
  assert.match(token, TOKEN_RE);
  return token;
}

/**
 * Temp dirs are removed when the whole file is done, not after each test: a test's server must be
 * stopped and its host resources (named in the data dir) released first, and node runs a test's
 * `after` hooks in the order they were added.
 */
const atEnd: (() => Promise<void>)[] = [];
after(async () => {
  for (const task of atEnd) await task();
});

async function tempDir(_t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "ums-cli-test-"));
  atEnd.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A fresh database in the PostgreSQL test cluster (UMS_TEST_PG_URL), dropped when the file is done. */
async function createPgDatabase(): Promise<string> {
  const postgres = testDialects.find((d) => d.name === "postgres");
  const db = await postgres?.createDatabase();
  if (!db?.databaseUrl) throw new Error("no PostgreSQL database");
  // Dropped at the end (like the temp dirs): the test's server cleanup reads it first.
  atEnd.push(db.drop);
  return db.databaseUrl;
}

interface Served {
  readonly url: string;
  readonly child: ChildProcess;
  stderr(): string;
  /** Sends `signal` and waits for the exit. */
  stop(signal: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `ums serve ARGS` and waits until GET /healthz answers on `port`. */
async function serve(t: TestContext, port: number, args: string[], env: NodeJS.ProcessEnv = {}): Promise<Served> {
  // Units live on the shared test pool and image, in a subnet of this server's own.
  const { cleanupStoppedServer, lockSubnet, testServeEnv } = await import("@ums/server/testing");
  const subnet = await lockSubnet();
  const child = spawnUms(["serve", ...args], { env: { ...(await testServeEnv(subnet.n)), ...env } });
  const flag = args.indexOf("--data-dir");
  const dataDir = flag >= 0 ? args[flag + 1] : env.UMS_DATA_DIR;
  t.after(async () => {
    killChild(child);
    if (alive(child)) await exited(child);
    if (dataDir) {
      await cleanupStoppedServer(dataDir, env.UMS_DATABASE_URL);
    }
    await subnet.unlock();
  });
  const out = collect(child);
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 15_000;
  for (;;) {
    if (!alive(child)) assert.fail(`ums serve exited early (${child.exitCode}): ${out.stderr()}`);
    try {
      const res = await fetch(`${url}/healthz`);
      if (res.ok && (await res.text()) === '{"ok":true}') break;
    } catch {}
    if (Date.now() > deadline) assert.fail(`ums serve did not become ready on ${url}: ${out.stderr()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url,
    child,
    stderr: out.stderr,
    async stop(signal) {
      assert.ok(child.pid !== undefined);
      process.kill(child.pid, signal);
      const timer = setTimeout(() => killChild(child), 10_000);
      const result = await exited(child);
      clearTimeout(timer);
      return result;
    },
  };
}

interface ApiResult {
  status: number;
  headers: Headers;
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON shapes.
  body: any;
}

async function api(base: string, method: string, path: string, token?: string, json?: unknown): Promise<ApiResult> {
  const headers: Record<string, string> = {};
  if (token) headers.authorization = `Bearer ${token}`;
  if (json !== undefined) headers["content-type"] = "application/json";
  const res = await fetch(base + path, {
    method,
    headers,
    ...(json !== undefined && { body: JSON.stringify(json) }),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : undefined };
}

/** The bytes SQLite keeps for the store: the database file and, when present, its write-ahead log. */
async function sqliteBytes(dataDir: string): Promise<Buffer> {
  const parts = [await readFile(join(dataDir, "ums.db"))];
  const wal = join(dataDir, "ums.db-wal");
  if (existsSync(wal)) parts.push(await readFile(wal));
  return Buffer.concat(parts);
}

// biome-ignore lint/suspicious/noExplicitAny: pino log lines.
function jsonLogLines(stderr: string): any[] {
  return stderr
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l));
}

// Every test has its own data dir (and port), so they run side by side: each `ums` run spends most
// of its time loading modules.
describe("ums token", { concurrency: 4 }, () => {
  it("create prints only the token on one line and stores only its hash in <data-dir>/ums.db", async (t) => {
    const dir = await tempDir(t);
    const r = await ums(["token", "create", "--org", "hash-check-org", "--name", "ci-deploy-key", "--data-dir", dir]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^ums_[0-9A-Za-z]{43}\n$/);
    assert.equal(r.stderr, "");
    const token = r.stdout.trim();
    const bytes = await sqliteBytes(dir);
    // The search works: what is stored in clear is found.
    assert.ok(bytes.includes("hash-check-org"));
    assert.ok(bytes.includes("ci-deploy-key"));
    assert.equal(bytes.includes(token), false);
    assert.equal(bytes.includes(token.slice(4)), false);
    assert.equal(bytes.includes(token.slice(4, 24)), false);
  });

  it("create uses ./data under the working directory by default", async (t) => {
    const cwd = await tempDir(t);
    await umsOk(["token", "create", "--org", "demo"], { cwd });
    assert.ok(existsSync(join(cwd, "data", "ums.db")));
  });

  it("create rejects a bad org slug with exit 2 and a message, creating nothing", async (t) => {
    const dir = await tempDir(t);
    for (const slug of ["Bad_Slug", "ends-"]) {
      const r = await ums(["token", "create", "--org", slug, "--data-dir", dir]);
      assert.equal(r.code, 2, `${slug}: ${r.stderr}`);
      assert.equal(r.stdout, "");
      assert.match(r.stderr, /^ums: --org '.*' .+\n$/);
      assert.ok(r.stderr.includes(slug), r.stderr);
    }
    assert.equal(existsSync(join(dir, "ums.db")), false);
  });

  it("list never prints secrets, in text or --json, and filters by --org", async (t) => {
    const dir = await tempDir(t);
    const a = await createToken(dir, "alpha", "--name", "laptop");
    const b = await createToken(dir, "beta", "--name", "ci", "--role", "member");
    assert.notEqual(a, b);

    const text = await umsOk(["token", "list", "--data-dir", dir]);
    const lines = text.trimEnd().split("\n");
    assert.equal(lines.length, 3);
    assert.deepEqual(lines[0]?.split("\t"), ["ID", "ORG", "NAME", "ROLE", "CREATED", "LAST USED", "STATE"]);
    assert.match(text, /\talpha\tlaptop\tadmin\t.*\tactive/);
    assert.match(text, /\tbeta\tci\tmember\t.*\tactive/);

    const json = await umsOk(["token", "list", "--data-dir", dir, "--json"]);
    const rows = json
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l));
    assert.deepEqual(rows.map((r) => [r.org, r.name, r.role, r.revoked_at]).sort(), [
      ["alpha", "laptop", "admin", null],
      ["beta", "ci", "member", null],
    ]);
    for (const r of rows) {
      assert.match(r.id, /^tok_[0-9a-z]{16}$/);
      assert.deepEqual(Object.keys(r).sort(), [
        "created_at",
        "id",
        "last_used_at",
        "name",
        "org",
        "revoked_at",
        "role",
      ]);
    }
    for (const out of [text, json]) {
      for (const secret of [a, b]) {
        assert.equal(out.includes(secret), false);
        assert.equal(out.includes(secret.slice(4, 24)), false);
      }
      assert.equal(/ums_[0-9A-Za-z]{10}/.test(out), false);
    }

    const onlyBeta = (await umsOk(["token", "list", "--data-dir", dir, "--org", "beta", "--json"])).trimEnd();
    assert.equal(onlyBeta.split("\n").length, 1);
    assert.equal(JSON.parse(onlyBeta).name, "ci");
  });
});

describe("ums org set-limits", { concurrency: 4 }, () => {
  it("needs at least one limit flag (exit 2)", async (t) => {
    const dir = await tempDir(t);
    const r = await ums(["org", "set-limits", "acme", "--data-dir", dir]);
    assert.equal(r.code, 2);
    assert.match(r.stderr, /^ums: .*--max-units/);
    assert.equal(r.stdout, "");
  });

  it("refuses an unknown organization and limits that are not whole numbers >= 0 (exit 2)", async (t) => {
    const dir = await tempDir(t);
    const unknown = await ums(["org", "set-limits", "nope", "--max-units", "3", "--data-dir", dir]);
    assert.equal(unknown.code, 2);
    assert.match(unknown.stderr, /no organization 'nope'/);
    for (const value of ["abc", "-1"]) {
      const r = await ums(["org", "set-limits", "nope", `--running-limit=${value}`, "--data-dir", dir]);
      assert.equal(r.code, 2, `${value}: ${r.stderr}`);
      assert.ok(r.stderr.includes(`--running-limit must be a whole number >= 0, got '${value}'`), r.stderr);
    }
  });

  it("prints the resulting limits; limits not given keep their value", async (t) => {
    const dir = await tempDir(t);
    await createToken(dir, "acme");
    assert.equal(
      await umsOk(["org", "set-limits", "acme", "--max-units", "2", "--data-dir", dir]),
      "acme: max-units 2, running-limit 10, warm-limit 20\n",
    );
    assert.equal(
      await umsOk(["org", "set-limits", "acme", "--warm-limit", "0", "--running-limit", "7", "--data-dir", dir]),
      "acme: max-units 2, running-limit 7, warm-limit 0\n",
    );
  });
});

describe("ums serve", { concurrency: 4 }, () => {
  it("serves CLI tokens, flags beat env, logs JSON to stderr, exits 0 on SIGTERM", async (t) => {
    const dir = await tempDir(t);
    const otherDir = await tempDir(t);
    const token = await createToken(dir, "acme");
    const port = await freePort();
    const server = await serve(
      t,
      port,
      ["--data-dir", dir, "--listen", `127.0.0.1:${port}`, "--unit-host", "flag.example.test"],
      { UMS_DATA_DIR: otherDir, UMS_LISTEN: "not-an-address", UMS_UNIT_HOST: "env.example.test" },
    );

    const org = await api(server.url, "GET", "/v1/organization", token);
    assert.equal(org.status, 200);
    assert.equal(org.body.organization.slug, "acme");
    assert.equal(org.body.organization.max_sprites, 1000);

    const anonymous = await api(server.url, "GET", "/v1/organization");
    assert.equal(anonymous.status, 401);
    assert.equal(anonymous.body.code, "UMS_UNAUTHORIZED");
    const wrong = await api(server.url, "GET", "/v1/units", `ums_${"x".repeat(43)}`);
    assert.equal(wrong.status, 401);

    const unit = await api(server.url, "POST", "/v1/units", token, { name: "web" });
    assert.equal(unit.status, 201);
    assert.match(unit.body.url, new RegExp(`^http://web-[a-z0-9]{8}\\.flag\\.example\\.test:${port}$`));

    // With the server running the token is still nowhere in the database files (WAL included).
    const bytes = await sqliteBytes(dir);
    assert.ok(bytes.includes("acme"));
    assert.equal(bytes.includes(token), false);
    assert.equal(existsSync(join(otherDir, "ums.db")), false);

    assert.deepEqual(await server.stop("SIGTERM"), { code: 0, signal: null });
    const stderr = server.stderr();
    assert.equal(stderr.includes(token), false, "the token leaked into the logs");
    const logs = jsonLogLines(stderr);
    const listening = logs.find((l) => l.msg === "ums listening");
    assert.ok(listening, stderr);
    assert.equal(listening.port, port);
    assert.equal(listening.dialect, "sqlite");
    assert.equal(listening.dataDir, dir);
    assert.equal(listening.level, 30);
    assert.equal(typeof listening.time, "number");
    assert.ok(logs.some((l) => l.msg === "request" && l.url === "/v1/units" && l.status === 201));
    assert.ok(logs.some((l) => l.msg === "shutting down" && l.signal === "SIGTERM"));
  });

  it("a token revoked with the CLI while the server runs answers 401 on its next request; SIGINT exits 0", async (t) => {
    const dir = await tempDir(t);
    const keep = await createToken(dir, "acme", "--name", "keep");
    const doomed = await createToken(dir, "acme", "--name", "doomed");
    const port = await freePort();
    const server = await serve(t, port, ["--data-dir", dir, "--listen", `127.0.0.1:${port}`]);

    assert.equal((await api(server.url, "GET", "/v1/units", doomed)).status, 200);
    assert.equal((await api(server.url, "GET", "/v1/units", keep)).status, 200);

    const rows = (await umsOk(["token", "list", "--data-dir", dir, "--json"]))
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l));
    const id = rows.find((r) => r.name === "doomed")?.id;
    assert.match(id, /^tok_/);
    assert.equal(await umsOk(["token", "revoke", id, "--data-dir", dir]), `revoked ${id}\n`);

    const refused = await api(server.url, "GET", "/v1/units", doomed);
    assert.equal(refused.status, 401);
    assert.equal(refused.body.code, "UMS_UNAUTHORIZED");
    assert.match(refused.headers.get("www-authenticate") ?? "", /^Bearer .*error="invalid_token"/);
    assert.equal((await api(server.url, "GET", "/v1/units", keep)).status, 200);

    // Revoking an id that is not an active token is a usage error.
    const again = await ums(["token", "revoke", id, "--data-dir", dir]);
    assert.equal(again.code, 2, again.stderr);
    assert.equal(again.stderr, `ums: no active token with id '${id}'\n`);

    assert.deepEqual(await server.stop("SIGINT"), { code: 0, signal: null });
    assert.ok(jsonLogLines(server.stderr()).some((l) => l.msg === "shutting down" && l.signal === "SIGINT"));
  });

  it("org set-limits applies to a running server: limits are reported and the third unit is refused", async (t) => {
    const dir = await tempDir(t);
    const token = await createToken(dir, "acme");
    const port = await freePort();
    const server = await serve(t, port, ["--data-dir", dir, "--listen", `127.0.0.1:${port}`]);

    await umsOk([
      "org",
      "set-limits",
      "acme",
      "--max-units",
      "2",
      "--running-limit",
      "3",
      "--warm-limit",
      "4",
      "--data-dir",
      dir,
    ]);

    const list = await api(server.url, "GET", "/v1/units", token);
    assert.equal(list.status, 200);
    assert.equal(list.body.name, "acme");
    assert.equal(list.body.running_limit, 3);
    assert.equal(list.body.warm_limit, 4);
    const org = await api(server.url, "GET", "/v1/organization", token);
    assert.equal(org.body.organization.max_sprites, 2);
    assert.equal(org.body.organization.active_sprite_limit, 3);

    assert.equal((await api(server.url, "POST", "/v1/units", token, { name: "one" })).status, 201);
    assert.equal((await api(server.url, "POST", "/v1/units", token, { name: "two" })).status, 201);
    const third = await api(server.url, "POST", "/v1/units", token, { name: "three" });
    assert.equal(third.status, 403);
    assert.equal(third.body.code, "UMS_LIMIT_REACHED");
    assert.match(third.body.error, /\b2\b/);
    assert.equal((await api(server.url, "GET", "/v1/units/three", token)).status, 404);

    // Raising the limit from the CLI lets the next create through at once.
    await umsOk(["org", "set-limits", "acme", "--max-units", "3", "--data-dir", dir]);
    assert.equal((await api(server.url, "POST", "/v1/units", token, { name: "three" })).status, 201);
    const after = await api(server.url, "GET", "/v1/units", token);
    assert.deepEqual(
      after.body.sprites.map((u: { name: string }) => u.name),
      ["one", "three", "two"],
    );
    assert.equal(after.body.running_limit, 3);
    assert.equal(after.body.warm_limit, 4);

    assert.deepEqual(await server.stop("SIGTERM"), { code: 0, signal: null });
  });

  it("reads UMS_DATA_DIR, UMS_LISTEN and UMS_UNIT_HOST; unit URLs are http://<name>-<8>.<unit_host>:<port>", async (t) => {
    const dir = await tempDir(t);
    const env = { UMS_DATA_DIR: dir };
    const token = (await umsOk(["token", "create", "--org", "envorg"], { env })).trim();
    assert.match(token, TOKEN_RE);
    assert.ok(existsSync(join(dir, "ums.db")));
    const port = await freePort();
    const server = await serve(t, port, [], {
      ...env,
      UMS_LISTEN: `127.0.0.1:${port}`,
      UMS_UNIT_HOST: "units.example.test",
    });

    const created = await api(server.url, "POST", "/v1/units", token, { name: "my-app2" });
    assert.equal(created.status, 201);
    assert.equal(created.body.organization, "envorg");
    const url: string = created.body.url;
    assert.match(url, new RegExp(`^http://my-app2-[a-z0-9]{8}\\.units\\.example\\.test:${port}$`));
    const got = await api(server.url, "GET", "/v1/units/my-app2", token);
    assert.equal(got.body.url, url);
    const other = await api(server.url, "POST", "/v1/units", token, { name: "other" });
    const random = (u: string) => /-([a-z0-9]{8})\./.exec(u)?.[1];
    assert.match(other.body.url, new RegExp(`^http://other-[a-z0-9]{8}\\.units\\.example\\.test:${port}$`));
    assert.notEqual(random(other.body.url), random(url));

    assert.deepEqual(await server.stop("SIGINT"), { code: 0, signal: null });
  });

  it("a bad --listen or UMS_LISTEN value exits 2 with a message naming the value", async (t) => {
    const dir = await tempDir(t);
    for (const value of ["nonsense", "127.0.0.1:70000"]) {
      const r = await ums(["serve", "--data-dir", dir, "--listen", value], { timeoutMs: 10_000 });
      assert.equal(r.code, 2, `${value}: ${r.stderr}`);
      assert.ok(r.stderr.includes(value), r.stderr);
    }
    const fromEnv = await ums(["serve", "--data-dir", dir], { env: { UMS_LISTEN: "localhost" }, timeoutMs: 10_000 });
    assert.equal(fromEnv.code, 2);
    assert.match(fromEnv.stderr, /'localhost'/);
  });

  it("a listen port already in use exits 1 naming the address", async (t) => {
    const dir = await tempDir(t);
    const holder: Server = createServer();
    await new Promise<void>((res) => holder.listen(0, "127.0.0.1", res));
    t.after(() => new Promise<void>((res) => holder.close(() => res())));
    const addr = holder.address();
    const port = typeof addr === "object" && addr ? addr.port : 0;
    const r = await ums(["serve", "--data-dir", dir, "--listen", `127.0.0.1:${port}`], { timeoutMs: 10_000 });
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, new RegExp(`EADDRINUSE.*127\\.0\\.0\\.1:${port}`));
  });

  const pgUrl = process.env.UMS_TEST_PG_URL;
  it("with UMS_DATABASE_URL=postgres://… the CLI and the server share PostgreSQL, and no ums.db is made", {
    skip: pgUrl ? false : "UMS_TEST_PG_URL is not set (scripts/test sets it)",
  }, async (t) => {
    assert.ok(pgUrl);
    const databaseUrl = await createPgDatabase();
    const dir = await tempDir(t);
    const env = { UMS_DATABASE_URL: databaseUrl };
    const token = await createToken(dir, "pg-org");
    // The token above went to SQLite in `dir`; the one below to PostgreSQL.
    const pgToken = (await umsOk(["token", "create", "--org", "pg-org", "--data-dir", dir], { env })).trim();
    assert.match(pgToken, TOKEN_RE);
    await rm(join(dir, "ums.db"));
    await rm(join(dir, "ums.db-wal"), { force: true });
    await rm(join(dir, "ums.db-shm"), { force: true });
    await umsOk(["org", "set-limits", "pg-org", "--max-units", "5", "--data-dir", dir], { env });

    const port = await freePort();
    const server = await serve(t, port, ["--data-dir", dir, "--listen", `127.0.0.1:${port}`], env);
    const org = await api(server.url, "GET", "/v1/organization", pgToken);
    assert.equal(org.status, 200);
    assert.equal(org.body.organization.max_sprites, 5);
    assert.equal((await api(server.url, "GET", "/v1/organization", token)).status, 401);
    assert.equal(existsSync(join(dir, "ums.db")), false);
    const listening = jsonLogLines(server.stderr()).find((l) => l.msg === "ums listening");
    assert.equal(listening?.dialect, "postgres");
    assert.deepEqual(await server.stop("SIGTERM"), { code: 0, signal: null });
  });
});
