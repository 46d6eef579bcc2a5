import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import SQLite from "better-sqlite3";
import pg from "pg";
import { eventId } from "../events/event-id.js";
import { testDialects } from "../testing/dialects.js";
import { openStore } from "./open.js";
import type { Store } from "./store.js";
import {
  ImageExistsError,
  NodeInUseError,
  NodeNameTakenError,
  TemplateExistsError,
  UnitExistsError,
  UnitLimitError,
} from "./store.js";

const limits = { maxUnits: 2, runningLimit: 1, warmLimit: 1 };

/** A cold unit's record for `units.create`, with the id and URL label a test chooses. */
const newUnit = (orgId: string, name: string, id: string, urlLabel: string) => ({
  id,
  orgId,
  name,
  urlLabel,
  status: "cold" as const,
  urlAuth: "unit" as const,
  privateAccess: null,
  labels: [],
  version: null,
  environmentVersion: null,
  createdAt: new Date().toISOString(),
});

/** A node's registration with the id and name a test chooses (small capacity, no labels). */
const newNode = (id: string, name: string) => ({
  id,
  name,
  address: "10.0.0.1:7071",
  capacity: { cpus: 2, memoryBytes: 1, diskBytes: 1, unitSlots: null },
  free: { memoryBytes: 1, diskBytes: 1 },
  labels: {},
  version: "1.0.0",
  startedAt: "2026-11-28T10:00:00.000Z",
});

/** A webhook of `orgId` for `unit.created`, as the server would store it (its secret sealed). */
const webhookRecord = (id: string, orgId: string) => ({
  id,
  orgId,
  url: "https://example.invalid/h",
  types: ["unit.created"],
  secret: "v1.sealed",
  keyVersion: 1,
  createdAt: new Date().toISOString(),
  lastStatus: null,
  lastError: null,
  lastAttemptAt: null,
  lastEventId: null,
});

/** One store suite, looped over every dialect (kysely style). */
for (const dialect of testDialects) {
  describe(`store (${dialect.name})`, { skip: dialect.skip }, () => {
    let store: Store;
    let dir: string;
    let drop: () => Promise<void>;
    let databaseUrl: string | undefined;
    before(async () => {
      dir = await mkdtemp(join(tmpdir(), "ums-store-"));
      const db = await dialect.createDatabase();
      drop = db.drop;
      databaseUrl = db.databaseUrl;
      store = await openStore({ dataDir: dir, databaseUrl: db.databaseUrl });
    });
    after(async () => {
      await store?.close();
      await drop?.();
      await rm(dir, { recursive: true, force: true });
    });

    it("migrates idempotently", async () => {
      await store.migrate();
      await store.migrate();
      assert.equal(store.dialect, dialect.name);
    });

    it("creates an organization once, even when asked concurrently", async () => {
      const orgs = await Promise.all(Array.from({ length: 8 }, () => store.orgs.ensure("once", limits)));
      assert.equal(new Set(orgs.map((o) => o.id)).size, 1);
      assert.equal((await store.orgs.list()).filter((o) => o.slug === "once").length, 1);
      const updated = await store.orgs.setLimits("once", { warmLimit: 9 });
      assert.deepEqual([updated?.maxUnits, updated?.runningLimit, updated?.warmLimit], [2, 1, 9]);
      assert.equal(await store.orgs.setLimits("missing", { warmLimit: 1 }), undefined);
    });

    it("finds live tokens by hash only", async () => {
      const org = await store.orgs.ensure("tok", limits);
      const t = await store.tokens.create({
        id: "tok_a",
        orgId: org.id,
        name: "n",
        role: "member",
        hash: "h1",
        createdAt: new Date().toISOString(),
      });
      assert.equal(t.orgSlug, "tok");
      const found = await store.tokens.authenticate("h1");
      assert.equal(found?.token.id, "tok_a");
      assert.equal(found?.org.slug, "tok");
      assert.equal(await store.tokens.authenticate("h2"), undefined);
      assert.equal(await store.tokens.revoke("tok_a", new Date().toISOString()), true);
      assert.equal(await store.tokens.revoke("tok_a", new Date().toISOString()), false, "already revoked");
      assert.equal(await store.tokens.authenticate("h1"), undefined);
      assert.ok((await store.tokens.list(org.id))[0]?.revokedAt);
    });

    it("keeps a token's lookup only while no token was revoked and no organization changed, in any process (issue #16 part 2)", async () => {
      // PostgreSQL: lookups are kept while the feed listens (auth-generation.ts).
      await store.feed?.start();
      const org = await store.orgs.ensure("kept", limits);
      const mint = (id: string, hash: string) =>
        store.tokens.create({ id, orgId: org.id, name: id, role: "member", hash, createdAt: new Date().toISOString() });
      await mint("tok_k1", "hk1");
      await mint("tok_k2", "hk2");
      /** SQL straight to the database, behind the store's back (as an operator's psql or sqlite3 would). */
      const raw = async (statement: string) => {
        if (!databaseUrl) {
          const db = new SQLite(join(dir, "ums.db"));
          try {
            db.prepare(statement).run();
          } finally {
            db.close();
          }
          return;
        }
        const c = new pg.Client({ connectionString: databaseUrl });
        await c.connect();
        try {
          await c.query(statement);
        } finally {
          await c.end();
        }
      };
      /** The lookup as `store` sees it: at once on SQLite, once the notice came on PostgreSQL. */
      const settles = async (
        hash: string,
        check: (found: Awaited<ReturnType<Store["tokens"]["authenticate"]>>) => boolean,
      ) => {
        for (let i = 0; ; i++) {
          const found = await store.tokens.authenticate(hash);
          if (check(found)) return i;
          assert.ok(dialect.name === "postgres" && i < 100, `not seen after ${i} tries: ${JSON.stringify(found)}`);
          await new Promise((r) => setTimeout(r, 20));
        }
      };
      assert.equal((await store.tokens.authenticate("hk1"))?.token.id, "tok_k1");
      // A change that does not go through the store is not seen while the lookup is kept: it is kept.
      await raw("update tokens set revoked_at = '2030-01-01T00:00:00Z' where id = 'tok_k1'");
      assert.equal((await store.tokens.authenticate("hk1"))?.token.id, "tok_k1", "kept");
      // Another process's revoke (the CLI's, another API process's) moves the generation.
      const other = await openStore({ dataDir: dir, databaseUrl });
      try {
        assert.equal(await other.tokens.revoke("tok_k2", new Date().toISOString()), true);
        const tries = await settles("hk1", (f) => f === undefined);
        if (dialect.name === "sqlite") assert.equal(tries, 0, "the kept lookup is dropped at once");
      } finally {
        await other.close();
      }
      // This process's own revoke holds from its next lookup, on every dialect.
      await mint("tok_k3", "hk3");
      assert.equal((await store.tokens.authenticate("hk3"))?.token.id, "tok_k3");
      assert.equal(await store.tokens.revoke("tok_k3", new Date().toISOString()), true);
      assert.equal(await store.tokens.authenticate("hk3"), undefined, "at once in the revoking process");
      // An organization's new limits reach the next lookup (a kept lookup carries them).
      await mint("tok_k4", "hk4");
      assert.equal((await store.tokens.authenticate("hk4"))?.org.warmLimit, limits.warmLimit);
      const again = await openStore({ dataDir: dir, databaseUrl });
      try {
        await again.orgs.setLimits("kept", { warmLimit: 7 });
        await settles("hk4", (f) => f?.org.warmLimit === 7);
      } finally {
        await again.close();
      }
      // The API's revoke (revokeInOrg) drops it too.
      assert.equal(await store.tokens.revokeInOrg(org.id, "tok_k4", new Date().toISOString()), "revoked");
      assert.equal(await store.tokens.authenticate("hk4"), undefined);
    });

    it("enforces the unit limit and unique names", async () => {
      const org = await store.orgs.ensure("units", limits);
      const unit = (name: string) => newUnit(org.id, name, `unit-${name}`, `${name}-x`);
      await store.units.create(unit("a"), 2);
      await assert.rejects(store.units.create({ ...unit("a"), id: "unit-a2", urlLabel: "a-y" }, 2), UnitExistsError);
      await store.units.create(unit("b"), 2);
      await assert.rejects(store.units.create(unit("c"), 2), UnitLimitError);
      assert.deepEqual(
        (await store.units.page(org.id, { limit: 10 })).map((u) => u.name),
        ["a", "b"],
      );
      assert.equal((await store.units.getByUrlLabel("b-x"))?.name, "b");
      // The gateway's caller: read afresh, so a label change shows at the next call.
      assert.deepEqual(await store.units.callerById("unit-b"), { id: "unit-b", orgId: org.id, name: "b", labels: [] });
      await store.units.update(org.id, "b", { labels: ["ci", "gpu"], updatedAt: "2030-01-01T00:00:00.000Z" });
      assert.deepEqual((await store.units.callerById("unit-b"))?.labels, ["ci", "gpu"]);
      assert.equal(await store.units.callerById("unit-nope"), undefined);
      const patched = await store.units.update(org.id, "a", {
        status: "running",
        updatedAt: "2030-01-01T00:00:00.000Z",
      });
      assert.equal(patched?.status, "running");
      assert.deepEqual(await store.units.namesWithStatus(org.id, "running"), ["a"]);
      assert.equal(await store.units.delete(org.id, "a"), true);
      assert.equal(await store.units.delete(org.id, "a"), false);
    });

    it("holds the unit limit under concurrent creates; deletes and taken names move the count right (issue #16 part 7)", async () => {
      const org = await store.orgs.ensure("unit-count", { ...limits, maxUnits: 3 });
      const unit = (name: string) => newUnit(org.id, name, `unit-${name}-${org.id}`, `${name}-count`);
      const names = (
        await Promise.allSettled(Array.from({ length: 10 }, (_, i) => store.units.create(unit(`c${i}`), 3)))
      )
        .map((r, i) => {
          if (r.status === "fulfilled") return `c${i}`;
          assert.ok(r.reason instanceof UnitLimitError, String(r.reason));
          return undefined;
        })
        .filter((n) => n !== undefined);
      assert.equal(names.length, 3, "ten at once against a limit of 3: three made");
      const listed = async () => (await store.units.page(org.id, { limit: 20 })).map((u) => u.name);
      assert.deepEqual(await listed(), names.sort());
      // A taken name is refused without taking a slot; a refused create leaves nothing.
      const [first, second] = names as [string, string];
      assert.equal(await store.units.delete(org.id, first), true);
      await assert.rejects(store.units.create({ ...unit(second), id: "unit-twin" }, 3), UnitExistsError);
      await store.units.create(unit("d1"), 3);
      await assert.rejects(store.units.create(unit("d2"), 3), UnitLimitError);
      // A delete of a unit that is not there frees nothing.
      assert.equal(await store.units.delete(org.id, first), false);
      await assert.rejects(store.units.create(unit("d3"), 3), UnitLimitError);
      // A raised limit counts the units already there.
      await store.units.create(unit("d4"), 4);
      await assert.rejects(store.units.create(unit("d5"), 4), UnitLimitError);
      assert.equal((await listed()).length, 4);
    });

    it("connectors: org-scoped reads, policy updates, reseal only of the secret read (key rotation)", async () => {
      const org = await store.orgs.ensure("conn-org", limits);
      const other = await store.orgs.ensure("conn-other", limits);
      const now = new Date().toISOString();
      const rec = {
        id: "conn_a",
        orgId: org.id,
        provider: "github",
        connectionType: "api_key" as const,
        providerAccountId: "key_1",
        providerAccountName: null,
        accessPolicy: "{}",
        scopes: null,
        providerInfo: "{}",
        tokenExpiresAt: null,
        userId: null,
        secret: "v1.sealed",
        keyVersion: 1,
        insertedAt: now,
        updatedAt: now,
      };
      await store.connectors.insert(rec);
      await store.connectors.insert({ ...rec, id: "conn_b", provider: "slack", secret: "v2.x", keyVersion: 2 });
      assert.equal(await store.connectors.get(other.id, "conn_a"), undefined);
      assert.deepEqual(
        (await store.connectors.list(org.id, "slack")).map((c) => c.id),
        ["conn_b"],
      );
      assert.equal((await store.connectors.getById("conn_a"))?.orgId, org.id);
      const u = await store.connectors.update(org.id, "conn_a", { accessPolicy: '{"allow_all":true}' });
      assert.equal(u?.accessPolicy, '{"allow_all":true}');
      assert.equal(await store.connectors.update(other.id, "conn_a", { accessPolicy: "{}" }), undefined);
      assert.deepEqual(
        (await store.connectors.sealedUnder(2, 10)).map((c) => c.id),
        ["conn_a"],
      );
      assert.equal(await store.connectors.reseal("conn_a", "v1.stale", "v2.y", 2), false);
      assert.equal(await store.connectors.reseal("conn_a", "v1.sealed", "v2.y", 2), true);
      assert.deepEqual(await store.connectors.sealedUnder(2, 10), []);
      assert.equal(await store.connectors.delete(other.id, "conn_a"), false);
      assert.equal(await store.connectors.delete(org.id, "conn_a"), true);
      assert.equal(await store.connectors.getById("conn_a"), undefined);
    });

    it("templates (issue #18): unique per organization, shown only when ready", async () => {
      const org = await store.orgs.ensure("tpl-org", limits);
      const other = await store.orgs.ensure("tpl-other", limits);
      const rec = {
        id: "tpl-a",
        orgId: org.id,
        name: "base",
        description: "d",
        sourceUnit: "src",
        sourceCheckpoint: "v0",
        environmentVersion: null,
        imageId: null,
        resources: '{"memory":{"limit_mb":300}}',
        privileges: "{}",
        network: '{"rules":[]}',
        ready: false,
        createdAt: new Date().toISOString(),
        nodeId: null,
      };
      await store.templates.insert(rec);
      assert.equal(await store.templates.get(org.id, "base"), undefined, "not ready: not shown");
      assert.deepEqual(await store.templates.list(org.id), []);
      await assert.rejects(store.templates.insert({ ...rec, id: "tpl-b" }), TemplateExistsError, "even when not ready");
      await store.templates.insert({ ...rec, id: "tpl-c", orgId: other.id });
      await store.templates.setReady("tpl-a", true);
      const got = await store.templates.get(org.id, "base");
      assert.deepEqual(got, { ...rec, ready: true });
      assert.deepEqual(
        (await store.templates.list(org.id)).map((t) => t.id),
        ["tpl-a"],
      );
      assert.equal(await store.templates.get(other.id, "base"), undefined, "the other org's is not ready");
      assert.deepEqual(
        (await store.templates.all()).filter((t) => t.id.startsWith("tpl-")).map((t) => [t.id, t.ready]),
        [
          ["tpl-a", true],
          ["tpl-c", false],
        ],
      );
      await store.templates.setReady("tpl-a", false);
      assert.equal(await store.templates.get(org.id, "base"), undefined, "hidden while being deleted");
      assert.equal(await store.templates.delete("tpl-a"), true);
      assert.equal(await store.templates.delete("tpl-a"), false);
      await store.templates.insert({ ...rec, id: "tpl-d", ready: true });
      assert.equal((await store.templates.get(org.id, "base"))?.id, "tpl-d", "the name is free again");
    });

    it("images (issue #18): one build under way per name, shown when finished, counted while units use them", async () => {
      const org = await store.orgs.ensure("img-org", limits);
      const other = await store.orgs.ensure("img-other", limits);
      const rec = {
        id: "img-a",
        orgId: org.id,
        name: "py",
        source: "",
        environmentVersion: "",
        config: "{}",
        bytes: 0,
        ready: false,
        createdAt: new Date().toISOString(),
        supersededAt: null,
        nodeId: null,
      };
      await store.images.insert(rec);
      assert.equal(await store.images.get(org.id, "py"), undefined, "not ready: not shown");
      assert.deepEqual(await store.images.list(org.id), []);
      await assert.rejects(store.images.insert({ ...rec, id: "img-b" }), ImageExistsError, "even when not ready");
      await store.images.insert({ ...rec, id: "img-c", orgId: other.id });
      const done = { ...rec, source: "oci-layout", environmentVersion: "py@1", config: '{"env":[]}', bytes: 5e9 };
      assert.deepEqual(await store.images.finish(done), [], "the name's first build supersedes none");
      assert.deepEqual(await store.images.get(org.id, "py"), { ...done, ready: true }, "big sizes survive");
      assert.deepEqual(await store.images.getById("img-c"), { ...rec, id: "img-c", orgId: other.id });
      assert.deepEqual(
        (await store.images.list(org.id)).map((i) => i.id),
        ["img-a"],
      );
      assert.equal(await store.images.get(other.id, "py"), undefined, "the other org's is not ready");
      assert.equal(await store.images.usedBy("img-a"), 0);
      const unit = {
        id: "unit-img-user",
        orgId: org.id,
        name: "img-user",
        urlLabel: "img-user-x",
        status: "cold" as const,
        urlAuth: "unit" as const,
        privateAccess: null,
        labels: [],
        version: null,
        environmentVersion: "py@1",
        createdAt: new Date().toISOString(),
        imageId: "img-a",
      };
      assert.equal((await store.units.create(unit, 10)).imageId, "img-a");
      assert.equal((await store.units.get(org.id, "img-user"))?.imageId, "img-a");
      assert.equal(await store.images.usedBy("img-a"), 1);
      assert.equal(await store.units.delete(org.id, "img-user"), true);
      assert.equal(await store.images.usedBy("img-a"), 0);
      await store.images.hide("img-a");
      assert.equal(await store.images.get(org.id, "py"), undefined, "hidden while being deleted");
      assert.equal(await store.images.delete("img-a"), true);
      assert.equal(await store.images.delete("img-a"), false);
      assert.ok((await store.images.all()).some((i) => i.id === "img-c" && !i.ready));
    });

    it("images (issue #18): a newer build takes the name, the older one is kept hidden as superseded", async () => {
      const org = await store.orgs.ensure("img-builds", limits);
      const build = (id: string) => ({
        id,
        orgId: org.id,
        name: "app",
        source: `recipe:${id}`,
        environmentVersion: `app@${id}`,
        config: "{}",
        bytes: 1,
        ready: false,
        createdAt: new Date().toISOString(),
        supersededAt: null,
        nodeId: null,
      });
      await store.images.insert(build("img-b1"));
      await store.images.finish(build("img-b1"));
      await store.images.insert(build("img-b2"));
      await assert.rejects(store.images.insert(build("img-b3")), ImageExistsError, "one draft of a name at a time");
      assert.equal((await store.images.get(org.id, "app"))?.id, "img-b1", "the draft does not take the name");
      assert.deepEqual(await store.images.finish(build("img-b2")), ["img-b1"]);
      assert.equal((await store.images.get(org.id, "app"))?.id, "img-b2");
      assert.deepEqual(
        (await store.images.list(org.id)).map((i) => i.id),
        ["img-b2"],
        "only the name's build is listed",
      );
      const old = await store.images.getById("img-b1");
      assert.ok(old?.ready && old.supersededAt !== null, "the older build stays, ready and superseded");
      assert.deepEqual(
        (await store.images.superseded()).filter((i) => i.orgId === org.id).map((i) => i.id),
        ["img-b1"],
      );
      // A delete of the current build hides it while a new draft of the name is under way.
      await store.images.insert(build("img-b3"));
      await store.images.hide("img-b2");
      assert.equal(await store.images.get(org.id, "app"), undefined);
      assert.deepEqual(await store.images.finish(build("img-b3")), [], "a hidden build is not superseded again");
      assert.equal((await store.images.get(org.id, "app"))?.id, "img-b3");
    });

    it("revokes an organization's token unless it is its last admin one, concurrent revokes included", async () => {
      const org = await store.orgs.ensure("revokes", limits);
      const other = await store.orgs.ensure("revokes-other", limits);
      const mk = (id: string, orgId: string, role: "admin" | "member") =>
        store.tokens.create({ id, orgId, name: id, role, hash: `hash-${id}`, createdAt: new Date().toISOString() });
      await mk("tok_r_a1", org.id, "admin");
      await mk("tok_r_a2", org.id, "admin");
      await mk("tok_r_m", org.id, "member");
      await mk("tok_r_x", other.id, "admin");
      const at = new Date().toISOString();
      assert.equal(await store.tokens.revokeInOrg(org.id, "tok_r_x", at), "not_found", "another org's token");
      assert.equal(await store.tokens.revokeInOrg(org.id, "tok_r_none", at), "not_found");
      assert.equal(await store.tokens.revokeInOrg(org.id, "tok_r_m", at), "revoked");
      assert.equal(await store.tokens.revokeInOrg(org.id, "tok_r_m", at), "not_found", "already revoked");
      // The two admins revoke each other at once: exactly one of them goes.
      const both = await Promise.all([
        store.tokens.revokeInOrg(org.id, "tok_r_a1", at),
        store.tokens.revokeInOrg(org.id, "tok_r_a2", at),
      ]);
      assert.deepEqual([...both].sort(), ["last_admin", "revoked"]);
      const live = (await store.tokens.list(org.id)).filter((t) => !t.revokedAt).map((t) => t.id);
      assert.equal(live.length, 1);
      assert.equal(await store.tokens.revokeInOrg(org.id, live[0] ?? "", at), "last_admin");
      assert.ok(await store.tokens.authenticate("hash-tok_r_x"), "the other organization's token is untouched");
    });

    it("OAuth states: one record per state hash until it expires, used once", async () => {
      const org = await store.orgs.ensure("oauth-states", limits);
      const t0 = Date.parse("2030-01-01T00:00:00.000Z");
      const iso = (ms: number) => new Date(t0 + ms).toISOString();
      const rec = {
        stateHash: "a".repeat(64),
        orgId: org.id,
        provider: "github",
        redirectUri: "https://app.example/cb",
        scopes: "repo",
        connectorId: null,
        createdAt: iso(0),
        expiresAt: iso(600_000),
        usedAt: null,
      };
      assert.equal(await store.oauthStates.insert(rec), true);
      assert.equal(await store.oauthStates.insert({ ...rec, orgId: org.id, provider: "slack" }), false, "in use");
      assert.equal((await store.oauthStates.get(rec.stateHash))?.provider, "github");
      assert.equal(await store.oauthStates.get("b".repeat(64)), undefined);
      const uses = await Promise.all([
        store.oauthStates.use(rec.stateHash, iso(1000)),
        store.oauthStates.use(rec.stateHash, iso(1000)),
      ]);
      assert.deepEqual([...uses].sort(), [false, true], "one callback wins");
      assert.equal((await store.oauthStates.get(rec.stateHash))?.usedAt, iso(1000));
      assert.equal(await store.oauthStates.insert({ ...rec, createdAt: iso(2000) }), false, "used, not expired");
      const late = { ...rec, stateHash: "c".repeat(64) };
      await store.oauthStates.insert(late);
      assert.equal(await store.oauthStates.use(late.stateHash, iso(600_000)), false, "expired");
      // Once expired, a record is removed by the next insert and its state may be used again.
      assert.equal(
        await store.oauthStates.insert({ ...rec, createdAt: iso(700_000), expiresAt: iso(1_300_000) }),
        true,
      );
      assert.equal(await store.oauthStates.get(late.stateHash), undefined);
    });

    it("events: in id order per organization, filtered, pruned by time and by count", async () => {
      const a = await store.orgs.ensure("ev-a", limits);
      const b = await store.orgs.ensure("ev-b", limits);
      const ev = (n: number, orgId: string, type = "unit.created", unit = "u", at = new Date().toISOString()) => ({
        id: `evt_${String(n).padStart(13, "0")}aaaaaa`,
        orgId,
        at,
        type,
        unit,
        actor: "system",
        data: JSON.stringify({ n }),
      });
      await store.events.add(ev(1, a.id, "unit.created", "u", "2020-01-01T00:00:00.000Z"));
      for (let n = 2; n <= 6; n++)
        await store.events.add(ev(n, a.id, n % 2 ? "unit.booted" : "unit.created", `u${n % 3}`));
      await store.events.add(ev(7, b.id));
      const all = await store.events.list(a.id, { limit: 100 });
      assert.deepEqual(
        all.map((e) => JSON.parse(e.data).n),
        [1, 2, 3, 4, 5, 6],
      );
      const after3 = await store.events.list(a.id, { after: all[2]?.id, limit: 2 });
      assert.deepEqual(
        after3.map((e) => JSON.parse(e.data).n),
        [4, 5],
      );
      const booted = await store.events.list(a.id, { types: ["unit.booted"], limit: 100 });
      assert.deepEqual(
        booted.map((e) => JSON.parse(e.data).n),
        [3, 5],
      );
      assert.deepEqual(
        (await store.events.list(a.id, { unit: "u1", limit: 100 })).map((e) => JSON.parse(e.data).n),
        [4],
      );
      assert.deepEqual(
        (await store.events.orgIds()).filter((id) => id === a.id || id === b.id).sort(),
        [a.id, b.id].sort(),
      );
      assert.equal(await store.events.pruneBefore("2021-01-01T00:00:00.000Z"), 1);
      assert.equal(await store.events.pruneOrg(a.id, 2), 3);
      assert.deepEqual(
        (await store.events.list(a.id, { limit: 100 })).map((e) => JSON.parse(e.data).n),
        [5, 6],
      );
      assert.equal(await store.events.pruneOrg(a.id, 2), 0);
      assert.equal((await store.events.list(b.id, { limit: 100 })).length, 1, "another organization's are kept");
    });

    it("events of several processes (issue #15): ids increase in commit order per organization; the feed brings them all, and webhook changes; one process leads", async (t) => {
      if (!store.feed) {
        assert.equal(dialect.name, "sqlite", "PostgreSQL has a feed");
        t.skip("SQLite: one process records and reads events");
        return;
      }
      const org = await store.orgs.ensure("ev-feed", limits);
      const other = await openStore({ dataDir: dir, databaseUrl });
      try {
        const heard: string[] = [];
        const changed: string[] = [];
        const unsubscribe = store.feed.subscribe({
          event: (e) => {
            if (e.orgId === org.id) heard.push(`${e.id} ${e.data}`);
          },
          webhooksChanged: (orgId) => changed.push(orgId),
        });
        await store.feed.start();
        await other.feed?.start();
        const ev = (id: string, n: number) => ({
          id,
          orgId: org.id,
          at: new Date().toISOString(),
          type: "unit.created",
          unit: "u",
          actor: "system",
          data: JSON.stringify({ n }),
        });
        const first = await store.events.add(ev(eventId(2_000_000_000_000, 0), 1));
        // Another process whose clock is behind: its event takes the next id after the last one.
        const second = await other.events.add(ev(eventId(1_000_000_000_000, 0), 2));
        assert.ok(second.id > first.id, `${second.id} > ${first.id}`);
        // A large event goes by its id, and still in order.
        const third = await other.events.add({
          ...ev(eventId(1_000_000_000_001, 0), 3),
          data: JSON.stringify({ n: 3, pad: "x".repeat(9000) }),
        });
        assert.ok(third.id > second.id);
        for (let i = 0; heard.length < 3; i++) {
          assert.ok(i < 100, `the feed brought ${heard.length} of 3 events`);
          await new Promise((r) => setTimeout(r, 50));
        }
        assert.deepEqual(
          heard.map((h) => h.split(" ")[0]),
          [first.id, second.id, third.id],
        );
        assert.deepEqual(
          (await store.events.list(org.id, { limit: 10 })).map((e) => e.id),
          [first.id, second.id, third.id],
        );
        await other.webhooks.insert(webhookRecord("whk_feed", org.id), 20);
        assert.equal(await other.webhooks.delete(org.id, "whk_feed"), true);
        for (let i = 0; changed.length < 2; i++) {
          assert.ok(i < 100, `the feed said ${changed.length} of 2 webhook changes`);
          await new Promise((r) => setTimeout(r, 50));
        }
        assert.deepEqual(changed, [org.id, org.id]);
        unsubscribe();
        // One lead: this store's; the other takes it once this one's connection is gone.
        assert.equal(await store.feed.lead(), true);
        assert.equal(await other.feed?.lead(), false);
        assert.equal(await store.feed.lead(), true, "kept");
        const again = await openStore({ dataDir: dir, databaseUrl });
        await again.feed?.start();
        assert.equal(await again.feed?.lead(), false);
        await other.close();
        assert.equal(await again.feed?.lead(), false, "still this store's");
        await store.feed.close();
        assert.equal(await again.feed?.lead(), true, "free once its holder's connection ended");
        await again.close();
      } finally {
        await other.close().catch(() => {});
      }
    });

    it("webhooks: scoped to their organization, at most `max`, attempts recorded", async () => {
      const a = await store.orgs.ensure("wh-a", limits);
      const b = await store.orgs.ensure("wh-b", limits);
      assert.equal(await store.webhooks.insert(webhookRecord("whk_1", a.id), 2), true);
      assert.equal(await store.webhooks.insert(webhookRecord("whk_2", a.id), 2), true);
      assert.equal(await store.webhooks.insert(webhookRecord("whk_3", a.id), 2), false);
      assert.equal(await store.webhooks.insert(webhookRecord("whk_4", b.id), 2), true);
      assert.deepEqual(
        (await store.webhooks.list(a.id)).map((w) => w.id),
        ["whk_1", "whk_2"],
      );
      assert.equal(await store.webhooks.get(b.id, "whk_1"), undefined);
      assert.equal(await store.webhooks.delete(b.id, "whk_1"), false);
      await store.webhooks.recordAttempt("whk_1", {
        status: 503,
        error: "answered 503",
        at: "2026-01-01T00:00:00.000Z",
        eventId: "evt_x",
      });
      const got = await store.webhooks.get(a.id, "whk_1");
      assert.deepEqual(
        [got?.lastStatus, got?.lastError, got?.lastAttemptAt, got?.lastEventId, got?.types],
        [503, "answered 503", "2026-01-01T00:00:00.000Z", "evt_x", ["unit.created"]],
      );
      assert.equal(await store.webhooks.delete(a.id, "whk_1"), true);
      assert.equal((await store.webhooks.list(a.id)).length, 1);
    });

    it("nodes: placement's recent list (issue #16 part 7) is kept a while on PostgreSQL only, and read again after a write through the store", async () => {
      await store.nodes.register(newNode("node-recent", "recent"), "2026-11-29T10:00:00.000Z");
      const stateOf = async (maxAgeMs?: number) =>
        (await store.nodes.list(maxAgeMs === undefined ? undefined : { maxAgeMs })).find((n) => n.name === "recent")
          ?.state;
      assert.equal(await stateOf(60_000), "active");
      const other = await openStore({ dataDir: dir, databaseUrl });
      try {
        await other.nodes.setState("recent", "cordoned");
      } finally {
        await other.close();
      }
      // Another process's cordon: seen at once on SQLite, after maxAgeMs on PostgreSQL.
      assert.equal(await stateOf(60_000), dialect.name === "postgres" ? "active" : "cordoned");
      assert.equal(await stateOf(), "cordoned", "a list without maxAgeMs always reads");
      assert.equal(await stateOf(60_000), "cordoned", "and is the recent one now");
      // A write through this store: the next list reads, whatever maxAgeMs allows.
      await store.nodes.setState("recent", "active");
      assert.equal(await stateOf(60_000), "active");
      assert.notEqual(await store.nodes.remove("recent"), false);
      assert.equal(await stateOf(60_000), undefined);
    });

    it("nodes (issue #15): register and start again by id, a name per node, heartbeats, state, unit counts, claims, removal", async () => {
      const GiB = 1024 ** 3;
      const n = (id: string, name: string) => ({
        id,
        name,
        address: "",
        capacity: { cpus: 2, memoryBytes: 8 * GiB, diskBytes: 100 * GiB, unitSlots: null },
        free: { memoryBytes: 4 * GiB, diskBytes: 50 * GiB },
        labels: { zone: "a" },
        version: "1.0.0",
        startedAt: "2026-11-28T10:00:00.000Z",
      });
      const a = await store.nodes.register(n("node-a", "alpha"), "2026-11-28T10:00:00.000Z");
      assert.equal(a.state, "active");
      assert.deepEqual(a.labels, { zone: "a" });
      assert.equal(a.capacity.unitSlots, null);
      await assert.rejects(
        store.nodes.register(n("node-b", "alpha"), "2026-11-28T10:00:01.000Z"),
        (err: unknown) => err instanceof NodeNameTakenError && err.holder.id === "node-a",
      );
      await store.nodes.register(n("node-b", "beta"), "2026-11-28T10:00:01.000Z");
      // Cordoned, then started again: the operator's state stays; the row is the new start's.
      assert.equal((await store.nodes.setState("alpha", "cordoned"))?.state, "cordoned");
      const again = await store.nodes.register(
        { ...n("node-a", "alpha"), labels: { zone: "b" }, startedAt: "2026-11-28T11:00:00.000Z" },
        "2026-11-28T11:00:00.000Z",
      );
      assert.equal(again.state, "cordoned");
      assert.deepEqual(again.labels, { zone: "b" });
      assert.equal(again.createdAt, "2026-11-28T10:00:00.000Z");
      assert.equal(again.startedAt, "2026-11-28T11:00:00.000Z");
      assert.equal(
        await store.nodes.heartbeat("node-a", { memoryBytes: GiB, diskBytes: 2 * GiB }, "2026-11-28T11:00:05.000Z"),
        true,
      );
      const beat = await store.nodes.get("node-a");
      assert.equal(beat?.heartbeatAt, "2026-11-28T11:00:05.000Z");
      assert.deepEqual(beat?.free, { memoryBytes: GiB, diskBytes: 2 * GiB });
      assert.equal(
        await store.nodes.heartbeat("node-zz", { memoryBytes: 1, diskBytes: 1 }, "2026-11-28T11:00:05.000Z"),
        false,
      );
      assert.deepEqual(
        (await store.nodes.list()).map((x) => x.name),
        ["alpha", "beta"],
      );

      // Units: two of org1 and one of org2 on alpha, one of org1 on beta, one from before nodes.
      const o1 = await store.orgs.ensure("nodes-one", { ...limits, maxUnits: 10 });
      const o2 = await store.orgs.ensure("nodes-two", { ...limits, maxUnits: 10 });
      const mk = (org: string, name: string, nodeId: string | null) =>
        store.units.create(
          {
            id: `unit-${name}`,
            orgId: org,
            name,
            urlLabel: `${name}-nodes`,
            status: "cold",
            urlAuth: "unit",
            privateAccess: null,
            labels: [],
            version: null,
            environmentVersion: null,
            createdAt: new Date().toISOString(),
            nodeId,
          },
          10,
        );
      await mk(o1.id, "n1", "node-a");
      await mk(o1.id, "n2", "node-a");
      await mk(o2.id, "n3", "node-a");
      await mk(o1.id, "n4", "node-b");
      const old = await mk(o2.id, "n5", null);
      assert.equal(old.nodeId, null);
      const use = async (org: string) =>
        Object.fromEntries((await store.nodes.usage(org)).map((u) => [u.node.name, [u.units, u.orgUnits]]));
      assert.deepEqual(await use(o1.id), { alpha: [3, 2], beta: [1, 1] });
      assert.deepEqual(await use(o2.id), { alpha: [3, 1], beta: [1, 0] });
      // A template and an image from before nodes (issue #15) are claimed like units.
      const tpl = (id: string, nodeId: string | null) => ({
        id,
        orgId: o1.id,
        name: id,
        description: "",
        sourceUnit: "n1",
        sourceCheckpoint: "v0",
        environmentVersion: null,
        imageId: null,
        resources: "{}",
        privileges: "{}",
        network: '{"rules":[]}',
        ready: true,
        createdAt: new Date().toISOString(),
        nodeId,
      });
      await store.templates.insert(tpl("tpl-nodes-old", null));
      await store.images.insert({
        id: "img-nodes-old",
        orgId: o1.id,
        name: "nodes-old",
        source: "",
        environmentVersion: "",
        config: "{}",
        bytes: 0,
        ready: true,
        createdAt: new Date().toISOString(),
        supersededAt: null,
        nodeId: null,
      });
      // The other tests' units, templates and images name no node either: all go.
      const claimed = await store.nodes.claimUnplaced("node-a");
      assert.ok(claimed.units >= 1 && claimed.templates >= 1 && claimed.images >= 1, JSON.stringify(claimed));
      assert.equal((await store.units.get(o2.id, "n5"))?.nodeId, "node-a");
      assert.equal((await store.templates.get(o1.id, "tpl-nodes-old"))?.nodeId, "node-a");
      assert.equal((await store.images.getById("img-nodes-old"))?.nodeId, "node-a");
      assert.deepEqual(await store.nodes.claimUnplaced("node-b"), { units: 0, templates: 0, images: 0 });

      await assert.rejects(
        store.nodes.remove("beta"),
        (err: unknown) => err instanceof NodeInUseError && err.units === 1,
      );
      await store.units.delete(o1.id, "n4");
      // A template holds a node as a unit does: its files are there.
      await store.templates.insert(tpl("tpl-nodes-beta", "node-b"));
      await assert.rejects(
        store.nodes.remove("beta"),
        (err: unknown) =>
          err instanceof NodeInUseError &&
          err.units === 0 &&
          err.holds.templates === 1 &&
          err.message === "node 'beta' still holds 1 templates",
      );
      await store.templates.delete("tpl-nodes-beta");
      assert.deepEqual(await store.nodes.remove("beta"), { units: 0, templates: 0, images: 0 });
      assert.equal(await store.nodes.remove("beta"), false);
      assert.equal(await store.nodes.getByName("beta"), undefined);
      // A node gone for good with its units: their rows (and their checkpoints') go with it.
      await store.checkpoints.insert({
        unitId: "unit-n1",
        id: "v0",
        seq: 0,
        comment: "",
        sourceId: null,
        resources: "{}",
        privileges: "{}",
        network: '{"rules":[]}',
        createdAt: new Date().toISOString(),
        auto: false,
      });
      const onAlpha = (await store.nodes.usage(o1.id)).find((u) => u.node.name === "alpha")?.units ?? 0;
      const named = <T extends { nodeId: string | null }>(rows: T[]) =>
        rows.filter((r) => r.nodeId === "node-a").length;
      const held = {
        units: onAlpha,
        templates: named(await store.templates.all()),
        images: named(await store.images.all()),
      };
      assert.ok(held.templates >= 1 && held.images >= 1);
      assert.deepEqual(await store.nodes.remove("alpha", { forgetUnits: true }), held);
      // Its units are no longer counted against their organizations (o2's one on alpha was n3).
      for (let i = 0; i < 10; i++) await mk(o2.id, `after-${i}`, null);
      await assert.rejects(mk(o2.id, "after-10", null), UnitLimitError);
      for (let i = 0; i < 10; i++) await store.units.delete(o2.id, `after-${i}`);
      assert.equal(await store.units.get(o1.id, "n1"), undefined);
      assert.deepEqual(await store.checkpoints.list("unit-n1"), []);
      assert.equal(await store.templates.get(o1.id, "tpl-nodes-old"), undefined, "its templates' rows go too");
      assert.equal(await store.images.getById("img-nodes-old"), undefined, "and its images'");
      assert.deepEqual(await store.nodes.list(), []);
    });

    it("node-scoped reads (issue #15): a node lists its own units, templates, images and checkpoints to copy, and those naming none", async () => {
      const org = await store.orgs.ensure("node-scope", { ...limits, maxUnits: 10 });
      const unit = (name: string, nodeId: string | null, status: "running" | "warm" | "cold") =>
        store.units.create(
          {
            id: `unit-scope-${name}`,
            orgId: org.id,
            name,
            urlLabel: `${name}-scope`,
            status,
            urlAuth: "unit",
            privateAccess: null,
            labels: [],
            version: null,
            environmentVersion: null,
            createdAt: new Date().toISOString(),
            nodeId,
          },
          10,
        );
      await unit("mine", "node-mine", "running");
      await unit("mine-cold", "node-mine", "cold");
      await unit("other", "node-other", "running");
      await unit("none", null, "warm");
      const units = async (nodeId?: string) =>
        (await store.units.withStatus(["running", "warm"], nodeId))
          .map((u) => u.id)
          .filter((id) => id.startsWith("unit-scope-"))
          .sort();
      assert.deepEqual(await units("node-mine"), ["unit-scope-mine", "unit-scope-none"]);
      assert.deepEqual(await units("node-other"), ["unit-scope-none", "unit-scope-other"]);
      assert.deepEqual(await units(), ["unit-scope-mine", "unit-scope-none", "unit-scope-other"], "no node: all");

      const template = (id: string, nodeId: string | null) =>
        store.templates.insert({
          id,
          orgId: org.id,
          name: id,
          description: "",
          sourceUnit: "mine",
          sourceCheckpoint: "v0",
          environmentVersion: null,
          imageId: null,
          resources: "{}",
          privileges: "{}",
          network: '{"rules":[]}',
          ready: false,
          createdAt: new Date().toISOString(),
          nodeId,
        });
      await template("tpl-scope-mine", "node-mine");
      await template("tpl-scope-none", null);
      await template("tpl-scope-other", "node-other");
      const templates = async (nodeId?: string) =>
        (await store.templates.all(nodeId)).filter((t) => t.id.startsWith("tpl-scope-")).map((t) => [t.id, t.nodeId]);
      assert.deepEqual(await templates("node-mine"), [
        ["tpl-scope-mine", "node-mine"],
        ["tpl-scope-none", null],
      ]);
      assert.equal((await templates()).length, 3);

      const image = (id: string, name: string, nodeId: string | null) => ({
        id,
        orgId: org.id,
        name,
        source: "",
        environmentVersion: `${name}@${id}`,
        config: "{}",
        bytes: 0,
        ready: false,
        createdAt: new Date().toISOString(),
        supersededAt: null,
        nodeId,
      });
      await store.images.insert(image("img-scope-mine", "m", "node-mine"));
      await store.images.insert(image("img-scope-none", "n", null));
      await store.images.insert(image("img-scope-other", "o", "node-other"));
      const images = async (nodeId?: string) =>
        (await store.images.all(nodeId)).filter((i) => i.id.startsWith("img-scope-")).map((i) => [i.id, i.nodeId]);
      assert.deepEqual(await images("node-other"), [
        ["img-scope-none", null],
        ["img-scope-other", "node-other"],
      ]);
      assert.equal((await images()).length, 3);
      // A newer build of each name supersedes the node's first one.
      for (const [id, name, nodeId] of [
        ["img-scope-mine", "m", "node-mine"],
        ["img-scope-other", "o", "node-other"],
      ] as const) {
        await store.images.finish({ ...image(id, name, nodeId), ready: true });
        await store.images.insert(image(`${id}-2`, name, nodeId));
        assert.deepEqual(await store.images.finish({ ...image(`${id}-2`, name, nodeId), ready: true }), [id]);
      }
      const superseded = async (nodeId?: string) =>
        (await store.images.superseded(nodeId)).filter((i) => i.orgId === org.id).map((i) => i.id);
      assert.deepEqual(await superseded("node-mine"), ["img-scope-mine"]);
      assert.deepEqual(await superseded(), ["img-scope-mine", "img-scope-other"]);

      // Checkpoints whose copy to the object store is still to be made.
      for (const u of ["mine", "other", "none"]) {
        await store.checkpoints.insert({
          unitId: `unit-scope-${u}`,
          id: "v0",
          seq: 0,
          comment: "",
          sourceId: null,
          resources: "{}",
          privileges: "{}",
          network: '{"rules":[]}',
          createdAt: new Date().toISOString(),
          auto: false,
        });
        assert.equal(
          await store.checkpoints.setReplica(`unit-scope-${u}`, "v0", { state: "failed", error: "x" }),
          true,
        );
      }
      const copies = async (nodeId?: string) =>
        (await store.checkpoints.unreplicated(nodeId))
          .map((c) => c.unitId)
          .filter((id) => id.startsWith("unit-scope-"))
          .sort();
      assert.deepEqual(await copies("node-mine"), ["unit-scope-mine", "unit-scope-none"]);
      assert.deepEqual(await copies(), ["unit-scope-mine", "unit-scope-none", "unit-scope-other"]);
      // The organization's running units on other nodes that are up (the running limit's count).
      await store.nodes.register(newNode("node-other", "scope-other"), "2026-11-28T10:00:00.000Z");
      await store.nodes.register(newNode("node-mine", "scope-mine"), "2026-11-28T10:00:00.000Z");
      assert.equal(await store.units.countOnOtherNodes(org.id, "running", "node-mine", "2026-11-28T09:59:00.000Z"), 1);
      assert.equal(await store.units.countOnOtherNodes(org.id, "warm", "node-mine", "2026-11-28T09:59:00.000Z"), 0);
      assert.equal(await store.units.countOnOtherNodes(org.id, "running", "node-other", "2026-11-28T09:59:00.000Z"), 1);
      // node-other is down (its heartbeat older than the bound): its stale records do not count.
      assert.equal(await store.units.countOnOtherNodes(org.id, "running", "node-mine", "2026-11-28T10:00:01.000Z"), 0);
      assert.equal(
        await store.units.countOnOtherNodes("another-org", "running", "node-mine", "2026-11-28T09:59:00.000Z"),
        0,
      );
      await store.nodes.remove("scope-other", { forgetUnits: true });
      await store.nodes.remove("scope-mine", { forgetUnits: true });
    });

    it("rehome (issue #15): a unit of a node that is down names another node, that node is told at its return; not while it is up", async () => {
      const org = await store.orgs.ensure("rehome", { ...limits, maxUnits: 10 });
      await store.nodes.register(newNode("node-lost", "rehome-lost"), "2026-11-28T10:00:00.000Z");
      await store.nodes.register(newNode("node-live", "rehome-live"), "2026-11-28T10:05:00.000Z");
      for (const name of ["rh-a", "rh-b"]) {
        await store.units.create(
          {
            id: `unit-${name}`,
            orgId: org.id,
            name,
            urlLabel: `${name}-rehome`,
            status: "running",
            urlAuth: "unit",
            privateAccess: null,
            labels: [],
            version: null,
            environmentVersion: null,
            createdAt: "2026-11-28T09:00:00.000Z",
            nodeId: name === "rh-a" ? "node-lost" : "node-live",
          },
          10,
        );
      }
      const downBefore = "2026-11-28T10:01:00.000Z";
      // node-live's heartbeat is after the bound: its unit is not taken from it.
      assert.equal(await store.units.rehome("unit-rh-b", "node-live", "node-lost", "v0", downBefore), false);
      assert.equal((await store.units.get(org.id, "rh-b"))?.nodeId, "node-live");
      // Not a unit of that node: nothing.
      assert.equal(await store.units.rehome("unit-rh-b", "node-lost", "node-live", "v0", downBefore), false);
      assert.equal(await store.units.rehome("unit-rh-a", "node-lost", "node-live", "v3", downBefore), true);
      const a = await store.units.get(org.id, "rh-a");
      assert.deepEqual([a?.nodeId, a?.status, a?.activeCheckpoint], ["node-live", "cold", "v3"]);
      assert.equal(await store.units.rehome("unit-rh-a", "node-lost", "node-live", "v3", downBefore), false);
      assert.deepEqual(await store.nodes.leftUnits("node-lost"), ["unit-rh-a"]);
      assert.deepEqual(await store.nodes.leftUnits("node-live"), []);
      await store.nodes.forgetLeftUnit("node-lost", "unit-rh-a");
      assert.deepEqual(await store.nodes.leftUnits("node-lost"), []);
      // Removing the node drops what it was to be told.
      await store.units.rehome("unit-rh-a", "node-live", "node-lost", "v3", "2026-11-28T10:06:00.000Z");
      assert.deepEqual(await store.nodes.leftUnits("node-live"), ["unit-rh-a"]);
      await store.nodes.remove("rehome-live", { forgetUnits: true });
      assert.deepEqual(await store.nodes.leftUnits("node-live"), []);
      await store.nodes.remove("rehome-lost", { forgetUnits: true });
    });

    it("keeps units' usage samples by step, lists them oldest first and prunes by age (issue #17)", async () => {
      const now = Date.UTC(2026, 0, 1); // ms past 32 bits
      const at = (i: number) => now + i * 10_000;
      const sample = (i: number) => ({
        at: at(i),
        cpuCores: 0.25 * i,
        memoryBytes: 3 * 2 ** 31 + i,
        memoryPeakBytes: 4 * 2 ** 31,
        memoryLimitBytes: i === 0 ? null : 2 ** 33,
        diskBytes: i === 1 ? null : 123_456_789_012,
        diskLimitBytes: null,
        netRxBps: 1.5,
        netTxBps: 0,
        pids: 7,
      });
      const rows = Array.from({ length: 450 }, (_, i) => ({ unitId: "u-usage", sample: sample(i % 5) }));
      await store.usage.add(10, rows.slice(0, 5));
      await store.usage.add(10, [{ unitId: "u-other", sample: sample(2) }]);
      await store.usage.add(300, [{ unitId: "u-usage", sample: sample(0) }]);
      const listed = await store.usage.list("u-usage", 10, at(1));
      assert.deepEqual(
        listed.map((x) => x.at),
        [at(1), at(2), at(3), at(4)],
      );
      assert.deepEqual(listed[0], sample(1));
      assert.deepEqual((await store.usage.list("u-usage", 300, 0))[0], sample(0));
      assert.equal(await store.usage.prune(10, at(3)), 4, "u-usage's first three and u-other's");
      assert.deepEqual(
        (await store.usage.list("u-usage", 10, 0)).map((x) => x.at),
        [at(3), at(4)],
      );
      assert.equal((await store.usage.list("u-usage", 300, 0)).length, 1, "another step is not pruned");
      // Many rows in one call (inserted in chunks).
      await store.usage.add(10, rows);
      assert.equal((await store.usage.list("u-usage", 10, 0)).length, 452);
    });
  });
}
