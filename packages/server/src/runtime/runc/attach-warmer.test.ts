import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { AttachWarmer, ownProcsFile } from "./attach-warmer.js";
import { CGROUP_ROOT } from "./cgroups.js";

const HYBRID = "9:name=systemd:/\n8:pids:/system.slice/ums.service\n4:memory:/x\n0::/system.slice/ums.service\n";
const V2 = "0::/system.slice/ums.service\n";

describe("attach warmer: its own cgroup's procs file", () => {
  it("is the v1 pids hierarchy's where there is one", () => {
    assert.equal(
      ownProcsFile(HYBRID, "/sys/fs/cgroup", false),
      "/sys/fs/cgroup/pids/system.slice/ums.service/cgroup.procs",
    );
    assert.equal(ownProcsFile("3:cpu,pids:/\n", "/r", false), "/r/pids/cgroup.procs");
  });

  it("is the unified hierarchy's on a cgroup v2 host, and none on a hybrid host without pids", () => {
    assert.equal(ownProcsFile(V2, "/sys/fs/cgroup", true), "/sys/fs/cgroup/system.slice/ums.service/cgroup.procs");
    assert.equal(ownProcsFile(V2, "/sys/fs/cgroup", false), undefined, "v2 mounted elsewhere: not guessed");
    assert.equal(ownProcsFile("4:memory:/x\n0::/\n", "/sys/fs/cgroup", false), undefined);
  });

  it("is none for a path that climbs or a file it cannot read", () => {
    assert.equal(ownProcsFile("8:pids:/a/../../etc\n", "/sys/fs/cgroup", false), undefined);
    assert.equal(ownProcsFile("", "/sys/fs/cgroup", true), undefined);
    assert.equal(ownProcsFile("garbage\n", "/sys/fs/cgroup", true), undefined);
  });
});

const root = process.getuid?.() === 0;
const pidsOwn = ownProcsFile(readFileSync("/proc/self/cgroup", "utf8"), CGROUP_ROOT, false);

describe("attach warmer: on this host's cgroups", { skip: !root && "needs root" }, () => {
  it("writes while held, stops once released, and leaves this process where it was", async (t) => {
    if (!pidsOwn) return t.skip("no v1 pids hierarchy here");
    const before = readFileSync("/proc/self/cgroup", "utf8");
    const warmer = new AttachWarmer(CGROUP_ROOT, 2);
    const release = warmer.hold();
    const second = warmer.hold();
    await new Promise((r) => setTimeout(r, 60));
    release();
    release(); // once only: the second hold still warms
    const whileHeld = warmer.writes;
    assert.ok(whileHeld >= 2, `writes while held: ${whileHeld}`);
    await new Promise((r) => setTimeout(r, 30));
    assert.ok(warmer.writes > whileHeld, "the second hold keeps it warming");
    second();
    await warmer.idle();
    const after = warmer.writes;
    await new Promise((r) => setTimeout(r, 30));
    assert.equal(warmer.writes, after, "no write after the last release");
    assert.equal(warmer.off, false);
    assert.equal(readFileSync("/proc/self/cgroup", "utf8"), before, "this process was not moved");
  });

  it("ends a hold that is never released by itself", async (t) => {
    if (!pidsOwn) return t.skip("no v1 pids hierarchy here");
    const warmer = new AttachWarmer(CGROUP_ROOT, 2, 80);
    warmer.hold(); // never released
    await new Promise((r) => setTimeout(r, 150));
    await warmer.idle();
    const after = warmer.writes;
    assert.ok(after >= 2, `it warmed first: ${after}`);
    await new Promise((r) => setTimeout(r, 30));
    assert.equal(warmer.writes, after, "no write after the hold's cap");
  });

  it("turns itself off where it cannot write, and boots go on", async () => {
    // A cgroup root that is not one: no procs file to open.
    const dir = mkdtempSync(join(tmpdir(), "ums-warm-"));
    try {
      writeFileSync(join(dir, "cgroup.controllers"), "");
      const warmer = new AttachWarmer(dir, 2);
      warmer.hold()();
      await warmer.idle();
      assert.equal(warmer.off, true);
      assert.equal(warmer.writes, 0);
      warmer.hold()();
      await warmer.idle();
      assert.equal(warmer.writes, 0, "off for good");
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
