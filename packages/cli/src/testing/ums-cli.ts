// The CLI contract's harness, through the real launcher bin/ums: every test spawns it as a user would,
// with a data dir of its own, and stops only the processes it started (by PID). Importing this module
// registers the file's clean-up (the processes still running, then the temp dirs and databases).

import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, type TestContext } from "node:test";
import { fileURLToPath } from "node:url";
import { testDialects } from "@ums/server/testing";

const ROOT = resolve(fileURLToPath(import.meta.url), "../../../../..");
const UMS = join(ROOT, "bin", "ums");
export const TOKEN_RE = /^ums_[0-9A-Za-z]{43}$/;

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

export interface RunResult {
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
export async function ums(args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string; timeoutMs?: number } = {}) {
  const child = spawnUms(args, opts);
  const out = collect(child);
  const timer = setTimeout(() => killChild(child), opts.timeoutMs ?? 30_000);
  const { code, signal } = await exited(child);
  clearTimeout(timer);
  return { code, signal, stdout: out.stdout(), stderr: out.stderr() } satisfies RunResult;
}

export async function umsOk(args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<string> {
  const r = await ums(args, opts);
  assert.equal(r.code, 0, `ums ${args.join(" ")} failed (${r.code}): ${r.stderr}`);
  return r.stdout;
}

export async function createToken(dataDir: string, org: string, ...extra: string[]): Promise<string> {
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

export async function tempDir(_t: TestContext): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "ums-cli-test-"));
  atEnd.push(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

/** A fresh database in the PostgreSQL test cluster (UMS_TEST_PG_URL), dropped when the file is done. */
export async function createPgDatabase(): Promise<string> {
  const postgres = testDialects.find((d) => d.name === "postgres");
  const db = await postgres?.createDatabase();
  if (!db?.databaseUrl) throw new Error("no PostgreSQL database");
  // Dropped at the end (like the temp dirs): the test's server cleanup reads it first.
  atEnd.push(db.drop);
  return db.databaseUrl;
}

export interface Served {
  readonly url: string;
  readonly child: ChildProcess;
  stderr(): string;
  /** Sends `signal` and waits for the exit. */
  stop(signal: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Starts `ums serve ARGS` and waits until GET /healthz answers on `port`. */
export async function serve(
  t: TestContext,
  port: number,
  args: string[],
  env: NodeJS.ProcessEnv = {},
): Promise<Served> {
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
  // A start (store, pool, image cache, re-adoption) takes ~1 s on a quiet host; the whole suite's
  // load has stretched it past 15 s. This bounds a hang, it times nothing.
  const deadline = Date.now() + 90_000;
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

export interface ApiResult {
  status: number;
  headers: Headers;
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON shapes.
  body: any;
}

export async function api(
  base: string,
  method: string,
  path: string,
  token?: string,
  json?: unknown,
): Promise<ApiResult> {
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
export async function sqliteBytes(dataDir: string): Promise<Buffer> {
  const parts = [await readFile(join(dataDir, "ums.db"))];
  const wal = join(dataDir, "ums.db-wal");
  if (existsSync(wal)) parts.push(await readFile(wal));
  return Buffer.concat(parts);
}

// biome-ignore lint/suspicious/noExplicitAny: pino log lines.
export function jsonLogLines(stderr: string): any[] {
  return stderr
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l));
}
