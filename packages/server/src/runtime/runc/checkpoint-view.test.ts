import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { promisify } from "node:util";
import { mountsBelow, unmountBelow } from "../storage/mounts.js";
import { CheckpointView, VIEW_HELPER } from "./checkpoint-view.js";

const execFileP = promisify(execFile);
const sorted = (ids: string[]) => ids.sort((a, b) => Number(a.slice(1)) - Number(b.slice(1)));

// The view's binds made both ways: by the native helper (what a built server uses) and by mount(8)
// (without a compiler). The unit's side of them (read-only for its root, across propagation) is
// security/checkpoint-mounts.test.ts, with real units.
const ways = [
  { name: "the native helper", helper: VIEW_HELPER as string | null, skip: !existsSync(VIEW_HELPER) },
  { name: "mount(8)", helper: null, skip: false },
];

for (const way of ways) {
  describe(`CheckpointView with ${way.name}`, {
    skip:
      process.getuid?.() !== 0
        ? "needs root (mount)"
        : way.skip
          ? "the helper is not built (npm run build:agent)"
          : false,
  }, () => {
    let base: string;
    let view: CheckpointView;
    let dir: string;
    let snapshots: string;
    const snapshot = async (id: string) => {
      await mkdir(join(snapshots, id, "home"), { recursive: true });
      await writeFile(join(snapshots, id, "home", "n"), id);
    };

    before(async () => {
      base = await mkdtemp(join(tmpdir(), "ums-view-"));
      dir = join(base, "run", "checkpoints");
      snapshots = join(base, "checkpoints");
      for (let i = 1; i <= 7; i++) await snapshot(`v${i}`);
      // Snapshots on a mount with flags of its own: the helper's binds keep them, and add ro.
      await execFileP("mount", ["--bind", snapshots, snapshots]);
      await execFileP("mount", ["-o", "remount,bind,nosuid,nodev,noexec", snapshots]);
      await mkdir(join(snapshots, "v9"), { recursive: true }); // still being received: not shown
      view = new CheckpointView(dir, snapshots, join(base, "run", "staging"), (id) => id === "v9", way.helper);
    });
    after(async () => {
      await unmountBelow(base).catch(() => {});
      await rm(base, { recursive: true, force: true });
    });

    it("binds the five most recent checkpoints, read-only, and nothing in staging", async () => {
      await view.prepare();
      assert.deepEqual(sorted(await readdir(dir)), ["v3", "v4", "v5", "v6", "v7"]);
      const mounts = await mountsBelow(dir);
      for (const id of ["v3", "v4", "v5", "v6", "v7"]) {
        const m = mounts.find((e) => e.mountPoint === join(dir, id));
        assert.ok(m, `${id} is bound`);
        // mount(8) of Debian 12 (util-linux 2.38) remounts a bind with only the flags it is given.
        for (const flag of way.helper ? ["ro", "nosuid", "nodev", "noexec"] : ["ro"]) {
          assert.ok(m.options.split(",").includes(flag), `${id} is ${flag}: ${m.options}`);
        }
        assert.equal(await readFile(join(dir, id, "home", "n"), "utf8"), id);
      }
      await assert.rejects(writeFile(join(dir, "v5", "home", "x"), "x"), { code: "EROFS" });
      assert.deepEqual(await readdir(join(base, "run", "staging")), []);
      assert.deepEqual(
        (await mountsBelow(join(base, "run", "staging"))).map((m) => m.mountPoint),
        [join(base, "run", "staging")],
      );
    });

    it("follows new and hidden checkpoints", async () => {
      await snapshot("v8");
      await view.refresh();
      assert.deepEqual(sorted(await readdir(dir)), ["v4", "v5", "v6", "v7", "v8"]);
      assert.equal((await mountsBelow(join(dir, "v3"))).length, 0, "v3 is unbound");
      await view.hide("v8");
      assert.ok(!existsSync(join(dir, "v8")));
      assert.equal((await mountsBelow(join(dir, "v8"))).length, 0);
      await view.hide("v8"); // hiding what is not shown is no error
      await rm(join(snapshots, "v8"), { recursive: true });
      await view.refresh();
      assert.deepEqual(sorted(await readdir(dir)), ["v3", "v4", "v5", "v6", "v7"]);
    });

    it("unbinds everything at teardown", async () => {
      await view.teardown();
      assert.deepEqual(
        (await mountsBelow(join(base, "run"))).map((m) => m.mountPoint),
        [],
      );
      assert.deepEqual(await readdir(dir), []);
    });
  });
}

describe("ums-view", { skip: existsSync(VIEW_HELPER) ? false : "not built (npm run build:agent)" }, () => {
  it("refuses what is not a checkpoint id, before doing anything", async () => {
    for (const op of ["+../etc", "-v1/../../x", "+v", "v1", "+v1x", "+"]) {
      const err = await execFileP(VIEW_HELPER, ["/nonexistent", "/nonexistent", "/nonexistent", "+v1", op]).then(
        () => undefined,
        (e: { code?: number; stderr?: string }) => e,
      );
      assert.equal(err?.code, 2, `'${op}' is refused`);
      assert.match(err?.stderr ?? "", /not an operation/);
    }
  });
});
