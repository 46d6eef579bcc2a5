import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { describe, test } from "node:test";
import { signalSession } from "./process-session.js";

describe("signalSession", () => {
  test("a process that has no group nor session of its own yet (before its setsid) gets the signal itself", async () => {
    // Not detached: it is in this process's group and session, as a child is between its fork and
    // its setsid (a TTY's first control message can come then).
    const child = spawn("sleep", ["30"], { stdio: "ignore" });
    const pid = child.pid as number;
    const ended = new Promise<NodeJS.Signals | null>((r) => child.once("exit", (_c, s) => r(s)));
    try {
      assert.equal(signalSession(pid, "SIGTERM"), true);
      assert.equal(await ended, "SIGTERM");
    } finally {
      child.kill("SIGKILL");
    }
  });
});
