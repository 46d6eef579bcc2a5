import assert from "node:assert/strict";
import { appendFile, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { AgentLogCap } from "./agent-log-cap.js";

async function until(what: string, pred: () => Promise<boolean>, ms = 3000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await pred())) {
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe("AgentLogCap", () => {
  it("cuts a running unit's log over the cap, at once and after later writes; leaves the rest alone", async () => {
    const dir = await mkdtemp(join(tmpdir(), "ums-log-cap-"));
    const file = (id: string) => join(dir, id);
    const size = async (id: string) => (await stat(file(id))).size;
    const warned: object[] = [];
    let running = ["big", "small", "gone"];
    const cap = new AgentLogCap({
      running: () => running,
      path: file,
      log: { warn: (o) => warned.push(o) },
      maxBytes: 1000,
    });
    try {
      await writeFile(file("big"), Buffer.alloc(2000, 97));
      await writeFile(file("small"), "short\n");
      await writeFile(file("stopped"), Buffer.alloc(5000, 97));
      cap.start();
      // What it held before it was watched.
      await until("the big file cut", async () => (await size("big")) < 1000);
      assert.match(
        await readFile(file("big"), "utf8"),
        /^\{"time":"[^"]+","msg":"ums: cut at 2000 bytes \(over 1000\)"\}\n$/,
      );
      assert.deepEqual(warned, [{ unitId: "big", bytes: 2000 }]);
      // A write after: seen by its watch, with no polling of the file.
      await appendFile(file("small"), Buffer.alloc(3000, 98));
      await until("the grown file cut", async () => (await size("small")) < 1000);
      assert.equal(await size("stopped"), 5000, "a unit not running is not looked at");
      // A unit that stopped is let go of: its file may grow (it has no writer left).
      running = ["big"];
      cap.reconcile();
      await appendFile(file("small"), Buffer.alloc(3000, 98));
      await new Promise((r) => setTimeout(r, 500));
      assert.ok((await size("small")) > 3000);
    } finally {
      cap.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("looks at a file it cannot watch (inotify's watches used up) at every reconcile instead", async () => {
    const dir = await mkdtemp(join(tmpdir(), "ums-log-cap-"));
    const warned: string[] = [];
    const cap = new AgentLogCap({
      running: () => ["u"],
      path: (id) => join(dir, id),
      log: { warn: (_o, msg) => warned.push(msg) },
      maxBytes: 1000,
      watch: () => {
        throw Object.assign(new Error("no space"), { code: "ENOSPC" });
      },
    });
    try {
      await writeFile(join(dir, "u"), "short\n");
      cap.start();
      await appendFile(join(dir, "u"), Buffer.alloc(3000, 98));
      cap.reconcile();
      await until("the file cut", async () => (await stat(join(dir, "u"))).size < 1000);
      assert.match(warned[0] ?? "", /could not watch a unit's agent.log/);
    } finally {
      cap.stop();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
