import assert from "node:assert/strict";
import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { withAgentListener } from "../runtime/runc/agent-listener.js";
import { waitForAgent } from "./health.js";

// A boot waits for its agent by one request that waits in the backlog of the socket the host made
// and handed over (runc/agent-listener.ts), not by polling. Here a child process stands in for the
// unit: it gets the listening socket as descriptor 3 and starts serving it after `delayMs`, or exits
// without ever serving it (a unit that died while booting).

const dir = mkdtempSync(join(tmpdir(), "ums-health-"));
const children: ChildProcess[] = [];
after(() => {
  for (const c of children) c.kill("SIGKILL");
  rmSync(dir, { recursive: true, force: true });
});

async function agentAfter(path: string, delayMs: number, serve = true): Promise<ChildProcess> {
  const script = serve
    ? `setTimeout(() => require("node:http").createServer((q, s) => s.end(JSON.stringify({ ok: true, pid: process.pid }))).listen({ fd: 3 }), ${delayMs})`
    : `setTimeout(() => process.exit(0), ${delayMs})`;
  return withAgentListener(path, async (fd) => {
    const child = spawn(process.execPath, ["-e", script], { stdio: ["ignore", "ignore", "inherit", fd] });
    children.push(child);
    await new Promise((resolve) => child.once("spawn", resolve));
    return child;
  });
}

describe("waitForAgent", () => {
  it("is answered as soon as the agent accepts, by one request, the unit not checked before 100 ms", async () => {
    const path = join(dir, "late.sock");
    await agentAfter(path, 60);
    let checks = 0;
    const started = Date.now();
    await waitForAgent(path, 5000, async () => {
      checks += 1;
      return true;
    });
    const took = Date.now() - started;
    assert.ok(took < 2000, `answered after ${took} ms`);
    if (took < 90) assert.equal(checks, 0, "the unit was checked before 100 ms had passed");
  });

  it("ends soon after the unit stops", async () => {
    const path = join(dir, "dead.sock");
    const child = await agentAfter(path, 30, false);
    const started = Date.now();
    await assert.rejects(
      waitForAgent(path, 10_000, async () => child.exitCode === null),
      /stopped while booting/,
    );
    assert.ok(Date.now() - started < 3000);
  });

  it("gives up at its deadline when the agent never answers", async () => {
    const path = join(dir, "never.sock");
    await agentAfter(path, 60_000);
    await assert.rejects(
      waitForAgent(path, 300, async () => true),
      /did not start within 300 ms/,
    );
  });
});
