import type { Kysely } from "kysely";
import type { NodeCapacity, NodeFree, NodeRecord, NodeState } from "../records.js";
import { NodeInUseError, NodeNameTakenError, type NodeStore } from "../store.js";
import type { DialectAdapter } from "./dialect.js";
import { first } from "./rows.js";
import type { Database, NodesTable } from "./schema.js";
import { recount } from "./unit-count.js";

function nodeFromRow(r: NodesTable): NodeRecord {
  return Object.freeze({
    id: r.id,
    name: r.name,
    address: r.address,
    state: r.state as NodeState,
    capacity: Object.freeze(JSON.parse(r.capacity) as NodeCapacity),
    free: Object.freeze(JSON.parse(r.free) as NodeFree),
    labels: Object.freeze(JSON.parse(r.labels) as Record<string, string>),
    version: r.version,
    createdAt: r.created_at,
    startedAt: r.started_at,
    heartbeatAt: r.heartbeat_at,
  });
}

/** Issue #15: the nodes sharing this database. */
export function nodeStore(db: Kysely<Database>, adapter: DialectAdapter): NodeStore {
  const get = (id: string) => first(db.selectFrom("nodes").selectAll().where("id", "=", id), nodeFromRow);
  const getByName = (name: string) => first(db.selectFrom("nodes").selectAll().where("name", "=", name), nodeFromRow);
  // The last list and when it was read, for `list({ maxAgeMs })`; every write through this store
  // drops it (and a list read while a write ran is not kept).
  let recent: { readonly at: number; readonly nodes: NodeRecord[] } | undefined;
  let writes = 0;
  const wrote = () => {
    writes++;
    recent = undefined;
  };
  return {
    async register(n, at) {
      const row = {
        name: n.name,
        address: n.address,
        capacity: JSON.stringify(n.capacity),
        free: JSON.stringify(n.free),
        labels: JSON.stringify(n.labels),
        version: n.version,
        started_at: n.startedAt,
        heartbeat_at: at,
      };
      try {
        await db
          .insertInto("nodes")
          .values({ id: n.id, state: "active", created_at: at, ...row })
          .onConflict((oc) => oc.column("id").doUpdateSet(row))
          .execute();
      } catch (err) {
        if (adapter.isUniqueViolation(err)) {
          const holder = await getByName(n.name);
          if (holder && holder.id !== n.id) throw new NodeNameTakenError(holder);
        }
        throw err;
      }
      wrote();
      const node = await get(n.id);
      if (!node) throw new Error(`node ${n.id} vanished while it registered`);
      return node;
    },
    async heartbeat(id, free, at) {
      const r = await db
        .updateTable("nodes")
        .set({ free: JSON.stringify(free), heartbeat_at: at })
        .where("id", "=", id)
        .executeTakeFirst();
      wrote();
      return Number(r.numUpdatedRows) > 0;
    },
    get,
    getByName,
    async list(opts = {}) {
      const now = Date.now();
      // SQLite reads the table in microseconds, in this process: always now.
      const maxAge = adapter.name === "postgres" ? opts.maxAgeMs : undefined;
      if (maxAge !== undefined && recent && now - recent.at <= maxAge) return recent.nodes;
      const before = writes;
      const nodes = (await db.selectFrom("nodes").selectAll().orderBy("name").execute()).map(nodeFromRow);
      Object.freeze(nodes);
      if (writes === before) recent = { at: now, nodes };
      return nodes;
    },
    async setState(name, state) {
      await db.updateTable("nodes").set({ state }).where("name", "=", name).execute();
      wrote();
      return getByName(name);
    },
    async usage(orgId) {
      // One pass over the (node_id, org_id) index: every unit counted once, the org's twice.
      const [nodes, counts] = await Promise.all([
        db.selectFrom("nodes").selectAll().execute(),
        db
          .selectFrom("units")
          .select((eb) => [
            "node_id",
            eb.fn.countAll<number | string>().as("n"),
            eb.fn.sum<number | string | null>(eb.case().when("org_id", "=", orgId).then(1).else(0).end()).as("org_n"),
          ])
          .where("node_id", "is not", null)
          .groupBy("node_id")
          .execute(),
      ]);
      const byNode = new Map(counts.map((c) => [c.node_id, c]));
      return nodes.map((r) => {
        const c = byNode.get(r.id);
        return { node: nodeFromRow(r), units: Number(c?.n ?? 0), orgUnits: Number(c?.org_n ?? 0) };
      });
    },
    async claimUnplaced(id) {
      const claim = async (table: "units" | "templates" | "images") =>
        Number(
          (await db.updateTable(table).set({ node_id: id }).where("node_id", "is", null).executeTakeFirst())
            .numUpdatedRows,
        );
      return { units: await claim("units"), templates: await claim("templates"), images: await claim("images") };
    },
    async remove(name, opts = {}) {
      const removed = await db.transaction().execute(async (trx) => {
        const node = await first(trx.selectFrom("nodes").selectAll().where("name", "=", name), nodeFromRow);
        if (!node) return false;
        const count = async (table: "units" | "templates" | "images") =>
          Number(
            (
              await trx
                .selectFrom(table)
                .select((eb) => eb.fn.countAll<number | string>().as("n"))
                .where("node_id", "=", node.id)
                .executeTakeFirstOrThrow()
            ).n,
          );
        const holds = {
          units: await count("units"),
          templates: await count("templates"),
          images: await count("images"),
        };
        if (!opts.forgetUnits) {
          if (holds.units + holds.templates + holds.images > 0) throw new NodeInUseError(name, holds);
        } else {
          const rows = await trx.selectFrom("units").select(["id", "org_id"]).where("node_id", "=", node.id).execute();
          const ids = rows.map((u) => u.id);
          // As a unit's delete: its checkpoints' rows go with it (a cascade).
          for (let i = 0; i < ids.length; i += 500) {
            await trx
              .deleteFrom("units")
              .where("id", "in", ids.slice(i, i + 500))
              .execute();
          }
          await recount(trx, [...new Set(rows.map((u) => u.org_id))]);
          // Its templates' and images' files were on that host too.
          await trx.deleteFrom("templates").where("node_id", "=", node.id).execute();
          await trx.deleteFrom("images").where("node_id", "=", node.id).execute();
        }
        await trx.deleteFrom("rehomed_units").where("node_id", "=", node.id).execute();
        await trx.deleteFrom("nodes").where("id", "=", node.id).execute();
        return holds;
      });
      wrote();
      return removed;
    },
    async leftUnits(id) {
      const rows = await db.selectFrom("rehomed_units").select("unit_id").where("node_id", "=", id).execute();
      return rows.map((r) => r.unit_id);
    },
    async forgetLeftUnit(id, unitId) {
      await db.deleteFrom("rehomed_units").where("node_id", "=", id).where("unit_id", "=", unitId).execute();
    },
  };
}
