import { execFile } from "node:child_process";
import { Spawner, type SpawnReply } from "./spawner.js";

/** A host command that failed; the message carries the command line and its stderr. */
export class CommandError extends Error {
  constructor(
    readonly command: string,
    readonly args: readonly string[],
    readonly exitCode: number | null,
    readonly stderr: string,
    readonly stdout: string,
    readonly signal: NodeJS.Signals | null = null,
  ) {
    const detail = (stderr.trim() || stdout.trim()).split("\n").slice(-20).join("\n");
    const status = signal ? `signal ${signal}` : `exit ${exitCode}`;
    super(`${[command, ...args].join(" ")} failed (${status})${detail ? `: ${detail}` : ""}`);
    this.name = "CommandError";
  }
}

const SBIN = ["/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"];

/**
 * The environment for host tools: the caller's, with the sbin directories on PATH (mkfs.btrfs,
 * losetup and friends live there, and a server started from a user shell may not have them) and a
 * C locale so that the output we parse does not change with the host's language.
 */
export function toolEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const path = (process.env.PATH ?? "").split(":").filter(Boolean);
  for (const dir of SBIN) if (!path.includes(dir)) path.push(dir);
  return { ...process.env, PATH: path.join(":"), LC_ALL: "C", LANG: "C", ...extra };
}

export interface RunResult {
  stdout: string;
  stderr: string;
}

let spawner: Spawner | undefined;
let holders = 0;

/**
 * Until the returned release is called, `run()` starts commands from a helper process (spawner.ts):
 * a long-running server asks for it, so that no fork of its own large process stops its event loop.
 * Short-lived callers (the CLI) fork directly. Servers in one process (tests) share the helper; it
 * stops when the last one releases it.
 */
export function runFromHelper(): () => void {
  spawner ??= new Spawner();
  holders++;
  let released = false;
  return () => {
    if (released) return;
    released = true;
    if (--holders === 0) {
      spawner?.close();
      spawner = undefined;
    }
  };
}

const MAX_BUFFER = 64 * 1024 * 1024;

/** Runs a host command without a shell; rejects with a {@link CommandError} when it exits non-zero. */
export async function run(
  command: string,
  args: readonly string[],
  opts: { timeoutMs?: number; env?: NodeJS.ProcessEnv; input?: string } = {},
): Promise<RunResult> {
  const req = {
    command,
    args,
    env: toolEnv(opts.env),
    timeoutMs: opts.timeoutMs ?? 120_000,
    maxBuffer: MAX_BUFFER,
    input: opts.input,
  };
  const r = spawner ? await spawner.run(req) : await runHere(req);
  if (r.ok) return { stdout: r.stdout, stderr: r.stderr };
  if (r.thrown !== undefined) throw new Error(`${command}: ${r.thrown}`);
  if (r.enoent) {
    throw new CommandError(command, args, null, `${command}: command not found (is it installed?)`, r.stdout ?? "");
  }
  throw new CommandError(command, args, r.exitCode ?? null, r.stderr ?? "", r.stdout ?? "", r.signal ?? null);
}

/** The same as the helper does, in this process. */
function runHere(req: Parameters<Spawner["run"]>[0]): Promise<SpawnReply> {
  return new Promise((resolve) => {
    const child = execFile(
      req.command,
      req.args,
      { env: req.env, maxBuffer: req.maxBuffer, timeout: req.timeoutMs, encoding: "utf8" },
      (err, stdout, stderr) => {
        if (!err) return resolve({ ok: true, stdout, stderr });
        const e = err as NodeJS.ErrnoException & { code?: number | string; signal?: NodeJS.Signals | null };
        resolve({
          ok: false,
          stdout,
          stderr,
          enoent: e.code === "ENOENT",
          exitCode: typeof e.code === "number" ? e.code : null,
          signal: e.signal ?? null,
        });
      },
    );
    // Commands that never read their input may exit first: ignore EPIPE on it.
    child.stdin?.on("error", () => {});
    if (req.input !== undefined) child.stdin?.end(req.input);
    else child.stdin?.end();
  });
}
