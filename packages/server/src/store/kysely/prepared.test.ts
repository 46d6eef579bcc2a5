import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import SQLite from "better-sqlite3";
import { Kysely, SqliteDialect } from "kysely";
import { sqliteDirectReader } from "../sqlite/store.js";
import { prepared, registerDirectReader } from "./prepared.js";

interface Db {
  pets: { id: string; owner: string; kind: string; legs: number };
}

/** The table every test here queries. */
const createPets = (db: Kysely<Db>) =>
  db.schema
    .createTable("pets")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("owner", "text")
    .addColumn("kind", "text")
    .addColumn("legs", "integer")
    .execute();

describe("prepared queries", () => {
  let db: Kysely<Db>;
  before(async () => {
    db = new Kysely<Db>({ dialect: new SqliteDialect({ database: new SQLite(":memory:") }) });
    await createPets(db);
    await db
      .insertInto("pets")
      .values([
        { id: "a", owner: "ann", kind: "cat", legs: 4 },
        { id: "b", owner: "ann", kind: "bird", legs: 2 },
        { id: "c", owner: "bob", kind: "cat", legs: 4 },
      ])
      .execute();
  });
  after(() => db.destroy());

  it("runs with each call's arguments, in the order the query binds them, keeping the shape's own constants", async () => {
    // `kind` is bound before `owner` in the SQL, and `legs` is a constant of the shape.
    const byOwnerKind = prepared(db, 2, (owner: string, kind: string) =>
      db.selectFrom("pets").select("id").where("kind", "=", kind).where("legs", "=", 4).where("owner", "=", owner),
    );
    assert.deepEqual(await byOwnerKind("ann", "cat"), [{ id: "a" }]);
    assert.deepEqual(await byOwnerKind("bob", "cat"), [{ id: "c" }]);
    assert.deepEqual(await byOwnerKind("ann", "bird"), [], "the constant legs = 4 still applies");
    assert.deepEqual(await byOwnerKind("nobody", "cat"), []);
  });

  it("an argument is data, never SQL", async () => {
    const byId = prepared(db, 1, (id: string) => db.selectFrom("pets").select("id").where("id", "=", id));
    assert.deepEqual(await byId("a' or '1'='1"), []);
    assert.deepEqual(await byId("a"), [{ id: "a" }]);
  });

  it("inserts: numbers and nulls are bound as they are, not as the placeholder strings they were built with", async () => {
    const add = prepared(db, 4, (id: string, owner: string | null, kind: string, legs: number) =>
      db.insertInto("pets").values({ id, owner: owner as string, kind, legs }),
    );
    await add("d", null, "snake", 0);
    await add("e", "eve", "spider", 8);
    const rows = await db.selectFrom("pets").selectAll().where("id", "in", ["d", "e"]).orderBy("id").execute();
    assert.deepEqual(rows, [
      { id: "d", owner: null, kind: "snake", legs: 0 },
      { id: "e", owner: "eve", kind: "spider", legs: 8 },
    ]);
    const legs = await db
      .selectFrom("pets")
      .select((eb) => eb.fn.sum<number>("legs").as("n"))
      .executeTakeFirstOrThrow();
    assert.equal(legs.n, 4 + 2 + 4 + 0 + 8, "legs are integers, summed as numbers");
  });

  it("refuses a shape that binds an argument twice or not at all", async () => {
    const twice = prepared(db, 1, (id: string) =>
      db.selectFrom("pets").select("id").where("id", "=", id).where("owner", "=", id),
    );
    await assert.rejects(twice("a"), /argument 0 is bound 2 times, not once/);
    const never = prepared(db, 2, (id: string, _unused: string) =>
      db.selectFrom("pets").select("id").where("id", "=", id),
    );
    await assert.rejects(never("a", "b"), /argument 1 is bound 0 times, not once/);
  });

  it("SQLite's direct reads never see a transaction's uncommitted rows: they wait for it", async () => {
    const database = new SQLite(":memory:");
    const own = new Kysely<Db>({ dialect: new SqliteDialect({ database }) });
    try {
      await createPets(own);
      await own.insertInto("pets").values({ id: "a", owner: "x", kind: "cat", legs: 4 }).execute();
      registerDirectReader(own, sqliteDirectReader(database));
      const legs = prepared(own, 1, (id: string) => own.selectFrom("pets").select("legs").where("id", "=", id));
      assert.deepEqual(await legs("a"), [{ legs: 4 }], "outside a transaction: read at once");
      let read: Promise<unknown> | undefined;
      await assert.rejects(
        own.transaction().execute(async (trx) => {
          await trx.updateTable("pets").set({ legs: 3 }).where("id", "=", "a").execute();
          read = legs("a");
          await new Promise((r) => setTimeout(r, 20));
          throw new Error("rolled back");
        }),
        /rolled back/,
      );
      assert.deepEqual(await read, [{ legs: 4 }], "the read waited for the rollback, not the uncommitted 3");
    } finally {
      await own.destroy();
    }
  });
});
