import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { troubleLines } from "./agent-log-report.js";

describe("troubleLines", () => {
  it("keeps the agent's trouble and what is not its JSON; drops its routine lines", () => {
    const log = [
      JSON.stringify({ time: "t", msg: "agent listening", pid: 1 }),
      JSON.stringify({ ready: true, fd: 3, pid: 6 }),
      JSON.stringify({ time: "t", msg: "a request failed after its answer began", url: "/exec" }),
      "fs worker: TypeError: x is not a function",
      "",
      JSON.stringify({ time: "t", msg: "agent stopping", signal: "SIGTERM" }),
      JSON.stringify({ time: "t", msg: "uncaught exception", error: "Error: boom" }),
    ].join("\n");
    assert.deepEqual(troubleLines(log), [
      JSON.stringify({ time: "t", msg: "a request failed after its answer began", url: "/exec" }),
      "fs worker: TypeError: x is not a function",
      JSON.stringify({ time: "t", msg: "uncaught exception", error: "Error: boom" }),
    ]);
  });

  it("stops at `max` lines and cuts long ones", () => {
    const log = Array.from({ length: 50 }, () => "x".repeat(3000)).join("\n");
    const lines = troubleLines(log, 5);
    assert.equal(lines.length, 5);
    assert.equal(lines[0]?.length, 2001);
  });
});
