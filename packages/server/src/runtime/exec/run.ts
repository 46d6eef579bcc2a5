import { execFile } from "node:child_process";

export class CommandError extends Error {
  constructor(
    readonly command: string,
    readonly exitCode: number | null,
    readonly stderr: string,
  ) {
    super(`${command} failed${exitCode === null ? "" : ` (exit ${exitCode})`}: ${stderr.trim() || "no output"}`);
  }
}

/** Runs a host command without a shell; rejects with its stderr. */
export function run(file: string, args: readonly string[], opts: { input?: string; timeoutMs?: number } = {}): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = execFile(
      file,
      args as string[],
      { timeout: opts.timeoutMs ?? 60_000, maxBuffer: 64 * 1024 * 1024, encoding: "utf8" },
      (err, stdout, stderr) => {
        if (err) {
          const code = typeof (err as { code?: unknown }).code === "number" ? (err as { code: number }).code : null;
          reject(new CommandError(`${file} ${args.join(" ")}`, code, stderr || err.message));
        } else resolve(stdout);
      },
    );
    if (opts.input !== undefined) child.stdin?.end(opts.input);
  });
}
