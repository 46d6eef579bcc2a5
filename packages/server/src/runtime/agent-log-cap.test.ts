import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { AgentLogCap } from "./agent-log-cap.js";

describe("AgentLogCap", () => {
  it("cuts a running unit's log over the cap to one line saying so, leaves the others, skips a missing one", async () => {
    const dir = await mkdtemp(join(tmpdir(), "ums-log-cap-"));
    try {
      await writeFile(join(dir, "big"), Buffer.alloc(2000, 97));
      await writeFile(join(dir, "small"), "short\n");
      await writeFile(join(dir, "stopped"), Buffer.alloc(5000, 97));
      const warned: object[] = [];
      const cap = new AgentLogCap({
        running: () => ["big", "small", "gone"],
        path: (id) => join(dir, id),
        log: { warn: (o) => warned.push(o) },
        maxBytes: 1000,
      });
      assert.deepEqual(await cap.check(), ["big"]);
      const text = await readFile(join(dir, "big"), "utf8");
      assert.match(text, /^\{"time":"[^"]+","msg":"ums: cut at 2000 bytes \(over 1000\)"\}\n$/);
      assert.equal(await readFile(join(dir, "small"), "utf8"), "short\n");
      assert.equal((await stat(join(dir, "stopped"))).size, 5000, "a unit not running is not looked at");
      assert.deepEqual(warned, [{ unitId: "big", bytes: 2000 }]);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
