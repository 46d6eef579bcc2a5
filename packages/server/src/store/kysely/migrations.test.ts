// Migrations over data an older ums left (SQLite here; store.test.ts runs the latest schema on every
// dialect): 0014 makes the images table again without 0013's unique key, rows kept; 0017 gives
// templates and images a node; 0019 counts each organization's units.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import SQLite from "better-sqlite3";
import { Kysely, SqliteDialect, sql } from "kysely";
import { migrateTo, migrateToLatest } from "./migrations.js";

describe("migrations", () => {
  it("0014 keeps the images 0013 had and allows a newer build of a name beside the superseded one", async () => {
    const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: new SQLite(":memory:") }) });
    try {
      await migrateTo(db, "0013_images");
      await sql`insert into orgs (id, slug, max_units, running_limit, warm_limit, created_at)
        values ('org-1', 'one', 10, 5, 5, '2026-01-01T00:00:00Z')`.execute(db);
      await sql`insert into images (id, org_id, name, source, environment_version, config, bytes, ready, created_at)
        values ('img-old', 'org-1', 'app', 'docker-save', 'app@old', '{}', 5000000000, 1, '2026-01-01T00:00:00Z')`.execute(
        db,
      );
      await migrateToLatest(db);
      const rows = await sql<{ id: string; bytes: number; superseded_at: string | null }>`
        select id, bytes, superseded_at from images`.execute(db);
      assert.deepEqual(rows.rows, [{ id: "img-old", bytes: 5000000000, superseded_at: null }]);
      const add = (id: string, ready: number, superseded: string | null) =>
        sql`insert into images (id, org_id, name, source, environment_version, config, bytes, ready, created_at, superseded_at)
          values (${id}, 'org-1', 'app', 'x', 'app@x', '{}', 1, ${ready}, '2026-01-02T00:00:00Z', ${superseded})`.execute(
          db,
        );
      await assert.rejects(add("img-twin", 1, null), /UNIQUE/, "one current build per name");
      await add("img-draft", 0, null);
      await assert.rejects(add("img-draft2", 0, null), /UNIQUE/, "one draft per name");
      await add("img-older", 1, "2026-01-02T00:00:00Z");
      await add("img-oldest", 1, "2026-01-01T00:00:00Z");
    } finally {
      await db.destroy();
    }
  });

  it("0017 keeps the templates and images 0016 had, naming no node (the next node to start claims them)", async () => {
    const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: new SQLite(":memory:") }) });
    try {
      await migrateTo(db, "0016_checkpoint_replicas");
      await sql`insert into orgs (id, slug, max_units, running_limit, warm_limit, created_at)
        values ('org-1', 'one', 10, 5, 5, '2026-01-01T00:00:00Z')`.execute(db);
      await sql`insert into templates (id, org_id, name, source_unit, source_checkpoint, resources, privileges, network, ready, created_at)
        values ('tpl-old', 'org-1', 'base', 'src', 'v0', '{}', '{}', '{}', 1, '2026-01-01T00:00:00Z')`.execute(db);
      await sql`insert into images (id, org_id, name, source, environment_version, config, bytes, ready, created_at)
        values ('img-old', 'org-1', 'app', 'docker-save', 'app@old', '{}', 1, 1, '2026-01-01T00:00:00Z')`.execute(db);
      await migrateToLatest(db);
      const rows = await sql<{ id: string; node_id: string | null }>`
        select id, node_id from templates union all select id, node_id from images order by id`.execute(db);
      assert.deepEqual(rows.rows, [
        { id: "img-old", node_id: null },
        { id: "tpl-old", node_id: null },
      ]);
    } finally {
      await db.destroy();
    }
  });
  it("0019 counts the units each organization already has", async () => {
    const db = new Kysely<unknown>({ dialect: new SqliteDialect({ database: new SQLite(":memory:") }) });
    try {
      await migrateTo(db, "0018_rehomed_units");
      for (const [id, slug] of [
        ["org-1", "one"],
        ["org-2", "two"],
        ["org-3", "three"],
      ])
        await sql`insert into orgs (id, slug, max_units, running_limit, warm_limit, created_at)
          values (${id}, ${slug}, 10, 5, 5, '2026-01-01T00:00:00Z')`.execute(db);
      for (const [id, org] of [
        ["u1", "org-1"],
        ["u2", "org-1"],
        ["u3", "org-2"],
      ])
        await sql`insert into units (id, org_id, name, url_label, status, url_auth, created_at, updated_at)
          values (${id}, ${org}, ${id}, ${`${id}-x`}, 'cold', 'unit', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')`.execute(
          db,
        );
      await migrateToLatest(db);
      const rows = await sql<{ id: string; unit_count: number }>`select id, unit_count from orgs order by id`.execute(
        db,
      );
      assert.deepEqual(rows.rows, [
        { id: "org-1", unit_count: 2 },
        { id: "org-2", unit_count: 1 },
        { id: "org-3", unit_count: 0 },
      ]);
    } finally {
      await db.destroy();
    }
  });
});
