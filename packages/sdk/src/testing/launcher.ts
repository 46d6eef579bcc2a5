/**
 * Test support: runs the real `bin/ums` launcher as a child process on a free loopback port with
 * a throwaway data dir, and makes tokens with `ums token create`. Not part of the public API.
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { freePort } from "@ums/server/testing";

export { freePort };

const execFileAsync = promisify(execFile);

/** dist/testing/launcher.js -> the repository root's bin/ums. */
export const UMS_BIN = fileURLToPath(new URL("../../../../bin/ums", import.meta.url));

export interface LaunchedServer {
  readonly baseUrl: string;
  readonly port: number;
  readonly pid: number;
  readonly dataDir: string;
  /** Creates the organization if new and a token for it (`ums token create`); returns the token. */
  token(org: string): Promise<string>;
  /** `ums org set-limits <org> --max-units <n>`. */
  setMaxUnits(org: string, maxUnits: number): Promise<void>;
  /** What the server wrote to stdout and stderr (the last 64 KiB). */
  output(): string;
  /** SIGTERM (SIGKILL after 5 s), then removes the data dir. */
  stop(): Promise<void>;
}

/** The child's environment: ours without UMS_* settings (e.g. UMS_DATABASE_URL) or the test runner's markers. */
function childEnv(): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (!k.startsWith("UMS_") && k !== "NODE_TEST_CONTEXT" && k !== "NODE_OPTIONS") env[k] = v;
  }
  return env;
}

async function ums(args: string[]): Promise<string> {
  const { stdout } = await execFileAsync(UMS_BIN, args, { env: childEnv(), timeout: 30_000 });
  return stdout;
}

/** Starts `ums serve`; retries with another port if the chosen one was taken in the meantime. */
export async function launchServer(): Promise<LaunchedServer> {
  const dataDir = await mkdtemp(join(tmpdir(), "ums-sdk-test-"));
  let lastError: unknown;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      return await launchOnce(dataDir, await freePort());
    } catch (err) {
      lastError = err;
    }
  }
  await rm(dataDir, { recursive: true, force: true });
  throw lastError;
}

async function launchOnce(dataDir: string, port: number): Promise<LaunchedServer> {
  // Units live on the shared test pool and image, in a subnet of this server's own.
  const { cleanupStoppedServer, lockSubnet, testServeEnv } = await import("@ums/server/testing");
  const subnet = await lockSubnet();
  const child = spawn(UMS_BIN, ["serve", "--data-dir", dataDir, "--listen", `127.0.0.1:${port}`], {
    env: { ...childEnv(), ...(await testServeEnv(subnet.n)) },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  const keep = (chunk: Buffer) => {
    out = (out + chunk.toString("utf8")).slice(-65_536);
  };
  child.stdout?.on("data", keep);
  child.stderr?.on("data", keep);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  // A safety net if the test process ends without calling stop().
  const killOnExit = () => {
    if (child.exitCode === null && child.pid !== undefined) process.kill(child.pid, "SIGKILL");
  };
  process.once("exit", killOnExit);

  const baseUrl = `http://127.0.0.1:${port}`;
  try {
    await waitUntilHealthy(baseUrl, child, () => out);
  } catch (err) {
    await terminate(child, exited);
    process.off("exit", killOnExit);
    await cleanupStoppedServer(dataDir);
    await subnet.unlock();
    throw err;
  }
  const pid = child.pid as number;

  let stopping: Promise<void> | undefined;
  return {
    baseUrl,
    port,
    pid,
    dataDir,
    async token(org) {
      const token = (await ums(["token", "create", "--org", org, "--data-dir", dataDir])).trim();
      if (token === "" || /\s/.test(token)) throw new Error(`'ums token create' printed ${JSON.stringify(token)}`);
      return token;
    },
    async setMaxUnits(org, maxUnits) {
      await ums(["org", "set-limits", org, "--max-units", String(maxUnits), "--data-dir", dataDir]);
    },
    output: () => out,
    stop() {
      stopping ??= (async () => {
        await terminate(child, exited);
        process.off("exit", killOnExit);
        await cleanupStoppedServer(dataDir);
        await subnet.unlock();
        await rm(dataDir, { recursive: true, force: true });
      })();
      return stopping;
    },
  };
}

async function waitUntilHealthy(baseUrl: string, child: ChildProcess, output: () => string): Promise<void> {
  // A start takes about a second on a quiet host; over 20 s was seen on a loaded 2-core one. This
  // bounds a hang, it times nothing.
  const deadline = Date.now() + 90_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`ums serve exited (${child.exitCode ?? child.signalCode}) before it was ready:\n${output()}`);
    }
    try {
      const res = await fetch(`${baseUrl}/healthz`, { signal: AbortSignal.timeout(1_000) });
      if (res.ok && ((await res.json()) as { ok?: unknown }).ok === true) return;
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`ums serve did not answer ${baseUrl}/healthz within 90 s:\n${output()}`);
}

/** SIGTERM by PID, SIGKILL if it has not exited 5 s later. */
async function terminate(child: ChildProcess, exited: Promise<void>): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  process.kill(child.pid, "SIGTERM");
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(true), 5_000);
  });
  const killed = await Promise.race([exited.then(() => false), timedOut]);
  clearTimeout(timer);
  if (killed && child.exitCode === null && child.signalCode === null) {
    process.kill(child.pid, "SIGKILL");
    await exited;
  }
}
