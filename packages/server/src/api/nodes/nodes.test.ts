// Issue #15 (docs/SCALE-OUT.md "Nodes"): GET /v1/nodes and /v1/nodes/{name} for admin tokens, and
// the node a unit names in its answers. On one host (SQLite, `--role all`: its one node), then two
// nodes on PostgreSQL, one of them stopped.
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { after, before, describe, it } from "node:test";
import { ErrorCode } from "@ums/protocol";
import { testDialects } from "../../testing/dialects.js";
import { startSqliteServer, startTestServer, type TestServer } from "../../testing/server.js";

const pg = testDialects.find((d) => d.name === "postgres");

/** The fields a node answers with; its endpoint address is not one of them. */
const FIELDS = [
  "cpus",
  "created_at",
  "disk_bytes",
  "disk_free_bytes",
  "heartbeat_age_seconds",
  "heartbeat_at",
  "id",
  "labels",
  "memory_bytes",
  "memory_free_bytes",
  "name",
  "started_at",
  "state",
  "status",
  "unit_slots",
  "units",
  "up",
  "version",
];

describe("GET /v1/nodes on one host (SQLite)", () => {
  let s: TestServer;
  let admin: string;
  let member: string;
  before(async () => {
    s = await startSqliteServer();
    admin = await s.token("nodes-a");
    member = await s.token("nodes-a", { role: "member" });
  });
  after(() => s?.close());

  it("shows an admin token the host's one node, up and active, with its units and what it has free", async () => {
    const [row] = await s.server.store.nodes.list();
    assert.ok(row, "a --role all server registers its node");
    const empty = await s.api("GET", "/v1/nodes", { token: admin });
    assert.equal(empty.status, 200, empty.text);
    assert.equal(empty.headers.get("cache-control"), "no-store");
    assert.equal(empty.body.nodes.length, 1);
    assert.equal(empty.body.nodes[0].units, 0);
    await s.unit(admin, "placed");
    await s.unit(await s.token("nodes-b"), "elsewhere");
    const r = await s.api("GET", "/v1/nodes", { token: admin });
    const [n] = r.body.nodes;
    assert.deepEqual(Object.keys(n).sort(), FIELDS, "no endpoint address, nothing else");
    assert.equal(n.id, row.id);
    assert.equal(n.name, row.name);
    assert.equal(n.up, true);
    assert.equal(n.state, "active");
    assert.equal(n.status, "up");
    assert.equal(n.units, 2, "units of every organization");
    assert.equal(n.unit_slots, null);
    assert.equal(n.version, row.version);
    assert.deepEqual(n.labels, {});
    assert.ok(n.cpus > 0 && n.memory_bytes > 0 && n.disk_bytes > 0, r.text);
    assert.ok(n.memory_free_bytes <= n.memory_bytes && n.disk_free_bytes <= n.disk_bytes, r.text);
    assert.ok(n.heartbeat_age_seconds >= 0 && n.heartbeat_age_seconds < 15, r.text);
    assert.ok(!r.text.includes("address"), r.text);

    const one = await s.api("GET", `/v1/nodes/${encodeURIComponent(row.name)}`, { token: admin });
    assert.equal(one.status, 200, one.text);
    assert.deepEqual({ ...one.body, heartbeat_age_seconds: 0 }, { ...n, heartbeat_age_seconds: 0 });
  });

  it("answers 404 UMS_NODE_NOT_FOUND naming an unknown node", async () => {
    const r = await s.api("GET", "/v1/nodes/no-such-node", { token: admin });
    assert.equal(r.status, 404, r.text);
    assert.deepEqual(Object.keys(r.body).sort(), ["code", "error"]);
    assert.equal(r.body.code, ErrorCode.NodeNotFound);
    assert.match(r.body.error, /no node is named 'no-such-node'/);
  });

  it("refuses a member token (403 UMS_ADMIN_REQUIRED, an unknown name too) and no token (401)", async () => {
    for (const path of ["/v1/nodes", `/v1/nodes/${(await s.server.store.nodes.list())[0]?.name}`, "/v1/nodes/nope"]) {
      const r = await s.api("GET", path, { token: member });
      assert.equal(r.status, 403, `${path}: ${r.text}`);
      assert.deepEqual(Object.keys(r.body).sort(), ["code", "error"]);
      assert.equal(r.body.code, ErrorCode.AdminRequired);
      assert.equal((await s.api("GET", path)).status, 401);
    }
  });

  it("names the unit's node in its answers (create, get, list, update), to member tokens too", async () => {
    const name = (await s.server.store.nodes.list())[0]?.name;
    const created = await s.api("POST", "/v1/units", { token: member, json: { name: "where" } });
    assert.equal(created.status, 201, created.text);
    assert.equal(created.body.node, name);
    for (const prefix of ["/v1/units", "/v1/sprites"]) {
      assert.equal((await s.api("GET", `${prefix}/where`, { token: member })).body.node, name);
      const list = await s.api("GET", `${prefix}?prefix=wh`, { token: member });
      assert.deepEqual(
        list.body.sprites.map((u: { name: string; node: string }) => [u.name, u.node]),
        [["where", name]],
      );
    }
    const updated = await s.api("PUT", "/v1/units/where", { token: member, json: { labels: ["x"] } });
    assert.equal(updated.body.node, name, updated.text);
  });
});

describe("GET /v1/nodes with two nodes on PostgreSQL, one stopped", {
  skip: pg ? pg.skip : "no PostgreSQL dialect",
}, () => {
  let db: { databaseUrl: string | undefined; drop(): Promise<void> };
  let n1: TestServer;
  let n2: TestServer;
  let token: string;
  const secret = randomBytes(32).toString("hex");
  const nodes = async () => {
    const r = await n1.api("GET", "/v1/nodes", { token });
    assert.equal(r.status, 200, r.text);
    return r.body.nodes as { name: string; up: boolean; state: string; status: string; units: number }[];
  };

  before(async () => {
    if (!pg) return;
    db = await pg.createDatabase();
    const databaseUrl = db.databaseUrl as string;
    // n1 serves the API and is a node (`--role all` with an endpoint); n2 is a node only.
    n1 = await startTestServer(pg, {
      cluster: { role: "all", databaseUrl, secret, nodeListen: "127.0.0.1:0", nodeName: "n1" },
    });
    n2 = await startTestServer(pg, {
      cluster: { role: "node", databaseUrl, secret, nodeListen: "127.0.0.1:0", nodeName: "n2" },
    });
    token = await n1.token("nodes-pg");
  });
  after(async () => {
    const failures: unknown[] = [];
    for (const done of [() => n2?.close(), () => n1?.close(), () => db?.drop()]) {
      await Promise.resolve()
        .then(done)
        .catch((err: unknown) => failures.push(err));
    }
    if (failures.length > 0) throw new AggregateError(failures, "cleanup failed");
  });

  it("lists both nodes up with the units each holds; each unit names its node", async () => {
    for (const name of ["p1", "p2"]) await n1.unit(token, name);
    const org = await n1.server.store.orgs.getBySlug("nodes-pg");
    const names = new Map((await n1.server.store.nodes.list()).map((n) => [n.id, n.name]));
    const held = new Map<string, number>();
    for (const name of ["p1", "p2"]) {
      const row = await n1.server.store.units.get(org?.id ?? "", name);
      const node = names.get(row?.nodeId ?? "") as string;
      assert.ok(node);
      held.set(node, (held.get(node) ?? 0) + 1);
      assert.equal((await n1.api("GET", `/v1/units/${name}`, { token })).body.node, node);
    }
    assert.deepEqual(
      (await nodes()).map((n) => [n.name, n.up, n.status, n.units]),
      [
        ["n1", true, "up", held.get("n1") ?? 0],
        ["n2", true, "up", held.get("n2") ?? 0],
      ],
    );
  });

  it("shows a stopped node down once its heartbeat is old, and a cordoned one as such; up again after its restart", async () => {
    await n2.stop();
    // Its last heartbeat 20 s old: what waiting out the 15 s after the stop would show (a node that
    // still ran would write a fresh one within 5 s).
    const row = await n1.server.store.nodes.getByName("n2");
    assert.ok(row);
    await n1.server.store.nodes.heartbeat(row.id, row.free, new Date(Date.now() - 20_000).toISOString());
    await n1.server.store.nodes.setState("n2", "cordoned");
    assert.deepEqual(
      (await nodes()).map((n) => [n.name, n.up, n.state, n.status]),
      [
        ["n1", true, "active", "up"],
        ["n2", false, "cordoned", "down, cordoned"],
      ],
    );
    const one = await n1.api("GET", "/v1/nodes/n2", { token });
    assert.equal(one.body.up, false, one.text);
    assert.ok(one.body.heartbeat_age_seconds >= 20, one.text);
    await n2.restart();
    await n1.server.store.nodes.setState("n2", "active");
    assert.deepEqual(
      (await nodes()).map((n) => [n.name, n.up, n.status]),
      [
        ["n1", true, "up"],
        ["n2", true, "up"],
      ],
    );
  });
});
