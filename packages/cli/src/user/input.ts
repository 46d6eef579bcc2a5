// Input helpers without commander, for the `ums exec` fast path (fast-exec.ts) as well as the commands.
import { UsageError } from "../errors.js";

/** Reads all of stdin (it is a pipe or a file). */
export async function readStdin(): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

/** A duration flag's parser: `30s`, `5m`, `1500ms` or plain seconds, in ms; a UsageError otherwise. */
export function positiveMs(flag: string) {
  return (value: string): number => {
    const m = /^(\d{1,7})(ms|s|m)?$/.exec(value);
    if (!m) throw new UsageError(`${flag} must be a duration like 30s, 5m or 1500ms, got '${value}'`);
    const n = Number(m[1]);
    return m[2] === "ms" ? n : m[2] === "m" ? n * 60_000 : n * 1000;
  };
}
