import { type Kysely, type Migration, type MigrationProvider, Migrator, sql } from "kysely";

/**
 * One set of migrations for every dialect. Only portable types (text, integer) are used so the
 * same code runs on SQLite and PostgreSQL; names are compared with the column's collation, which
 * is the same for `ORDER BY` and `>` so keyset pagination stays exact on both.
 */
/** `ALTER TABLE … ADD COLUMN … text NOT NULL DEFAULT …`: a policy column every existing row gets. */
function addTextColumn(db: Kysely<unknown>, table: string, column: string, defaultTo: string): Promise<void> {
  return db.schema
    .alterTable(table)
    .addColumn(column, "text", (c) => c.notNull().defaultTo(defaultTo))
    .execute()
    .then(() => {});
}

const migrations: Record<string, Migration> = {
  "0001_control_plane": {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable("orgs")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("slug", "text", (c) => c.notNull().unique())
        .addColumn("units_enabled", "integer", (c) => c.notNull().defaultTo(1))
        .addColumn("max_units", "integer", (c) => c.notNull())
        .addColumn("running_limit", "integer", (c) => c.notNull())
        .addColumn("warm_limit", "integer", (c) => c.notNull())
        .addColumn("created_at", "text", (c) => c.notNull())
        .execute();
      await db.schema
        .createTable("tokens")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("org_id", "text", (c) => c.notNull().references("orgs.id").onDelete("cascade"))
        .addColumn("name", "text", (c) => c.notNull())
        .addColumn("role", "text", (c) => c.notNull())
        .addColumn("token_hash", "text", (c) => c.notNull().unique())
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("last_used_at", "text")
        .addColumn("revoked_at", "text")
        .execute();
      await db.schema
        .createTable("units")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("org_id", "text", (c) => c.notNull().references("orgs.id").onDelete("cascade"))
        .addColumn("name", "text", (c) => c.notNull())
        .addColumn("url_label", "text", (c) => c.notNull().unique())
        .addColumn("status", "text", (c) => c.notNull())
        .addColumn("url_auth", "text", (c) => c.notNull())
        .addColumn("private_access", "text")
        .addColumn("labels", "text", (c) => c.notNull().defaultTo("[]"))
        .addColumn("version", "text")
        .addColumn("environment_version", "text")
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("updated_at", "text", (c) => c.notNull())
        .addColumn("last_running_at", "text")
        .addColumn("last_warming_at", "text")
        .addUniqueConstraint("units_org_name", ["org_id", "name"])
        .execute();
    },
  },
  "0002_unit_policies": {
    async up(db: Kysely<unknown>) {
      await addTextColumn(db, "units", "resources", "{}");
      await addTextColumn(db, "units", "privileges", "{}");
      await db.schema.createIndex("units_status").on("units").column("status").execute();
    },
  },
  "0003_checkpoints": {
    async up(db: Kysely<unknown>) {
      await db.schema.alterTable("units").addColumn("active_checkpoint", "text").execute();
      await db.schema
        .alterTable("units")
        .addColumn("checkpoint_seq", "integer", (c) => c.notNull().defaultTo(0))
        .execute();
      await db.schema
        .createTable("checkpoints")
        .addColumn("unit_id", "text", (c) => c.notNull().references("units.id").onDelete("cascade"))
        .addColumn("id", "text", (c) => c.notNull())
        .addColumn("seq", "integer", (c) => c.notNull())
        .addColumn("comment", "text", (c) => c.notNull().defaultTo(""))
        .addColumn("source_id", "text")
        .addColumn("resources", "text", (c) => c.notNull())
        .addColumn("privileges", "text", (c) => c.notNull())
        .addColumn("created_at", "text", (c) => c.notNull())
        .addPrimaryKeyConstraint("checkpoints_pk", ["unit_id", "id"])
        .execute();
    },
  },
  "0004_network_policy": {
    async up(db: Kysely<unknown>) {
      // Spec 2.10: a new unit enforces nothing; checkpoints carry the policy in force.
      await addTextColumn(db, "units", "network", '{"rules":[]}');
      await addTextColumn(db, "checkpoints", "network", '{"rules":[]}');
    },
  },
  "0005_connectors": {
    async up(db: Kysely<unknown>) {
      await db.schema
        .createTable("connectors")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("org_id", "text", (c) => c.notNull().references("orgs.id").onDelete("cascade"))
        .addColumn("provider", "text", (c) => c.notNull())
        .addColumn("connection_type", "text", (c) => c.notNull())
        .addColumn("provider_account_id", "text", (c) => c.notNull())
        .addColumn("provider_account_name", "text")
        .addColumn("access_policy", "text", (c) => c.notNull().defaultTo("{}"))
        .addColumn("scopes", "text")
        .addColumn("provider_info", "text", (c) => c.notNull().defaultTo("{}"))
        .addColumn("token_expires_at", "text")
        .addColumn("user_id", "text")
        .addColumn("secret", "text", (c) => c.notNull())
        .addColumn("key_version", "integer", (c) => c.notNull())
        .addColumn("inserted_at", "text", (c) => c.notNull())
        .addColumn("updated_at", "text", (c) => c.notNull())
        .execute();
      await db.schema.createIndex("connectors_org").on("connectors").columns(["org_id", "provider"]).execute();
      await db.schema.createIndex("connectors_key_version").on("connectors").column("key_version").execute();
    },
  },
  "0006_oauth_states": {
    async up(db: Kysely<unknown>) {
      // Spec 4.8: the organization an authorization belongs to stays here, keyed by its state.
      await db.schema
        .createTable("oauth_states")
        .addColumn("state_hash", "text", (c) => c.primaryKey())
        .addColumn("org_id", "text", (c) => c.notNull().references("orgs.id").onDelete("cascade"))
        .addColumn("provider", "text", (c) => c.notNull())
        .addColumn("redirect_uri", "text", (c) => c.notNull())
        .addColumn("scopes", "text", (c) => c.notNull())
        .addColumn("connector_id", "text")
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("expires_at", "text", (c) => c.notNull())
        .addColumn("used_at", "text")
        .execute();
      await db.schema.createIndex("oauth_states_expires").on("oauth_states").column("expires_at").execute();
    },
  },
  "0007_unit_config": {
    async up(db: Kysely<unknown>) {
      // Issue #12: the disk size a unit was created with (shown; enforced by issue #20), whether
      // its wakes wait for a running slot, and which checkpoints ums took itself.
      await db.schema.alterTable("units").addColumn("storage_gb", "integer").execute();
      await db.schema
        .alterTable("units")
        .addColumn("wait_for_capacity", "integer", (c) => c.notNull().defaultTo(0))
        .execute();
      // Checkpoints ums takes itself (the backup before a restore); the Sprites clients list them apart.
      await db.schema
        .alterTable("checkpoints")
        .addColumn("auto", "integer", (c) => c.notNull().defaultTo(0))
        .execute();
    },
  },
  "0008_token_expiry_audit": {
    async up(db: Kysely<unknown>) {
      // Issue #20 part 6: tokens may expire; every state-changing call is in an audit log.
      await db.schema.alterTable("tokens").addColumn("expires_at", "text").execute();
      await db.schema
        .createTable("audit_events")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("at", "text", (c) => c.notNull())
        .addColumn("org_id", "text", (c) => c.notNull())
        .addColumn("token_id", "text")
        .addColumn("method", "text", (c) => c.notNull())
        .addColumn("route", "text", (c) => c.notNull())
        .addColumn("unit", "text")
        .addColumn("status", "integer", (c) => c.notNull())
        .addColumn("code", "text")
        .addColumn("ms", "integer", (c) => c.notNull())
        .execute();
      await db.schema.createIndex("audit_events_org_id").on("audit_events").columns(["org_id", "id"]).execute();
      await db.schema.createIndex("audit_events_at").on("audit_events").column("at").execute();
    },
  },
  "0009_events_webhooks": {
    async up(db: Kysely<unknown>) {
      // Issue #17: lifecycle events (bounded: 7 days, 10 000 per organization) and webhooks.
      await db.schema
        .createTable("events")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("org_id", "text", (c) => c.notNull())
        .addColumn("at", "text", (c) => c.notNull())
        .addColumn("type", "text", (c) => c.notNull())
        .addColumn("unit", "text")
        .addColumn("actor", "text", (c) => c.notNull())
        .addColumn("data", "text", (c) => c.notNull().defaultTo("{}"))
        .execute();
      await db.schema.createIndex("events_org_id").on("events").columns(["org_id", "id"]).execute();
      await db.schema.createIndex("events_at").on("events").column("at").execute();
      await db.schema
        .createTable("webhooks")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("org_id", "text", (c) => c.notNull().references("orgs.id").onDelete("cascade"))
        .addColumn("url", "text", (c) => c.notNull())
        .addColumn("types", "text", (c) => c.notNull().defaultTo("[]"))
        .addColumn("secret", "text", (c) => c.notNull())
        .addColumn("key_version", "integer", (c) => c.notNull())
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("last_status", "integer")
        .addColumn("last_error", "text")
        .addColumn("last_attempt_at", "text")
        .addColumn("last_event_id", "text")
        .execute();
      await db.schema.createIndex("webhooks_org").on("webhooks").column("org_id").execute();
    },
  },
  "0011_console_sessions": {
    async up(db: Kysely<unknown>) {
      // Issue #14: console sessions (only the hash of the cookie is kept); a token's revoke or
      // delete ends its sessions. OAuth flows a console session started are bound to it.
      await db.schema
        .createTable("console_sessions")
        .addColumn("id_hash", "text", (c) => c.primaryKey())
        .addColumn("org_id", "text", (c) => c.notNull().references("orgs.id").onDelete("cascade"))
        .addColumn("token_id", "text", (c) => c.notNull().references("tokens.id").onDelete("cascade"))
        .addColumn("csrf", "text", (c) => c.notNull())
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("expires_at", "text", (c) => c.notNull())
        .execute();
      await db.schema.createIndex("console_sessions_expires").on("console_sessions").column("expires_at").execute();
      await db.schema.createIndex("console_sessions_token").on("console_sessions").column("token_id").execute();
      await db.schema.alterTable("oauth_states").addColumn("session_hash", "text").execute();
    },
  },
  "0012_templates": {
    async up(db: Kysely<unknown>) {
      // Issue #18: organization templates. No reference to the unit they were published from: a
      // template outlives it (its files are a snapshot of their own).
      await db.schema
        .createTable("templates")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("org_id", "text", (c) => c.notNull().references("orgs.id").onDelete("cascade"))
        .addColumn("name", "text", (c) => c.notNull())
        .addColumn("description", "text", (c) => c.notNull().defaultTo(""))
        .addColumn("source_unit", "text", (c) => c.notNull())
        .addColumn("source_checkpoint", "text", (c) => c.notNull())
        .addColumn("environment_version", "text")
        .addColumn("resources", "text", (c) => c.notNull())
        .addColumn("privileges", "text", (c) => c.notNull())
        .addColumn("network", "text", (c) => c.notNull())
        .addColumn("ready", "integer", (c) => c.notNull().defaultTo(0))
        .addColumn("created_at", "text", (c) => c.notNull())
        .addUniqueConstraint("templates_org_name", ["org_id", "name"])
        .execute();
    },
  },
  "0013_images": {
    async up(db: Kysely<unknown>) {
      // Issue #18: organization images (imported OCI archives), and which one a unit was made from
      // (null: the host's base image). Units keep the reference: an image in use is not deleted.
      await db.schema
        .createTable("images")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("org_id", "text", (c) => c.notNull().references("orgs.id").onDelete("cascade"))
        .addColumn("name", "text", (c) => c.notNull())
        .addColumn("source", "text", (c) => c.notNull())
        .addColumn("environment_version", "text", (c) => c.notNull())
        .addColumn("config", "text", (c) => c.notNull())
        .addColumn("bytes", "bigint", (c) => c.notNull().defaultTo(0))
        .addColumn("ready", "integer", (c) => c.notNull().defaultTo(0))
        .addColumn("created_at", "text", (c) => c.notNull())
        .addUniqueConstraint("images_org_name", ["org_id", "name"])
        .execute();
      await db.schema.alterTable("units").addColumn("image_id", "text").execute();
      await db.schema.alterTable("units").addColumn("image_version", "text").execute();
      await db.schema.alterTable("templates").addColumn("image_id", "text").execute();
      await db.schema.createIndex("units_image").on("units").column("image_id").execute();
    },
  },
  "0014_image_builds": {
    async up(db: Kysely<unknown>) {
      // Issue #18: an image name has builds. The newest ready one is the name's (superseded_at
      // null); an older one stays, hidden, while units or templates made from it exist, so that
      // `upgrade` can compare a unit with the build it came from. One draft and one current build
      // per name: the table is made again without 0013's unique key (SQLite cannot drop one).
      await db.schema
        .createTable("images_v2")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("org_id", "text", (c) => c.notNull().references("orgs.id").onDelete("cascade"))
        .addColumn("name", "text", (c) => c.notNull())
        .addColumn("source", "text", (c) => c.notNull())
        .addColumn("environment_version", "text", (c) => c.notNull())
        .addColumn("config", "text", (c) => c.notNull())
        .addColumn("bytes", "bigint", (c) => c.notNull().defaultTo(0))
        .addColumn("ready", "integer", (c) => c.notNull().defaultTo(0))
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("superseded_at", "text")
        .execute();
      await sql`insert into images_v2 (id, org_id, name, source, environment_version, config, bytes, ready, created_at)
        select id, org_id, name, source, environment_version, config, bytes, ready, created_at from images`.execute(db);
      await db.schema.dropTable("images").execute();
      await db.schema.alterTable("images_v2").renameTo("images").execute();
      await db.schema
        .createIndex("images_org_name_build")
        .on("images")
        .columns(["org_id", "name", "ready"])
        .unique()
        .where(sql.ref("superseded_at"), "is", null)
        .execute();
    },
  },
  "0015_nodes": {
    async up(db: Kysely<unknown>) {
      // Issue #15: the hosts that run units register here (docs/SCALE-OUT.md); a unit names the
      // node that holds its disk. Units from before are claimed by the first node that starts.
      await db.schema
        .createTable("nodes")
        .addColumn("id", "text", (c) => c.primaryKey())
        .addColumn("name", "text", (c) => c.notNull().unique())
        .addColumn("address", "text", (c) => c.notNull())
        .addColumn("state", "text", (c) => c.notNull().defaultTo("active"))
        .addColumn("capacity", "text", (c) => c.notNull())
        .addColumn("free", "text", (c) => c.notNull())
        .addColumn("labels", "text", (c) => c.notNull().defaultTo("{}"))
        .addColumn("version", "text", (c) => c.notNull())
        .addColumn("created_at", "text", (c) => c.notNull())
        .addColumn("started_at", "text", (c) => c.notNull())
        .addColumn("heartbeat_at", "text", (c) => c.notNull())
        .execute();
      await db.schema.alterTable("units").addColumn("node_id", "text").execute();
      await db.schema.createIndex("units_node").on("units").columns(["node_id", "org_id"]).execute();
    },
  },
  "0016_checkpoint_replicas": {
    async up(db: Kysely<unknown>) {
      // Issue #15: a checkpoint's copy in the object store, as JSON (state, bytes, chain, error).
      await db.schema.alterTable("checkpoints").addColumn("replica", "text").execute();
    },
  },
  "0017_template_image_nodes": {
    async up(db: Kysely<unknown>) {
      // Issue #15: a template's or an image's files are on the node that made it, and units made
      // from it are placed there. Rows from before name none: like units, the next node that starts
      // claims them (NodeStore.claimUnplaced), which is the one node such a database has.
      await db.schema.alterTable("templates").addColumn("node_id", "text").execute();
      await db.schema.alterTable("images").addColumn("node_id", "text").execute();
    },
  },
  "0018_rehomed_units": {
    async up(db: Kysely<unknown>) {
      // Issue #15: units made again on another node from the object store while their node was
      // down (`ums node drain --from-store`): that node may still hold files of them, and removes
      // them when it is back (NodeStore.leftUnits).
      await db.schema
        .createTable("rehomed_units")
        .addColumn("node_id", "text", (c) => c.notNull())
        .addColumn("unit_id", "text", (c) => c.notNull())
        .addPrimaryKeyConstraint("rehomed_units_pk", ["node_id", "unit_id"])
        .execute();
    },
  },
  "0019_org_unit_counts": {
    async up(db: Kysely<unknown>) {
      // Issue #16 part 7: an organization's units counted in its row, moved with each unit's
      // insert and delete (kysely/unit-count.ts), so a create checks the limit without counting.
      await db.schema
        .alterTable("orgs")
        .addColumn("unit_count", "integer", (c) => c.notNull().defaultTo(0))
        .execute();
      await sql`update orgs set unit_count = (select count(*) from units where units.org_id = orgs.id)`.execute(db);
    },
  },
  "0020_auth_generation": {
    async up(db: Kysely<unknown>) {
      // Issue #16 part 2: token lookups are kept while this counter stays (kysely/auth-generation.ts);
      // every token revoke and organization change moves it in its own transaction.
      await db.schema
        .createTable("auth_generation")
        .addColumn("id", "integer", (c) => c.primaryKey())
        .addColumn("gen", "bigint", (c) => c.notNull())
        .execute();
      await sql`insert into auth_generation (id, gen) values (1, 0)`.execute(db);
    },
  },
  "0010_unit_usage": {
    async up(db: Kysely<unknown>) {
      // Issue #17: units' usage, raw every 10 s (kept an hour) and 5-minute averages (kept 7
      // days). `at` is ms since the epoch (bigint: past 32 bits); measures are doubles.
      await db.schema
        .createTable("unit_usage")
        .addColumn("unit_id", "text", (c) => c.notNull())
        .addColumn("step", "integer", (c) => c.notNull())
        .addColumn("at", "bigint", (c) => c.notNull())
        .addColumn("cpu_cores", "double precision", (c) => c.notNull())
        .addColumn("memory_bytes", "double precision", (c) => c.notNull())
        .addColumn("memory_peak_bytes", "double precision", (c) => c.notNull())
        .addColumn("memory_limit_bytes", "double precision")
        .addColumn("disk_bytes", "double precision")
        .addColumn("disk_limit_bytes", "double precision")
        .addColumn("net_rx_bps", "double precision", (c) => c.notNull())
        .addColumn("net_tx_bps", "double precision", (c) => c.notNull())
        .addColumn("pids", "double precision", (c) => c.notNull())
        .execute();
      // No unique key: a unit stopped and booted again within 5 minutes has two averages there.
      await db.schema.createIndex("unit_usage_unit").on("unit_usage").columns(["unit_id", "step", "at"]).execute();
      await db.schema.createIndex("unit_usage_step_at").on("unit_usage").columns(["step", "at"]).execute();
    },
  },
};

const provider: MigrationProvider = { getMigrations: async () => migrations };

export async function migrateToLatest(db: Kysely<unknown>): Promise<void> {
  const migrator = new Migrator({ db, provider });
  const { error, results } = await migrator.migrateToLatest();
  const failed = results?.find((r) => r.status === "Error");
  if (error || failed) {
    const name = failed ? ` (${failed.migrationName})` : "";
    throw new Error(`database migration failed${name}: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/** Migrates up to (and with) migration `name` only: a test's database as an older ums left it. */
export async function migrateTo(db: Kysely<unknown>, name: string): Promise<void> {
  const { error } = await new Migrator({ db, provider }).migrateTo(name);
  if (error) throw error;
}
