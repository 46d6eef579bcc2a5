import type { Kysely, Transaction } from "kysely";
import type { DialectAdapter } from "./dialect.js";
import type { Database, UnitsTable } from "./schema.js";

/**
 * An organization's units are counted in `orgs.unit_count` (issue #16 part 7). The count moves in
 * the same atomic step as the unit's row, and the unit limit is checked against it, so a create no
 * longer counts the organization's units (a pass over 10,000 index entries) under a lock. On
 * PostgreSQL each step is one statement (one round trip, no BEGIN/COMMIT); SQLite, in process and
 * with one writer, runs it as a transaction.
 */

/** 23502 = not_null_violation (PostgreSQL docs, Appendix A). */
const isNullOrgId = (err: unknown) =>
  typeof err === "object" &&
  err !== null &&
  (err as { code?: unknown }).code === "23502" &&
  (err as { column?: unknown }).column === "org_id";

/**
 * Inserts the unit's row and counts it, if its organization has fewer than `max` units; false (and
 * nothing written) when it has `max` already. A taken name throws the dialect's unique violation,
 * with nothing written either.
 */
export async function insertCounted(
  db: Kysely<Database>,
  adapter: DialectAdapter,
  row: UnitsTable,
  max: number,
): Promise<boolean> {
  if (adapter.name === "postgres") {
    // The row's org_id is the id the update returns: none (the limit reached) makes it NULL, which
    // the NOT NULL column refuses, and the failed statement undoes its update. An UPDATE that waited
    // for another create's row lock checks `unit_count < max` again on the row that create left
    // (READ COMMITTED's re-check, PostgreSQL docs 13.2.1), so concurrent creates cannot pass the limit.
    try {
      await db
        .with("slot", (qb) =>
          qb
            .updateTable("orgs")
            .set((eb) => ({ unit_count: eb("unit_count", "+", 1) }))
            .where("id", "=", row.org_id)
            .where("unit_count", "<", max)
            .returning("id"),
        )
        .insertInto("units")
        .values({ ...row, org_id: (eb) => eb.selectFrom("slot").select("id") })
        .execute();
      return true;
    } catch (err) {
      if (isNullOrgId(err)) return false;
      throw err;
    }
  }
  return db.transaction().execute(async (trx) => {
    const slot = await trx
      .updateTable("orgs")
      .set((eb) => ({ unit_count: eb("unit_count", "+", 1) }))
      .where("id", "=", row.org_id)
      .where("unit_count", "<", max)
      .executeTakeFirst();
    if (Number(slot.numUpdatedRows) === 0) return false;
    await trx.insertInto("units").values(row).execute();
    return true;
  });
}

/** Deletes the unit's row and uncounts it; false when there was none. */
export async function deleteCounted(
  db: Kysely<Database>,
  adapter: DialectAdapter,
  orgId: string,
  name: string,
): Promise<boolean> {
  if (adapter.name === "postgres") {
    const r = await db
      .with("gone", (qb) =>
        qb.deleteFrom("units").where("org_id", "=", orgId).where("name", "=", name).returning("org_id"),
      )
      .updateTable("orgs")
      .set((eb) => ({ unit_count: eb("unit_count", "-", 1) }))
      .where("id", "in", (eb) => eb.selectFrom("gone").select("org_id"))
      .executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  }
  return db.transaction().execute(async (trx) => {
    const r = await trx.deleteFrom("units").where("org_id", "=", orgId).where("name", "=", name).executeTakeFirst();
    if (Number(r.numDeletedRows) === 0) return false;
    await trx
      .updateTable("orgs")
      .set((eb) => ({ unit_count: eb("unit_count", "-", 1) }))
      .where("id", "=", orgId)
      .execute();
    return true;
  });
}

/** Counts the organizations' units again, in `trx` (after rows went otherwise: a node forgotten). */
export async function recount(trx: Transaction<Database>, orgIds: readonly string[]): Promise<void> {
  for (let i = 0; i < orgIds.length; i += 500) {
    await trx
      .updateTable("orgs")
      .set((eb) => ({
        unit_count: eb
          .selectFrom("units")
          .select((s) => s.fn.countAll<number>().as("n"))
          .whereRef("units.org_id", "=", "orgs.id"),
      }))
      .where("id", "in", orgIds.slice(i, i + 500))
      .execute();
  }
}
