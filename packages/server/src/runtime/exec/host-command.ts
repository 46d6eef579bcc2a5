import { execFile } from "node:child_process";

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

/** Runs a host command without a shell; rejects with a {@link CommandError} when it exits non-zero. */
export function run(
  command: string,
  args: readonly string[],
  opts: { timeoutMs?: number; env?: NodeJS.ProcessEnv; input?: string } = {},
): Promise<RunResult> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      command,
      args,
      {
        env: toolEnv(opts.env),
        maxBuffer: 64 * 1024 * 1024,
        timeout: opts.timeoutMs ?? 120_000,
        encoding: "utf8",
      },
      (err, stdout, stderr) => {
        if (!err) return resolve({ stdout, stderr });
        const e = err as NodeJS.ErrnoException & { code?: number | string; signal?: NodeJS.Signals | null };
        if (e.code === "ENOENT") {
          return reject(
            new CommandError(command, args, null, `${command}: command not found (is it installed?)`, stdout),
          );
        }
        reject(
          new CommandError(command, args, typeof e.code === "number" ? e.code : null, stderr, stdout, e.signal ?? null),
        );
      },
    );
    // Commands that never read their input may exit first: ignore EPIPE on it.
    child.stdin?.on("error", () => {});
    if (opts.input !== undefined) child.stdin?.end(opts.input);
    else child.stdin?.end();
  });
}
