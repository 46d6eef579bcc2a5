import assert from "node:assert/strict";
import { describe, it } from "node:test";
import SQLite from "better-sqlite3";
import { cacheStatements } from "./store.js";

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
