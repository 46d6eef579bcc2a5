import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import SQLite from "better-sqlite3";
import { cacheStatements, createSqliteStore } from "./store.js";

describe("SQLite files (issue #19 finding 10)", () => {
  it("the database, its -wal and its -shm are 0600, also where an older version left them 0644", async () => {
    const dir = mkdtempSync(join(tmpdir(), "ums-sqlite-"));
    try {
      const modes = () =>
        Object.fromEntries(readdirSync(dir).map((f) => [f, (statSync(join(dir, f)).mode & 0o777).toString(8)]));
      const first = createSqliteStore(join(dir, "ums.db"));
      await first.migrate();
      assert.deepEqual(modes(), { "ums.db": "600", "ums.db-wal": "600", "ums.db-shm": "600" });
      await first.close();
      writeFileSync(join(dir, "ums.db-shm"), "");
      for (const f of readdirSync(dir)) chmodSync(join(dir, f), 0o644);
      const again = createSqliteStore(join(dir, "ums.db"));
      await again.migrate();
      for (const [f, m] of Object.entries(modes())) assert.equal(m, "600", f);
      await again.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("SQLite statement cache", () => {
  it("hands out one compiled statement per SQL text, a fresh one while it is being iterated", () => {
    const db = new SQLite(":memory:");
    cacheStatements(db, 2);
    db.exec("CREATE TABLE t (n INTEGER); INSERT INTO t VALUES (1), (2), (3)");
    const sql = "SELECT n FROM t ORDER BY n";
    const first = db.prepare(sql);
    assert.equal(db.prepare(sql), first);
    const rows = first.iterate();
    rows.next();
    const during = db.prepare(sql);
    assert.notEqual(during, first);
    assert.deepEqual(during.all(), [{ n: 1 }, { n: 2 }, { n: 3 }]);
    rows.return?.();
    assert.equal(db.prepare(sql), first);
    db.close();
  });

  it("keeps at most `max` statements, and kept ones follow schema changes", () => {
    const db = new SQLite(":memory:");
    cacheStatements(db, 2);
    db.exec("CREATE TABLE t (n INTEGER); INSERT INTO t VALUES (7)");
    const a = db.prepare("SELECT * FROM t");
    db.prepare("SELECT 1");
    db.prepare("SELECT 2");
    assert.notEqual(db.prepare("SELECT * FROM t"), a, "the oldest was dropped");
    const kept = db.prepare("SELECT * FROM t");
    db.exec("ALTER TABLE t ADD COLUMN m INTEGER DEFAULT 5");
    assert.deepEqual(kept.all(), [{ n: 7, m: 5 }]);
    db.close();
  });
});
