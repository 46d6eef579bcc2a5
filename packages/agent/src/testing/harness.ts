// Test harness: runs the REAL bundled agent (dist/agent.cjs, the loader of dist/agent-bundle.cjs) on a
// temporary Unix socket as the current user, and drives it with the `ws` client and node:http over that socket.
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { request } from "node:http";
import { tmpdir, userInfo } from "node:os";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import WebSocket from "ws";

export const pkgDir = fileURLToPath(new URL("../../../", import.meta.url));
export const bundlePath = join(pkgDir, "dist", "agent.cjs");

function newestSource(dir: string): number {
  let newest = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) newest = Math.max(newest, newestSource(p));
    else if (e.name.endsWith(".ts") && !e.name.endsWith(".test.ts")) newest = Math.max(newest, statSync(p).mtimeMs);
  }
  return newest;
}

/** Builds dist/agent.cjs, the bundle and its code cache when missing or older than the agent's sources. */
export async function ensureBundle(): Promise<void> {
  let built = 0;
  try {
    built = statSync(bundlePath).mtimeMs;
  } catch {}
  const newest = Math.max(
    newestSource(join(pkgDir, "src")),
    newestSource(join(pkgDir, "..", "protocol", "src")), // the bundle holds the parts of protocol it imports
    statSync(join(pkgDir, "build.mjs")).mtimeMs,
    statSync(join(pkgDir, "loader.cjs")).mtimeMs,
  );
  if (built >= newest) return;
  const mod = (await import(pathToFileURL(join(pkgDir, "build.mjs")).href)) as { build(): Promise<string> };
  await mod.build();
}

export interface RunningAgent {
  socket: string;
  dir: string;
  home: string;
  proc: ChildProcess;
  stderr: () => string;
  stop(): Promise<void>;
}

/**
 * Starts the agent; `wrap` runs it under another program (e.g. setpriv to drop a capability);
 * `entry` is another copy of dist/agent.cjs.
 */
export async function startAgent(
  extraEnv: Record<string, string> = {},
  wrap: string[] = [],
  entry = bundlePath,
): Promise<RunningAgent> {
  await ensureBundle();
  const dir = mkdtempSync(join(tmpdir(), "ums-agent-"));
  const home = join(dir, "home");
  mkdirSync(home);
  const socket = join(dir, "agent.sock");
  const me = userInfo();
  const argv = [...wrap, process.execPath, entry];
  const proc = spawn(argv[0] as string, argv.slice(1), {
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      UMS_AGENT_SOCKET: socket,
      UMS_AGENT_UID: String(me.uid),
      UMS_AGENT_GID: String(me.gid),
      UMS_AGENT_HOME: home,
      UMS_AGENT_USER: me.username,
      UMS_AGENT_KILL_GRACE: "1s",
      UMS_AGENT_PORT_POLL: "100ms",
      ...extraEnv,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let err = "";
  proc.stderr?.on("data", (d: Buffer) => {
    err += d.toString();
  });
  await new Promise<void>((resolve, reject) => {
    let out = "";
    const timer = setTimeout(() => reject(new Error(`agent did not start: ${err}`)), 10_000);
    proc.stdout?.on("data", (d: Buffer) => {
      out += d.toString();
      if (out.includes('"ready":true')) {
        clearTimeout(timer);
        resolve();
      }
    });
    proc.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`agent exited with ${code}: ${err}`));
    });
  });
  const agent: RunningAgent = {
    socket,
    dir,
    home,
    proc,
    stderr: () => err,
    async stop() {
      // End every session's processes first (by their process groups, through the agent's kill API).
      try {
        const list = (await httpJson(agent, "GET", "/exec")).body as { id: number; is_active: boolean }[];
        await Promise.all(
          list
            .filter((s) => s.is_active)
            .map((s) => httpText(agent, "POST", `/exec/${s.id}/kill?signal=SIGKILL&timeout=2`)),
        );
      } catch {}
      if (proc.exitCode === null && proc.pid) {
        const exited = new Promise((r) => proc.once("exit", r));
        process.kill(proc.pid, "SIGTERM");
        await exited;
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
  return agent;
}

export function query(params: Record<string, string | number | boolean | (string | number)[] | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined) continue;
    for (const item of Array.isArray(v) ? v : [v]) q.append(k, String(item));
  }
  return q.toString();
}

export interface HttpResult {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

export function httpText(
  agent: { socket: string },
  method: string,
  path: string,
  headers: Record<string, string> = {},
  onChunk?: (chunk: string) => void,
): Promise<HttpResult> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: agent.socket, method, path, headers }, (res) => {
      let text = "";
      res.setEncoding("utf8");
      res.on("data", (c: string) => {
        text += c;
        onChunk?.(c);
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text }));
    });
    req.on("error", reject);
    req.end();
  });
}

export async function httpJson(
  agent: { socket: string },
  method: string,
  path: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: HttpResult["headers"]; body: unknown }> {
  const r = await httpText(agent, method, path, headers);
  return { status: r.status, headers: r.headers, body: JSON.parse(r.text) };
}

/** An upgrade request that the agent refuses answers with a plain HTTP status and JSON body. */
export function upgradeRejection(agent: { socket: string }, path: string): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = request({
      socketPath: agent.socket,
      path,
      headers: {
        Connection: "Upgrade",
        Upgrade: "websocket",
        "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
      },
    });
    req.on("response", (res) => {
      let text = "";
      res.on("data", (c: Buffer) => {
        text += c.toString();
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
    });
    req.on("upgrade", () => reject(new Error("unexpected upgrade")));
    req.on("error", reject);
    req.end();
  });
}

export interface Message {
  binary: boolean;
  data: Buffer;
  at: number;
}

/** A websocket client that records every message, with helpers to wait for what a test expects. */
export class ExecClient {
  readonly ws: WebSocket;
  readonly messages: Message[] = [];
  closeCode: number | null = null;
  readonly opened: Promise<void>;
  readonly closed: Promise<number>;
  private waiters: (() => void)[] = [];

  constructor(agent: { socket: string }, path: string) {
    this.ws = new WebSocket(`ws+unix://${agent.socket}:${path}`);
    this.opened = new Promise((resolve, reject) => {
      this.ws.once("open", () => resolve());
      this.ws.once("error", reject);
    });
    this.closed = new Promise((resolve) => {
      this.ws.once("close", (code) => {
        this.closeCode = code;
        resolve(code);
        this.notify();
      });
    });
    this.ws.on("error", () => {});
    this.ws.on("message", (data: Buffer, binary: boolean) => {
      this.messages.push({ binary, data, at: Date.now() });
      this.notify();
    });
  }

  static async open(agent: { socket: string }, path: string): Promise<ExecClient> {
    const c = new ExecClient(agent, path);
    await c.opened;
    return c;
  }

  private notify(): void {
    for (const w of this.waiters.splice(0)) w();
  }

  /** Resolves once `check()` returns a value other than undefined; rejects after the timeout. */
  async until<T>(check: () => T | undefined, what: string, timeoutMs = 10_000): Promise<T> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = check();
      if (v !== undefined) return v;
      if (this.closeCode !== null) {
        const again = check();
        if (again !== undefined) return again;
        throw new Error(`websocket closed (${this.closeCode}) while waiting for ${what}; got ${this.describe()}`);
      }
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`timed out waiting for ${what}; got ${this.describe()}`);
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.min(left, 1000));
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  texts(): Record<string, unknown>[] {
    return this.messages.filter((m) => !m.binary).map((m) => JSON.parse(m.data.toString()) as Record<string, unknown>);
  }

  /** Concatenated payloads of one stream id (non-TTY frames). */
  stream(id: number): Buffer {
    return Buffer.concat(this.messages.filter((m) => m.binary && m.data[0] === id).map((m) => m.data.subarray(1)));
  }

  /** Concatenated raw binary messages (TTY output). */
  raw(): string {
    return Buffer.concat(this.messages.filter((m) => m.binary).map((m) => m.data)).toString("utf8");
  }

  exitFrame(): number | undefined {
    const f = this.messages.find((m) => m.binary && m.data[0] === 3);
    return f ? (f.data[1] as number) : undefined;
  }

  waitText(type: string, pred: (m: Record<string, unknown>) => boolean = () => true, timeoutMs?: number) {
    return this.until(() => this.texts().find((m) => m.type === type && pred(m)), `a ${type} message`, timeoutMs);
  }

  waitStdout(needle: string, timeoutMs?: number): Promise<string> {
    return this.until(
      () => {
        const s = this.stream(1).toString();
        return s.includes(needle) ? s : undefined;
      },
      `stdout containing ${JSON.stringify(needle)}`,
      timeoutMs,
    );
  }

  waitRaw(needle: string, timeoutMs?: number): Promise<string> {
    return this.until(
      () => {
        const s = this.raw();
        return s.includes(needle) ? s : undefined;
      },
      `output containing ${JSON.stringify(needle)}`,
      timeoutMs,
    );
  }

  sendStdin(data: string | Buffer): void {
    this.ws.send(Buffer.concat([Buffer.from([0]), Buffer.from(data)]));
  }

  sendEof(): void {
    this.ws.send(Buffer.from([4]));
  }

  close(): Promise<number> {
    this.ws.close();
    return this.closed;
  }

  private describe(): string {
    const parts = this.messages
      .slice(-8)
      .map((m) => (m.binary ? `[bin ${JSON.stringify(m.data.toString())}]` : m.data.toString()));
    return parts.join(" ").slice(0, 2000);
  }
}

export interface ExecResult {
  info: Record<string, unknown>;
  stdout: Buffer;
  stderr: Buffer;
  exitCode: number | undefined;
  closeCode: number;
  client: ExecClient;
}

/** Runs a non-TTY command to its end; `input` is sent as stdin frames followed by EOF. */
export async function run(
  agent: { socket: string },
  params: Parameters<typeof query>[0],
  input?: (string | Buffer)[],
): Promise<ExecResult> {
  const client = await ExecClient.open(agent, `/exec?${query(params)}`);
  if (input) {
    for (const chunk of input) client.sendStdin(chunk);
    client.sendEof();
  }
  const closeCode = await client.closed;
  const info = client.texts().find((m) => m.type === "session_info") ?? {};
  return {
    info,
    stdout: client.stream(1),
    stderr: client.stream(2),
    exitCode: client.exitFrame(),
    closeCode,
    client,
  };
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls `check` until it returns true. */
export async function eventually(
  check: () => Promise<boolean> | boolean,
  what: string,
  timeoutMs = 10_000,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}
