import assert from "node:assert/strict";
import { mkdtemp, open, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { testDialects } from "../../testing/dialects.js";
import { startTestServer, type TestServer } from "../../testing/server.js";
import { Runc } from "./runc.js";

describe("a unit's agent.log", () => {
  let s: TestServer;
  let token: string;
  before(async () => {
    const sqlite = testDialects[0];
    if (!sqlite) throw new Error("no sqlite");
    s = await startTestServer(sqlite);
    token = await s.token("agent-log");
  });
  after(() => s?.close());

  it("holds the agent's own log lines (its stderr), not only its stdout", async () => {
    const id = await s.unit(token, "logged");
    const r = await s.api("POST", "/v1/units/logged/exec?cmd=true", { token });
    assert.equal(r.status, 200, r.text);
    const log = await readFile(join(s.config.dataDir, "run", id, "agent.log"), "utf8");
    // The loader's line is on stdout; "agent listening" is one of the agent's log() lines, on stderr
    // (before, stderr was a pipe to ums serve that nobody read after runc returned).
    assert.match(log, /"ready":true/);
    assert.match(log, /"msg":"agent listening"/);
  });

  it("is cut while the unit runs once it is over its cap (root in a unit can make its PID 1 write to it)", async () => {
    const id = await s.unit(token, "noisy");
    assert.equal((await s.api("POST", "/v1/units/noisy/exec?cmd=true", { token })).status, 200);
    const path = join(s.config.dataDir, "run", id, "agent.log");
    // As the unit's own writes would (they append): 9 MiB, over the 8 MiB cap.
    const fh = await open(path, "a");
    try {
      await fh.write(Buffer.alloc(9 * 1024 * 1024, 120));
    } finally {
      await fh.close();
    }
    const end = Date.now() + 10_000;
    while ((await stat(path)).size > 1024 && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
    assert.match(await readFile(path, "utf8"), /"msg":"ums: cut at \d+ bytes \(over 8388608\)"/);
    // The unit goes on, and its agent's next lines land in the file again.
    assert.equal((await s.api("POST", "/v1/units/noisy/exec?cmd=true", { token })).status, 200);
  });

  it("gives runc's own message when runc fails, read from what it appended to the log", async () => {
    const dir = await mkdtemp(join(tmpdir(), "ums-runc-log-"));
    try {
      const path = join(dir, "agent.log");
      await writeFile(path, "an earlier boot's line\n");
      const log = await open(path, "a");
      try {
        // No config.json in the bundle: runc refuses at once.
        const runc = new Runc(join(dir, "root"));
        await assert.rejects(
          runc.start("nope", join(dir, "bundle"), { fd: log.fd, path }, join(dir, "pid")),
          (err: Error) => {
            assert.match(err.message, /^runc run nope failed \(exit \d+\): \S/);
            assert.doesNotMatch(err.message, /earlier boot/);
            return true;
          },
        );
      } finally {
        await log.close();
      }
      assert.match(await readFile(path, "utf8"), /^an earlier boot's line\n./);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });
});
