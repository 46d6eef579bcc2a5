// node-pty destroys the terminal 200 ms after its child exits if the read side has not closed by
// then (a loaded event loop, or a session whose output is paused), dropping what was not read.
// drainBeforeDestroy reads that rest first. The test makes node-pty's timeout path happen for sure:
// the child writes and exits while this process's event loop is blocked, and the terminal is
// destroyed before the loop gets to read it.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { drainBeforeDestroy, loadNodePty } from "./pty.js";

function spawnAndDestroyUnread(drain: boolean): Promise<string> {
  const term = loadNodePty().spawn("sh", ["-c", "printf 'first\\n'; printf 'final-words\\n'"], {
    cols: 80,
    rows: 24,
    encoding: null,
  });
  (term as unknown as { on(e: string, l: () => void): void }).on("error", () => {});
  const chunks: Buffer[] = [];
  const emit = (d: Buffer | string) => chunks.push(Buffer.isBuffer(d) ? d : Buffer.from(d));
  term.onData(emit);
  if (drain) drainBeforeDestroy(term, emit);
  // Block the loop while the child writes and exits, then destroy the terminal before any read.
  const until = Date.now() + 500;
  while (Date.now() < until) {}
  (term as unknown as { _socket: { destroy(): void } })._socket.destroy();
  return new Promise((resolve) => term.onExit(() => resolve(Buffer.concat(chunks).toString())));
}

describe("a TTY's last output when node-pty destroys the terminal", () => {
  test("is lost without the drain (what the drain is for)", async () => {
    assert.doesNotMatch(await spawnAndDestroyUnread(false), /final-words/);
  });

  test("is read before the terminal is destroyed", async () => {
    const out = await spawnAndDestroyUnread(true);
    assert.match(out, /first\r\nfinal-words\r\n/);
  });
});
