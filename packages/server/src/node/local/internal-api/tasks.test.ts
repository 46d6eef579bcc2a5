import assert from "node:assert/strict";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import fc from "fast-check";
import { Activity } from "../../../lifecycle/activity.js";
import { KeepAwakeTasks, parseExpire } from "./tasks.js";

describe("keep-awake tasks", () => {
  const now = 1_700_000_000_000;

  it("parses expire as a duration or a time, at most 24 h ahead", () => {
    assert.equal(parseExpire("10m", now), now + 600_000);
    assert.equal(parseExpire(30, now), now + 30_000);
    assert.equal(parseExpire(new Date(now + 5000).toISOString(), now), now + 5000);
    assert.match(String(parseExpire("25h", now)), /at most 24h/);
    assert.match(String(parseExpire("0", now)), /in the future/);
    assert.match(String(parseExpire("soon", now)), /^expire:/);
    fc.assert(
      fc.property(fc.anything(), (v) => {
        const r = parseExpire(v, now);
        assert.ok(typeof r === "string" ? r.startsWith("expire:") : r > now && r <= now + 24 * 3600_000);
      }),
    );
  });

  it("holds the unit while a task lives and releases it on delete and on clear", () => {
    const activity = new Activity();
    const tasks = new KeepAwakeTasks(activity);
    assert.equal(tasks.set("u", "build", "1h").status, 201);
    assert.equal(tasks.set("u", "build", "2h").status, 200);
    assert.equal(tasks.set("u", "test", "1h").status, 201);
    assert.equal(activity.isHeld("u"), true);
    assert.equal(tasks.delete("u", "build").status, 204);
    assert.equal(activity.isHeld("u"), true);
    assert.equal(tasks.delete("u", "build").status, 404);
    tasks.clear("u");
    assert.equal(activity.isHeld("u"), false);
    assert.deepEqual(tasks.list("u"), []);
    const bad = tasks.set("u", "../x", "1h");
    assert.equal(bad.status, 400);
    assert.equal(activity.isHeld("u"), false);
  });

  it("keeps tasks in a file across a server restart, and drops the file when the unit stops", () => {
    const dir = mkdtempSync(join(tmpdir(), "ums-tasks-"));
    try {
      const files = { path: (id: string) => join(dir, `${id}.json`) };
      const first = new KeepAwakeTasks(new Activity(), files);
      assert.equal(first.set("u", "build", "1h").status, 201);
      assert.equal(first.set("u", "short", "1s").status, 201);
      first.forget("u"); // the server stops; the unit runs on
      const activity = new Activity();
      const next = new KeepAwakeTasks(activity, files);
      next.reload("u", Date.now() + 5000); // by then `short` has expired
      assert.deepEqual(
        next.list("u").map((t) => t.name),
        ["build"],
      );
      assert.equal(activity.isHeld("u"), true);
      next.clear("u"); // the unit stops
      assert.equal(existsSync(files.path("u")), false);
      writeFileSync(files.path("v"), "not json");
      next.reload("v");
      assert.deepEqual(next.list("v"), []);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
