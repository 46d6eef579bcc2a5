import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { existsSync, readdirSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ErrorCode } from "@ums/protocol";
import { startTestS3, type TestS3 } from "../../replication/test-fixtures.js";
import { testImage } from "../../runtime/image/test-image.js";
import { testDialects } from "../../testing/dialects.js";
import { execHttp } from "../../testing/exec-client.js";
import { freePort } from "../../testing/free-port.js";
import { openOwnPool } from "../../testing/own-pool.js";
import { UMS_BIN } from "../../testing/serve-process.js";
import { startTestServer, type TestServer } from "../../testing/server.js";
import { startTcpServer } from "../../testing/tcp-echo.js";
import { openTestTunnel } from "../../testing/tunnel-client.js";
import type { LocalNode } from "../local/local-node.js";
import { NODE_PREFIX, SPLICE_UPGRADE } from "./wire.js";

const pg = testDialects.find((d) => d.name === "postgres");
const sha = (b: Buffer | Uint8Array) => createHash("sha256").update(b).digest("hex");

/**
 * Issue #15 (docs/SCALE-OUT.md): one deployment of an API process (`--role api`, no units of its
 * own) and two nodes (`--role node`, each with its data dir, pool, unit subnet and endpoint) on one
 * PostgreSQL database. Everything goes through the API process: it reaches the units over the
 * nodes' endpoints.
 */
describe("an API process and two nodes on one database", { timeout: 600_000, skip: !pg }, () => {
  let db: { databaseUrl: string | undefined; drop(): Promise<void> };
  let n1: TestServer;
  let n2: TestServer;
  let api: TestServer;
  let token: string;
  let n1Port: number;
  let s3: TestS3;
  /** n2's pool: its own disk, as another host's (a fork onto it must get the checkpoint from the store). */
  let n2Pool: Awaited<ReturnType<typeof openOwnPool>> | undefined;
  const secret = randomBytes(32).toString("hex");
  const units = ["u0", "u1", "u2", "u3"];
  /** The node each unit was placed on, by unit name. */
  const placedOn = new Map<string, TestServer>();

  before(async () => {
    if (!pg) return;
    db = await pg.createDatabase();
    const databaseUrl = db.databaseUrl as string;
    // The deployment's object store (s3rver on loopback): checkpoints travel between nodes through it.
    s3 = await startTestS3({ bucket: "cluster", keyPrefix: "" });
    Object.assign(process.env, s3.env);
    const objectStore = s3.url;
    n1Port = await freePort();
    // n1's endpoint listens on every address (units see the host at their gateway address): the
    // attack test below shows no unit reaches it.
    n1 = await startTestServer(pg, {
      objectStore,
      cluster: {
        role: "node",
        databaseUrl,
        secret,
        nodeListen: `0.0.0.0:${n1Port}`,
        nodeName: "n1",
        nodeAddress: `127.0.0.1:${n1Port}`,
      },
    });
    n2Pool = await openOwnPool(1536 * 1024 * 1024);
    n2 = await startTestServer(pg, {
      objectStore,
      pool: n2Pool.pool,
      cluster: { role: "node", databaseUrl, secret, nodeListen: "127.0.0.1:0", nodeName: "n2" },
    });
    api = await startTestServer(pg, { cluster: { role: "api", databaseUrl, secret } });
    token = await api.token("acme");
  });
  after(async () => {
    // Each goes even when another's cleanup fails: nothing of the deployment may stay behind.
    const failures: unknown[] = [];
    const steps = [
      () => api?.close(),
      () => n2?.close(),
      () => n1?.close(),
      () => n2Pool?.close(),
      () => db?.drop(),
      () => s3?.stop(),
    ];
    for (const done of steps) {
      await Promise.resolve()
        .then(done)
        .catch((err: unknown) => failures.push(err));
    }
    if (failures.length > 0) throw new AggregateError(failures, "the deployment's cleanup failed");
  });

  it("places new units on both nodes and runs them there, through the API process", async () => {
    for (const name of units) await api.unit(token, name);
    const nodes = await api.server.store.nodes.list();
    assert.deepEqual(nodes.map((n) => n.name).sort(), ["n1", "n2"]);
    const byId = new Map([
      [nodes.find((n) => n.name === "n1")?.id, n1],
      [nodes.find((n) => n.name === "n2")?.id, n2],
    ]);
    const org = await api.server.store.orgs.getBySlug("acme");
    for (const name of units) {
      const row = await api.server.store.units.get(org?.id ?? "", name);
      const node = byId.get(row?.nodeId ?? undefined);
      assert.ok(node, `unit ${name} is on a node of the deployment`);
      placedOn.set(name, node);
    }
    // Placement spreads an organization's units (placement.ts): both nodes hold two.
    assert.equal([...placedOn.values()].filter((n) => n === n1).length, 2);
    for (const name of units) {
      const r = await execHttp(api.url, token, name, ["sh", "-c", "echo $((6*7)) > /tmp/answer; cat /tmp/answer"]);
      assert.equal(r.status, 200, r.body.toString());
      assert.equal(r.exitCode, 0);
      assert.equal(r.stdout.toString(), "42\n");
      // It runs on its node, and only there.
      const id = (await api.server.store.units.get(org?.id ?? "", name))?.id ?? "";
      const mine = placedOn.get(name) as TestServer;
      const other = mine === n1 ? n2 : n1;
      assert.equal(mine.server.lifecycle.statusOf(id), "running");
      assert.equal(other.server.lifecycle.statusOf(id), "cold");
    }
  });

  it("streams files both ways, proxies the unit's HTTP target and carries a tunnel", async () => {
    const name = units[1] as string;
    const bytes = randomBytes(3 << 20);
    const w = await api.api("PUT", `/v1/units/${name}/fs/write?path=/tmp/blob&workingDir=/`, { token, body: bytes });
    assert.equal(w.status, 200, w.text);
    const res = await fetch(`${api.url}/v1/units/${name}/fs/read?path=/tmp/blob&workingDir=/`, {
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(res.status, 200);
    assert.equal(sha(new Uint8Array(await res.arrayBuffer())), sha(bytes));
    const missing = await api.api("GET", `/v1/units/${name}/fs/read?path=/tmp/nope&workingDir=/`, { token });
    assert.equal(missing.status, 404);
    assert.equal(missing.body.code, "ENOENT");

    // The unit's HTTP target (port 8080) through the API's path proxy.
    const started = await execHttp(api.url, token, name, [
      "sh",
      "-c",
      "mkdir -p /tmp/www && echo hello from the node > /tmp/www/hi.txt && (setsid nohup python3 -m http.server 8080 --directory /tmp/www </dev/null >/dev/null 2>&1 &)",
    ]);
    assert.equal(started.exitCode, 0);
    let page = "";
    for (let i = 0; i < 100 && page !== "hello from the node\n"; i++) {
      const r = await api.api("GET", `/v1/units/${name}/hi.txt`, { token });
      page = r.status === 200 ? r.text : "";
      if (!page) await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(page, "hello from the node\n");

    // A TCP tunnel to an echo server in the unit, half-close included.
    await startTcpServer(api.url, token, name, "echo", 7000);
    const t = await openTestTunnel(`${api.url.replace("http", "ws")}/v1/units/${name}/proxy`, token, {
      host: "localhost",
      port: 7000,
    });
    assert.equal((await t.answer).status, "connected");
    t.ws.send(Buffer.from("across nodes"), { binary: true });
    await t.waitFor((b) => b.toString() === "across nodes");
    t.ws.send(Buffer.alloc(0), { binary: true });
    await t.waitFor((b) => b.toString().endsWith("eof after 12 bytes\n"));
    assert.equal((await t.closed).code, 1000);
  });

  it("checkpoints and restores a unit on its node, with progress", async () => {
    const name = units[2] as string;
    const cp = await api.api("POST", `/v1/units/${name}/checkpoint`, { token, json: { comment: "before" } });
    assert.equal(cp.status, 200, cp.text);
    // The node's progress came through: the route's own events name the checkpoint it made.
    const id = /checkpoint (v\d+) created/.exec(cp.text)?.[1];
    assert.ok(id, cp.text);
    await execHttp(api.url, token, name, ["sh", "-c", "echo changed > /tmp/answer"]);
    const restored = await api.api("POST", `/v1/units/${name}/checkpoints/${id}/restore`, { token });
    assert.equal(restored.status, 200, restored.text);
    const r = await execHttp(api.url, token, name, ["cat", "/tmp/answer"]);
    assert.equal(r.stdout.toString(), "42\n");
  });

  it("forks a checkpoint onto the other node, which receives it from the object store", async () => {
    const org = await api.server.store.orgs.getBySlug("acme");
    const src = units[3] as string;
    const made = await execHttp(api.url, token, src, [
      "sh",
      "-c",
      "head -c 1000000 /dev/urandom > /home/unit/data; sha256sum /home/unit/data",
    ]);
    assert.equal(made.exitCode, 0);
    const cp = await api.api("POST", `/v1/units/${src}/checkpoint`, { token, json: {} });
    const id = /checkpoint (v\d+) created/.exec(cp.text)?.[1];
    assert.ok(id, cp.text);
    for (let i = 0; ; i++) {
      const list = await api.api("GET", `/v1/units/${src}/checkpoints`, { token });
      const state = (list.body as { id: string; replication?: { state: string } }[]).find((c) => c.id === id)
        ?.replication?.state;
      if (state === "replicated") break;
      assert.ok(i < 300 && state !== "failed", `checkpoint ${id} copy: ${state}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    // The source's node takes no new units: the fork goes to the other one.
    const home = placedOn.get(src) as TestServer;
    const homeName = home === n1 ? "n1" : "n2";
    await api.server.store.nodes.setState(homeName, "cordoned");
    try {
      const forked = await api.api("POST", "/v1/units", {
        token,
        json: { name: "forked", from: { unit: src, checkpoint: id } },
      });
      assert.equal(forked.status, 201, forked.text);
      const row = await api.server.store.units.get(org?.id ?? "", "forked");
      const srcRow = await api.server.store.units.get(org?.id ?? "", src);
      assert.notEqual(row?.nodeId, srcRow?.nodeId, "the fork is on the other node");
      // What that node received of the source (another node's unit) went once the fork had its copy.
      const targetPool = home === n1 ? n2Pool?.pool.path : (await testImage()).pool.path;
      assert.equal(existsSync(join(targetPool as string, "units", srcRow?.id ?? "")), false);
      const sum = await execHttp(api.url, token, "forked", ["sha256sum", "/home/unit/data"]);
      assert.equal(sum.stdout.toString(), made.stdout.toString());
      assert.equal((await api.api("DELETE", "/v1/units/forked", { token })).status, 204);
    } finally {
      await api.server.store.nodes.setState(homeName, "active");
    }
  });

  it("moves a unit with a running service to the other node (admin), files and service with it", async () => {
    const org = await api.server.store.orgs.getBySlug("acme");
    await api.unit(token, "mover");
    const made = await execHttp(api.url, token, "mover", [
      "sh",
      "-c",
      "mkdir -p /home/unit/www && echo moved with me > /home/unit/www/index.html && head -c 3000000 /dev/urandom > /home/unit/blob && sha256sum /home/unit/blob",
    ]);
    assert.equal(made.exitCode, 0);
    const svc = await api.api("PUT", "/v1/units/mover/services/web?duration=0", {
      token,
      json: { cmd: "python3", args: ["-m", "http.server", "8080", "--directory", "/home/unit/www"], http_port: 8080 },
    });
    assert.equal(svc.status, 200, svc.text);
    const before = await api.server.store.units.get(org?.id ?? "", "mover");
    const from = before?.nodeId === (await api.server.store.nodes.getByName("n1"))?.id ? "n1" : "n2";
    const to = from === "n1" ? "n2" : "n1";
    const member = await api.token("acme", { role: "member" });
    const refused = await api.api("POST", "/v1/units/mover/move", { token: member, json: { node: to } });
    assert.equal(refused.status, 403, refused.text);
    const same = await api.api("POST", "/v1/units/mover/move", { token, json: { node: from } });
    assert.equal(same.status, 400, same.text);
    // Held by a request, it does not move (the request would be cut).
    const busy = execHttp(api.url, token, "mover", ["sleep", "3"]);
    await new Promise((r) => setTimeout(r, 500));
    const held = await api.api("POST", "/v1/units/mover/move", { token, json: { node: to } });
    assert.match(held.text, /UMS_UNIT_BUSY/);
    await busy;
    const moved = await api.api("POST", "/v1/units/mover/move", { token, json: { node: to } });
    assert.equal(moved.status, 200, moved.text);
    assert.match(moved.text, new RegExp(`unit mover moved to node ${to}`), moved.text);
    // Straight from its node, whole: the new node had nothing of it.
    assert.match(moved.text, /from its node \(whole/, moved.text);
    const after = await api.server.store.units.get(org?.id ?? "", "mover");
    assert.equal(after?.nodeId, (await api.server.store.nodes.getByName(to))?.id);
    assert.equal(after?.status, "cold");
    const pools = { n1: (await testImage()).pool.path, n2: n2Pool?.pool.path as string };
    const unitDir = (node: "n1" | "n2") => join(pools[node], "units", after?.id ?? "");
    // Its old node keeps only the move's snapshot (the parent of a move back), not its files (they
    // go right after the answer).
    const kept = after?.activeCheckpoint as string;
    for (let i = 0; i < 100 && existsSync(join(unitDir(from), "rootfs")); i++)
      await new Promise((r) => setTimeout(r, 100));
    assert.equal(existsSync(join(unitDir(from), "rootfs")), false, "the old node's disk is gone");
    assert.deepEqual(readdirSync(join(unitDir(from), "checkpoints")), [kept]);
    const sum = await execHttp(api.url, token, "mover", ["sha256sum", "/home/unit/blob"]);
    assert.equal(sum.status, 200, sum.body.toString());
    assert.equal(sum.stdout.toString(), made.stdout.toString(), sum.stderr.toString());
    let page = "";
    for (let i = 0; i < 100 && page !== "moved with me\n"; i++) {
      const r = await api.api("GET", "/v1/units/mover/index.html", { token });
      page = r.status === 200 ? r.text : "";
      if (!page) await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(page, "moved with me\n", "the service runs on the new node");
    // Back: only what changed since the snapshot the old node kept goes.
    const changed = await execHttp(api.url, token, "mover", ["sh", "-c", "echo back > /home/unit/back"]);
    assert.equal(changed.exitCode, 0);
    const back = await api.api("POST", "/v1/units/mover/move", { token, json: { node: from } });
    assert.equal(back.status, 200, back.text);
    assert.match(back.text, new RegExp(`only what changed since ${kept}\\)`), back.text);
    const again = await execHttp(api.url, token, "mover", [
      "sh",
      "-c",
      "sha256sum /home/unit/blob; cat /home/unit/back",
    ]);
    assert.equal(again.stdout.toString(), `${made.stdout.toString()}back\n`, again.stderr.toString());
    // Every checkpoint is in the store or on a node; the old nodes copy theirs (each its own).
    let states: string[] = [];
    for (let i = 0; i < 600; i++) {
      const list = await api.api("GET", "/v1/units/mover/checkpoints", { token });
      states = (list.body as { replication?: { state: string } }[]).map((c) => c.replication?.state ?? "none");
      if (states.every((st) => st === "replicated")) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.ok(
      states.every((st) => st === "replicated"),
      `every checkpoint is copied to the store: ${states}`,
    );
    assert.equal((await api.api("DELETE", "/v1/units/mover", { token })).status, 204);
    // What the nodes kept of it goes at their next sweep.
    for (const n of [n1, n2]) await (n.server.node as LocalNode).sweepRetired();
    for (const node of ["n1", "n2"] as const) assert.equal(existsSync(unitDir(node)), false, `nothing on ${node}`);
  });

  it("holds an organization's running limit across nodes", async () => {
    const limited = await api.token("limited", { limits: { runningLimit: 2 } });
    for (const name of ["busy-a", "busy-b", "third"]) await api.unit(limited, name);
    // Two busy units (an exec holds each awake), one on each node: the organization's two.
    const busy = ["busy-a", "busy-b"].map((name) => execHttp(api.url, limited, name, ["sleep", "6"]));
    const org = await api.server.store.orgs.getBySlug("limited");
    const rows = await Promise.all(["busy-a", "busy-b"].map((n) => api.server.store.units.get(org?.id ?? "", n)));
    assert.notEqual(rows[0]?.nodeId, rows[1]?.nodeId, "placement spread the busy units over both nodes");
    for (let i = 0; i < 100; i++) {
      const now = await Promise.all(["busy-a", "busy-b"].map((n) => api.server.store.units.get(org?.id ?? "", n)));
      if (now.every((u) => u?.status === "running")) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    // Its node runs one of them only: the other node's counts too.
    const r = await api.api("POST", "/v1/units/third/exec?cmd=true", { token: limited });
    assert.equal(r.status, 409, r.text);
    assert.equal(r.body.code, ErrorCode.RunningLimit);
    assert.match(r.body.error, /running_limit 2, 1 of them on other nodes/);
    for (const b of await Promise.all(busy)) assert.equal(b.exitCode, 0);
    for (const name of ["busy-a", "busy-b", "third"]) {
      assert.equal((await api.api("DELETE", `/v1/units/${name}`, { token: limited })).status, 204);
    }
  });

  it("refuses the node endpoint without the node secret, and no unit reaches it", async () => {
    const base = `http://127.0.0.1:${n1Port}${NODE_PREFIX}`;
    const none = await fetch(`${base}/call/resourceLimits`, { method: "POST", body: '{"args":[]}' });
    assert.equal(none.status, 401);
    const wrong = await fetch(`${base}/call/resourceLimits`, {
      method: "POST",
      body: '{"args":[]}',
      headers: { authorization: `Bearer ${"x".repeat(64)}` },
    });
    assert.equal(wrong.status, 401);
    const spliced = await fetch(`${base}/leases/whatever/agent`, {
      headers: { connection: "Upgrade", upgrade: SPLICE_UPGRADE },
    }).catch((err: unknown) => err);
    assert.ok(!(spliced instanceof Response) || spliced.status === 401, "a splice without the secret is refused");
    // Nor a checkpoint's send stream, a session, or a wake in one.
    const send = await fetch(`${base}/send`, { method: "POST", body: JSON.stringify({ args: ["unit-x", "v0", []] }) });
    assert.equal(send.status, 401);
    for (const [path, upgrade] of [
      ["session", "ums-node-session"],
      ["wake?agent=1", SPLICE_UPGRADE],
      ["leases/whatever/agent", SPLICE_UPGRADE],
    ] as const) {
      const status = await new Promise<number | "upgraded">((resolve, reject) => {
        const req = request(`${base}/${path}`, { headers: { connection: "Upgrade", upgrade } });
        req.once("upgrade", (_res, socket) => {
          socket.destroy();
          resolve("upgraded");
        });
        req.once("response", (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        });
        req.once("error", reject);
        req.end();
      });
      assert.equal(status, 401, `${path} without the secret is refused`);
    }
    const right = await fetch(`${base}/call/resourceLimits`, {
      method: "POST",
      body: '{"args":[]}',
      headers: { authorization: `Bearer ${secret}` },
    });
    assert.equal(right.status, 200);
    // Root in a unit of n1 tries the endpoint's port on every host address it can name.
    const name = [...placedOn].find(([, n]) => n === n1)?.[0] as string;
    const probe = await execHttp(api.url, token, name, [
      "python3",
      "-c",
      `import socket,subprocess
gw=subprocess.run(["ip","route","show","default"],capture_output=True,text=True).stdout.split()[2:3]
ok=[]
for h in gw+["127.0.0.1"]:
    s=socket.socket(); s.settimeout(2)
    try:
        s.connect((h,${n1Port})); ok.append(h)
    except Exception: pass
print("reached" if ok else "refused", ok)`,
    ]);
    assert.equal(probe.exitCode, 0, probe.stderr.toString());
    assert.match(probe.stdout.toString(), /^refused/);
  });

  it("a stopped node's units are unavailable, with a reason, while the other node's answer; back after its restart", async () => {
    const onN2 = [...placedOn].find(([, n]) => n === n2)?.[0] as string;
    const onN1 = [...placedOn].find(([, n]) => n === n1)?.[0] as string;
    await n2.stop();
    const r = await api.api("POST", `/v1/units/${onN2}/exec?cmd=true`, { token });
    assert.equal(r.status, 502, r.text);
    assert.equal(r.body.code, ErrorCode.UnitUnavailable);
    assert.match(r.body.error, /node 'n2'/);
    const health = await api.api("GET", `/v1/units/${onN2}/check`, { token });
    assert.equal(health.status, 200, health.text);
    assert.equal(health.body.status, "unhealthy");
    assert.match(health.body.reason, /node 'n2'/);
    const fine = await execHttp(api.url, token, onN1, ["cat", "/tmp/answer"]);
    assert.equal(fine.stdout.toString(), "42\n");
    // Its checkpoints are still listed (their rows are the database's).
    const cps = await api.api("GET", `/v1/units/${onN2}/checkpoints`, { token });
    assert.equal(cps.status, 200, cps.text);
    // Its heartbeat is still fresh: a create placed on it fails whole (no row), and the API process
    // places the next ones elsewhere.
    const org = await api.server.store.orgs.getBySlug("acme");
    const n1Id = (await api.server.store.nodes.getByName("n1"))?.id;
    for (let i = 0; i < 4; i++) {
      const c = await api.api("POST", "/v1/units", { token, json: { name: `while-down-${i}` } });
      const row = await api.server.store.units.get(org?.id ?? "", `while-down-${i}`);
      if (c.status === 201) assert.equal(row?.nodeId, n1Id, c.text);
      else {
        assert.equal(c.status, 503, c.text);
        assert.equal(c.body.code, ErrorCode.NoNode);
        assert.equal(row, undefined, "a refused create leaves no unit");
      }
      if (i > 0) assert.equal(c.status, 201, "after one failure the stopped node gets no new unit");
    }
    for (let i = 0; i < 4; i++) await api.api("DELETE", `/v1/units/while-down-${i}`, { token });
    // Restarted (on another port: its new address is read within ROW_TTL_MS), it re-adopts its
    // running units: their processes and files are as they were.
    await n2.restart();
    let back: Awaited<ReturnType<typeof execHttp>> | undefined;
    for (let i = 0; i < 50; i++) {
      back = await execHttp(api.url, token, onN2, ["cat", "/tmp/answer"]);
      if (back.status === 200) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.equal(back?.status, 200, back?.body.toString());
    assert.equal(back?.stdout.toString(), "42\n");
    const healthy = await api.api("GET", `/v1/units/${onN2}/check`, { token });
    assert.equal(healthy.body.status, "healthy", healthy.text);
  });

  it("builds a recipe with steps on a node through the API process (the steps run in a unit there)", async () => {
    const recipe = {
      name: "stepped",
      files: [{ path: "/etc/ums-recipe", content: "file\n" }],
      steps: ["echo made by a step > /opt/step.txt", "echo step output"],
    };
    const r = await api.api("POST", "/v1/images/build", { token, json: recipe });
    assert.equal(r.status, 200, r.text);
    const lines = r.text
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as { type: string; data?: string; image?: { id: string } });
    assert.equal(lines.at(-1)?.type, "complete", r.text);
    assert.ok(
      lines.some((l) => l.data === "  step output"),
      "the step's output came back as progress",
    );
    const made = await api.api("POST", "/v1/units", { token, json: { name: "from-stepped", image: "stepped" } });
    assert.equal(made.status, 201, made.text);
    const cat = await execHttp(api.url, token, "from-stepped", ["cat", "/etc/ums-recipe", "/opt/step.txt"]);
    assert.equal(cat.stdout.toString(), "file\nmade by a step\n", cat.stderr.toString());
    // A step that fails is the build's 400, as on one host, and leaves no build unit.
    const bad = await api.api("POST", "/v1/images/build", {
      token,
      json: { name: "stepped-bad", steps: ["echo about to fail; exit 3"] },
    });
    const last = JSON.parse(bad.text.trim().split("\n").at(-1) ?? "{}") as {
      type?: string;
      code?: string;
      errors?: unknown;
    };
    assert.equal(last.type, "error", bad.text);
    assert.equal(last.code, ErrorCode.ImageInvalid, bad.text);
    assert.match(String(last.errors), /step 1 of the recipe failed with exit code 3/);
    const names = ((await api.api("GET", "/v1/units", { token })).body.sprites as { name: string }[]).map(
      (u) => u.name,
    );
    assert.deepEqual(
      names.filter((n) => n.startsWith("image-build-")),
      [],
      `no build unit is left: ${r.text}\n${bad.text}`,
    );
    assert.equal((await api.api("DELETE", "/v1/units/from-stepped", { token })).status, 204);
    assert.equal((await api.api("DELETE", "/v1/images/stepped", { token })).status, 204);
  });

  it("deletes units on their nodes", async () => {
    const onN1 = [...placedOn].filter(([, n]) => n === n1).map(([name]) => name);
    for (const name of onN1) {
      const d = await api.api("DELETE", `/v1/units/${name}`, { token });
      assert.equal(d.status, 204, d.text);
      assert.equal((await api.api("GET", `/v1/units/${name}`, { token })).status, 404);
    }
    assert.deepEqual(
      n1.server.lifecycle.tracked().map((t) => t.unitId),
      [],
      "n1 keeps nothing of its deleted units",
    );
  });

  it("ums node drain moves every unit off a node and leaves it cordoned", async () => {
    const org = await api.server.store.orgs.getBySlug("acme");
    for (const name of ["d1", "d2", "d3"]) await api.unit(token, name);
    await execHttp(api.url, token, "d1", ["sh", "-c", "echo drained > /home/unit/mark"]);
    const d1 = await api.server.store.units.get(org?.id ?? "", "d1");
    const source = (await api.server.store.nodes.list()).find((n) => n.id === d1?.nodeId);
    assert.ok(source);
    const onSource = async () =>
      (await api.server.store.units.withStatus(["cold", "warm", "running"], source.id)).filter(
        (u) => u.nodeId === source.id,
      );
    const before = (await onSource()).map((u) => u.name);
    assert.ok(before.includes("d1"));
    const out = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      execFile(
        UMS_BIN,
        ["node", "drain", source.name, "--json"],
        { env: { ...process.env, UMS_DATABASE_URL: db.databaseUrl, UMS_NODE_SECRET: secret }, timeout: 180_000 },
        (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
    });
    assert.equal(out.code, 0, out.stderr + out.stdout);
    const lines = out.stdout
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    assert.deepEqual(lines.map((l) => l.unit).sort(), [...before].sort());
    assert.ok(
      lines.every((l) => l.moved === true),
      out.stdout,
    );
    assert.deepEqual(await onSource(), [], "nothing is left on the drained node");
    assert.equal((await api.server.store.nodes.get(source.id))?.state, "cordoned");
    const mark = await execHttp(api.url, token, "d1", ["cat", "/home/unit/mark"]);
    assert.equal(mark.stdout.toString(), "drained\n");
    await api.server.store.nodes.setState(source.name, "active");
    for (const name of ["d1", "d2", "d3"])
      assert.equal((await api.api("DELETE", `/v1/units/${name}`, { token })).status, 204);
  });
});
