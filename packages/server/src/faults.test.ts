import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

const faults = fileURLToPath(new URL("./faults.js", import.meta.url));

/** A process that installs the last resort, then throws once and rejects once, and goes on. */
const SCRIPT = `
import pino from "pino";
const { installLastResort, faultCounts } = await import(${JSON.stringify(faults)});
installLastResort(pino({ level: "info" }, pino.destination(2)));
setTimeout(() => { throw new Error("thrown from a timer"); }, 10);
setTimeout(() => { Promise.reject(new Error("rejected, never awaited")); }, 20);
setTimeout(() => { process.stdout.write(JSON.stringify(faultCounts())); }, 100);
`;

describe("the last-resort fault handler", () => {
  it("logs and counts an uncaught exception and an unhandled rejection, and the process goes on", async () => {
    const { stdout, stderr } = await new Promise<{ stdout: string; stderr: string }>((resolve, reject) =>
      execFile(
        process.execPath,
        ["--input-type=module", "-e", SCRIPT],
        { cwd: fileURLToPath(new URL("..", import.meta.url)), timeout: 30_000 },
        (err, stdout, stderr) => (err ? reject(Object.assign(err, { stderr })) : resolve({ stdout, stderr })),
      ),
    );
    assert.deepEqual(JSON.parse(stdout), { uncaughtException: 1, unhandledRejection: 1 }, stderr);
    const lines = stderr
      .trim()
      .split("\n")
      .map(
        (l) => JSON.parse(l) as { level: number; msg: string; kind: string; faults: number; err: { message: string } },
      );
    assert.deepEqual(
      lines.map((l) => [l.level, l.kind, l.faults, l.err.message]),
      [
        [50, "uncaughtException", 1, "thrown from a timer"],
        [50, "unhandledRejection", 2, "rejected, never awaited"],
      ],
    );
    for (const l of lines)
      assert.match(l.msg, /^last-resort handler caught an .* \(fault \d since start\); ums keeps serving$/);
  });
});
