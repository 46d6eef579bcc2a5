import assert from "node:assert/strict";
import type { ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import { access, mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ErrorCode } from "@ums/protocol";
import pg from "pg";
import { run } from "../../runtime/exec/host-command.js";
import { testImage } from "../../runtime/image/test-image.js";
import { Runc } from "../../runtime/runc/runc.js";
import { testDialects } from "../../testing/dialects.js";
import { type ExecResult, execHttp } from "../../testing/exec-client.js";
import { freePort } from "../../testing/free-port.js";
import { cleanupStoppedServer, removeServerHostResources, testServeEnv } from "../../testing/host-cleanup.js";
import { lockSubnet } from "../../testing/runtime.js";
import { isRunning, spawnServe, UMS_BIN } from "../../testing/serve-process.js";
import { NODE_PREFIX } from "./wire.js";

const pgDialect = testDialects.find((d) => d.name === "postgres");
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** `p`, or a failure naming `what` after `ms`: no wait of this suite is unbounded. */
async function bounded<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: no end in ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** Sends `signal` and waits up to 20 s for the exit, then SIGKILLs (and waits for that). */
async function stopProcess(child: ChildProcess | undefined, signal: NodeJS.Signals): Promise<void> {
  if (!isRunning(child)) return;
  const exited = new Promise((r) => child.once("exit", r));
  child.kill(signal);
  const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
  await exited;
  clearTimeout(timer);
}

/** One `ums serve` process of the deployment: its role, data dir, environment and log. */
interface Proc {
  readonly name: string;
  readonly role: "api" | "node";
  readonly dataDir: string;
  readonly env: NodeJS.ProcessEnv;
  /** The API's base URL (an `api`), or the node endpoint's `host:port` (a `node`). */
  readonly address: string;
  child: ChildProcess | undefined;
  log: string;
  unlock?: () => Promise<void>;
}

/**
 * Issue #15's multi-node suite, with real processes (docs/SCALE-OUT.md): two `ums serve --role api`
 * and two `--role node` (each with its data dir, unit subnet and endpoint) on one PostgreSQL
 * database, started through bin/ums. A node killed with SIGKILL and started again; two API
 * processes creating the same name at once; an API process killed mid-request and started again.
 * After each: every unit row names exactly one node that exists, and runs on no other node.
 */
describe("a deployment of ums serve processes: two API processes, two nodes", {
  timeout: 600_000,
  skip: pgDialect?.skip ?? !pgDialect,
}, () => {
  let db: { databaseUrl: string | undefined; drop(): Promise<void> } | undefined;
  let databaseUrl: string;
  const secret = randomBytes(32).toString("hex");
  // Every API process opens the secrets the others sealed (docs/SCALE-OUT.md): one master key.
  const masterKey = randomBytes(32).toString("base64");
  const procs: Proc[] = [];
  let api1: Proc;
  let api2: Proc;
  let n1: Proc;
  let n2: Proc;
  let token: string;
  /** Every unit id this suite saw, for the check that nothing of them is left on the host. */
  const seen = new Set<string>();
  /** Runtime ids of the nodes (their nft table, cgroups, network namespaces are named after them). */
  const rids = new Set<string>();

  async function sql<T extends pg.QueryResultRow>(text: string, values: unknown[] = []): Promise<T[]> {
    const c = new pg.Client({ connectionString: databaseUrl });
    await c.connect();
    try {
      return (await c.query<T>(text, values)).rows;
    } finally {
      await c.end();
    }
  }

  async function prepare(name: string, role: "api" | "node"): Promise<Proc> {
    const dataDir = await mkdtemp(join(tmpdir(), `ums-test-proc-${name}-`));
    const proc: Proc = { name, role, dataDir, env: {}, address: "", child: undefined, log: "" };
    procs.push(proc);
    const port = await freePort();
    let env: NodeJS.ProcessEnv = {
      PATH: process.env.PATH,
      UMS_DATA_DIR: dataDir,
      UMS_DATABASE_URL: databaseUrl,
      UMS_ROLE: role,
      UMS_NODE_SECRET: secret,
      UMS_LISTEN: `127.0.0.1:${port}`,
      UMS_LOG_LEVEL: "warn",
      UMS_GATEWAY_PORT: "0",
      // The events test's webhook receiver is on loopback.
      UMS_WEBHOOKS_ALLOW_PRIVATE: "1",
      UMS_MASTER_KEY: masterKey,
    };
    let address = `http://127.0.0.1:${port}`;
    if (role === "node") {
      const subnet = await lockSubnet();
      proc.unlock = subnet.unlock;
      // The endpoint keeps its port across restarts: API processes find it where its row says.
      const endpoint = `127.0.0.1:${await freePort()}`;
      env = {
        ...env,
        ...(await testServeEnv(subnet.n)),
        UMS_NODE_LISTEN: endpoint,
        UMS_NODE_NAME: name,
        // Units reach the connector gateway here (the admin connector's test).
        UMS_GATEWAY_PORT: String(await freePort()),
      };
      address = endpoint;
    }
    Object.assign(proc, { env, address });
    return proc;
  }

  /** Starts (or starts again) `proc` and waits until it answers: its API, or its node endpoint. */
  async function start(proc: Proc): Promise<void> {
    const ready =
      proc.role === "api"
        ? undefined
        : async () => {
            const r = await fetch(`http://${proc.address}${NODE_PREFIX}/call/resourceLimits`, {
              method: "POST",
              headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" },
              body: '{"args":[]}',
              signal: AbortSignal.timeout(5_000),
            });
            await r.arrayBuffer();
            return r.ok;
          };
    const child = await spawnServe(proc.role === "api" ? proc.address : "", proc.env, ready);
    proc.child = child;
    // Read on (a full pipe would stall the server), the last 1 MiB kept for failures.
    child.stderr?.on("data", (d) => {
      proc.log = (proc.log + d).slice(-(1 << 20));
    });
    if (proc.role === "node") {
      const rid = (await readFile(join(proc.dataDir, "runtime-id"), "utf8").catch(() => "")).trim();
      if (rid) rids.add(rid);
    }
  }

  function api(p: Proc, method: string, path: string, body?: unknown) {
    return fetch(`${p.address}${path}`, {
      method,
      headers: { authorization: `Bearer ${token}`, ...(body !== undefined && { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(60_000),
    });
  }

  async function apiJson(p: Proc, method: string, path: string, body?: unknown) {
    const r = await api(p, method, path, body);
    const text = await r.text();
    let json: Record<string, unknown> = {};
    try {
      json = JSON.parse(text);
    } catch {}
    return { status: r.status, body: json, text };
  }

  const exec = (p: Proc, unit: string, cmd: string[]): Promise<ExecResult> =>
    bounded(execHttp(p.address, token, unit, cmd), 60_000, `exec in ${unit} through ${p.name}`);

  /** The node (n1 or n2) each unit's row names, by unit name. */
  async function placement(): Promise<Map<string, Proc>> {
    const rows = await sql<{ name: string; node: string | null }>(
      "select u.name, n.name as node from units u left join nodes n on n.id = u.node_id",
    );
    const m = new Map<string, Proc>();
    for (const r of rows) {
      const p = procs.find((x) => x.role === "node" && x.name === r.node);
      if (p) m.set(r.name, p);
    }
    return m;
  }

  /**
   * Every unit row names exactly one node, one that exists; no unit has a container on two nodes,
   * and a container on a node is of a unit whose row names that node.
   */
  async function invariants(): Promise<void> {
    const rows = await sql<{ id: string; name: string; node_id: string | null; node: string | null }>(
      "select u.id, u.name, u.node_id, n.name as node from units u left join nodes n on n.id = u.node_id",
    );
    for (const r of rows) {
      seen.add(r.id);
      assert.ok(r.node_id, `unit ${r.name} names a node`);
      assert.ok(r.node === "n1" || r.node === "n2", `unit ${r.name} names node ${r.node_id}, which exists`);
    }
    assert.equal(new Set(rows.map((r) => r.name)).size, rows.length, "one row per unit name");
    const nodes = await sql<{ name: string }>("select name from nodes order by name");
    assert.deepEqual(
      nodes.map((n) => n.name),
      ["n1", "n2"],
      "the nodes are n1 and n2 (API processes register none)",
    );
    const byId = new Map(rows.map((r) => [r.id, r]));
    const where = new Map<string, string>();
    for (const node of [n1, n2]) {
      for (const c of await new Runc(join(node.dataDir, "runc")).list()) {
        if (!c.id.startsWith("unit-")) continue;
        seen.add(c.id);
        assert.equal(where.get(c.id), undefined, `unit ${c.id} has a container on ${where.get(c.id)} and ${node.name}`);
        where.set(c.id, node.name);
        const row = byId.get(c.id);
        assert.ok(row, `the container ${c.id} on ${node.name} is of a unit that exists`);
        assert.equal(row.node, node.name, `unit ${row.name} runs on the node its row names`);
      }
    }
  }

  before(async () => {
    if (!pgDialect || pgDialect.skip) return;
    db = await pgDialect.createDatabase();
    databaseUrl = db.databaseUrl as string;
    n1 = await prepare("n1", "node");
    n2 = await prepare("n2", "node");
    api1 = await prepare("api1", "api");
    api2 = await prepare("api2", "api");
    // No API process listens on a node's host: its units' admin connector goes to api1 (--api-url).
    for (const n of [n1, n2]) n.env.UMS_API_URL = api1.address;
    token = (
      await run(UMS_BIN, ["token", "create", "--org", "acme"], { env: api1.env as Record<string, string> })
    ).stdout.trim();
    await start(n1);
    await start(n2);
    await start(api1);
    await start(api2);
    // Both nodes' rows are written (with their endpoints) before any unit is placed.
    for (let i = 0; ; i++) {
      const rows = await sql<{ n: number }>("select count(*)::int as n from nodes where address <> ''");
      if (rows[0]?.n === 2) break;
      assert.ok(i < 100, "both nodes registered within 10 s");
      await sleep(100);
    }
  });

  after(async () => {
    const failures: unknown[] = [];
    const step = async (what: string, fn: () => Promise<unknown>) => {
      try {
        await fn();
      } catch (err) {
        failures.push(new Error(`${what}: ${(err as Error)?.message ?? err}`, { cause: err }));
      }
    };
    // The units go through an API process while both nodes run (their containers, networks and
    // disks with them); what a failed test left is taken by each node's cleanup below.
    const front = [api1, api2].find((p) => isRunning(p?.child));
    if (front && databaseUrl && isRunning(n1?.child) && isRunning(n2?.child)) {
      await step("deleting the units", async () => {
        for (const { name, id } of await sql<{ name: string; id: string }>("select name, id from units")) {
          seen.add(id);
          const r = await api(front, "DELETE", `/v1/units/${name}`);
          await r.arrayBuffer();
        }
      });
    }
    for (const p of [...procs].sort((a, b) => (a.role === b.role ? 0 : a.role === "api" ? -1 : 1))) {
      await step(`stopping ${p.name}`, () => stopProcess(p.child, "SIGTERM"));
    }
    for (const p of procs) {
      await step(`cleaning up after ${p.name}`, () =>
        p.role === "node" ? cleanupStoppedServer(p.dataDir, databaseUrl) : removeServerHostResources(p.dataDir),
      );
    }
    // Nothing of the deployment is left on the host.
    await step("checking the host", async () => {
      const pool = (await testImage()).pool.path;
      for (const id of seen) {
        const left = await access(join(pool, "units", id)).then(
          () => true,
          () => false,
        );
        assert.equal(left, false, `unit ${id}'s disk is left in the pool`);
      }
      const netns = (await run("ip", ["netns", "list"])).stdout;
      const tables = (await run("nft", ["list", "tables"])).stdout;
      const cgroups = await readdir("/sys/fs/cgroup/pids").catch(() => [] as string[]);
      for (const rid of rids) {
        assert.doesNotMatch(netns, new RegExp(`^ums${rid}-`, "m"), `network namespaces of runtime ${rid}`);
        assert.doesNotMatch(tables, new RegExp(`\\bums_${rid}\\b`), `the nft table of runtime ${rid}`);
        assert.ok(!cgroups.includes(`ums-${rid}`), `the cgroups of runtime ${rid}`);
      }
    });
    for (const p of procs) {
      await step(`removing ${p.name}'s data dir`, async () => {
        await p.unlock?.();
        await rm(p.dataDir, { recursive: true, force: true });
      });
    }
    if (db) await step("dropping the database", () => (db as { drop(): Promise<void> }).drop());
    if (failures.length > 0) throw new AggregateError(failures, "the deployment's cleanup failed");
  });

  it("places units on both nodes and reaches them through either API process", async () => {
    for (const name of ["u0", "u1", "u2", "u3"]) {
      const r = await apiJson(api1, "POST", "/v1/units", { name });
      assert.equal(r.status, 201, r.text);
    }
    const on = await placement();
    const counts = [n1, n2].map((n) => [...on.values()].filter((p) => p === n).length);
    // Placement spreads an organization's units (placement.ts): both nodes hold two.
    assert.deepEqual(counts, [2, 2], "two units on each node");
    for (const [name, node] of on) {
      const r = await exec(name.endsWith("1") ? api2 : api1, name, [
        "sh",
        "-c",
        `echo ${name} on ${node.name} > /home/unit/mark; cat /home/unit/mark`,
      ]);
      assert.equal(r.status, 200, r.body.toString());
      assert.equal(r.stdout.toString(), `${name} on ${node.name}\n`);
    }
    await invariants();
  });

  it("a node killed with SIGKILL: its units answer 502 and are unhealthy naming it, the other node's answer; after its restart they answer with their files", async () => {
    const on = await placement();
    const onN2 = [...on].filter(([, p]) => p === n2).map(([name]) => name);
    const onN1 = [...on].filter(([, p]) => p === n1).map(([name]) => name);
    await stopProcess(n2.child, "SIGKILL");
    for (const name of onN2) {
      const r = await apiJson(api1, "POST", `/v1/units/${name}/exec?cmd=true`);
      assert.equal(r.status, 502, r.text);
      assert.equal(r.body.code, ErrorCode.UnitUnavailable);
      assert.match(String(r.body.error), /node 'n2'/);
      const read = await apiJson(api2, "GET", `/v1/units/${name}/fs/read?path=/home/unit/mark&workingDir=/`);
      assert.equal(read.status, 502, read.text);
      assert.equal(read.body.code, ErrorCode.UnitUnavailable);
      const health = await apiJson(api2, "GET", `/v1/units/${name}/check`);
      assert.equal(health.status, 200, health.text);
      assert.equal(health.body.status, "unhealthy");
      assert.match(String(health.body.reason), /node 'n2'/);
    }
    for (const name of onN1) {
      const r = await exec(api1, name, ["cat", "/home/unit/mark"]);
      assert.equal(r.status, 200, r.body.toString());
      assert.equal(r.stdout.toString(), `${name} on n1\n`);
    }
    // Once its heartbeat is old (15 s), it is down: the reason says so, without a connection tried.
    const unit = onN2[0] as string;
    let health: Awaited<ReturnType<typeof apiJson>> | undefined;
    for (let i = 0; i < 60; i++) {
      health = await apiJson(api1, "GET", `/v1/units/${unit}/check`);
      if (/node 'n2' is down/.test(String(health.body.reason))) break;
      await sleep(500);
    }
    assert.equal(health?.body.status, "unhealthy", health?.text);
    assert.match(String(health?.body.reason), /node 'n2' is down/);
    await invariants();

    // Started again on its data dir, it re-adopts its units: they answer with their files.
    await start(n2);
    for (const name of onN2) {
      let r: ExecResult | undefined;
      for (let i = 0; i < 100; i++) {
        r = await exec(api2, name, ["cat", "/home/unit/mark"]);
        if (r.status === 200) break;
        await sleep(200);
      }
      assert.equal(r?.status, 200, r?.body.toString());
      assert.equal(r?.stdout.toString(), `${name} on n2\n`);
      // Its unit answers as soon as its endpoint does; its heartbeat (what health reads) follows.
      let healthy: Awaited<ReturnType<typeof apiJson>> | undefined;
      for (let i = 0; i < 50; i++) {
        healthy = await apiJson(api1, "GET", `/v1/units/${name}/check`);
        if (healthy.body.status === "healthy") break;
        await sleep(200);
      }
      assert.equal(healthy?.body.status, "healthy", healthy?.text);
    }
    await invariants();
  });

  it("a frozen node (SIGSTOP) does not hang the API: its units' health answers unhealthy within seconds", async () => {
    const on = await placement();
    const unit = [...on].find(([, p]) => p === n1)?.[0] as string;
    const child = n1.child;
    assert.ok(child);
    child.kill("SIGSTOP");
    try {
      const t0 = Date.now();
      const health = await apiJson(api1, "GET", `/v1/units/${unit}/check`);
      const took = Date.now() - t0;
      assert.equal(health.status, 200, health.text);
      assert.equal(health.body.status, "unhealthy");
      assert.match(String(health.body.reason), /node 'n1' cannot be reached \(ETIMEDOUT\)/);
      assert.ok(took < 10_000, `the check took ${took} ms`);
    } finally {
      child.kill("SIGCONT");
    }
    const back = await exec(api1, unit, ["cat", "/home/unit/mark"]);
    assert.equal(back.status, 200, back.body.toString());
    await invariants();
  });

  it("two API processes creating the same name at once: one 201, the other 409 UMS_UNIT_EXISTS", async () => {
    for (let i = 0; i < 5; i++) {
      const name = `race${i}`;
      const [a, b] = await Promise.all([
        apiJson(api1, "POST", "/v1/units", { name }),
        apiJson(api2, "POST", "/v1/units", { name }),
      ]);
      assert.deepEqual([a.status, b.status].sort(), [201, 409], `${a.text} / ${b.text}`);
      const lost = a.status === 409 ? a : b;
      assert.equal(lost.body.code, ErrorCode.UnitExists);
      const rows = await sql<{ n: number }>("select count(*)::int as n from units where name = $1", [name]);
      assert.equal(rows[0]?.n, 1);
      // The unit works through the API process that lost the race too.
      const r = await exec(a.status === 409 ? api1 : api2, name, ["true"]);
      assert.equal(r.status, 200, r.body.toString());
      assert.equal(r.exitCode, 0);
    }
    await invariants();
  });

  it("an API process killed mid-request and started again: the other's request completes, then everything works through it", async () => {
    const on = await placement();
    const onN1 = [...on].find(([, p]) => p === n1)?.[0] as string;
    const onN2 = [...on].find(([, p]) => p === n2)?.[0] as string;
    // In flight elsewhere: an exec through api2 that outlasts api1's death.
    const elsewhere = exec(api2, onN1, ["sh", "-c", "sleep 2; echo still here"]);
    // In flight through api1 when it dies: an exec, and a create.
    const cut = exec(api1, onN2, ["sh", "-c", "sleep 5; echo finished > /tmp/cut"]).catch((err: unknown) => err);
    const creating = apiJson(api1, "POST", "/v1/units", { name: "mid" }).catch((err: unknown) => err);
    await sleep(500);
    await stopProcess(api1.child, "SIGKILL");
    const done = await elsewhere;
    assert.equal(done.status, 200, done.body.toString());
    assert.equal(done.exitCode, 0);
    assert.equal(done.stdout.toString(), "still here\n");
    await cut;
    await creating;

    await start(api1);
    const list = async (p: Proc) =>
      ((await apiJson(p, "GET", "/v1/units?max_results=100")).body.sprites as { name: string }[])
        .map((u) => u.name)
        .sort();
    const names = await list(api1);
    assert.deepEqual(names, await list(api2));
    for (const name of ["u0", "u1", "u2", "u3", "race0"]) assert.ok(names.includes(name), `${name} is listed`);
    // Every unit answers through the restarted API process, the one made as it died included
    // (when its row was written before).
    for (const name of names) {
      const r = await exec(api1, name, ["true"]);
      assert.equal(r.status, 200, `${name}: ${r.body.toString()}`);
      assert.equal(r.exitCode, 0);
    }
    const again = await apiJson(api1, "POST", "/v1/units", { name: "after" });
    assert.equal(again.status, 201, again.text);
    const r = await exec(api1, "after", ["cat", "/home/unit/mark"]);
    assert.equal(r.status, 200, r.body.toString());
    assert.equal(r.exitCode, 1, "a new unit has its own disk");
    await invariants();
  });
  it("events across processes: a follow on one API process gets every process's events in order; each webhook delivery is made once, and the other API process takes over when the deliverer dies", async () => {
    const admin = (
      await run(UMS_BIN, ["token", "create", "--org", "acme", "--role", "admin"], {
        env: api1.env as Record<string, string>,
      })
    ).stdout.trim();
    // The webhook's receiver, on loopback: every delivery, as it came.
    const got: { id: string; type: string; unit: string | null }[] = [];
    const receiver = createServer((req, res) => {
      let body = "";
      req.setEncoding("utf8");
      req.on("data", (d: string) => {
        body += d;
      });
      req.on("end", () => {
        try {
          got.push(JSON.parse(body));
        } catch {}
        res.end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
    const follow = new AbortController();
    let reading: Promise<void> | undefined;
    try {
      const port = (receiver.address() as AddressInfo).port;
      const made = await fetch(`${api1.address}/v1/webhooks`, {
        method: "POST",
        headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" },
        body: JSON.stringify({ url: `http://127.0.0.1:${port}/hook` }),
      });
      assert.equal(made.status, 201, await made.text());

      // A follow on api2 from now on, read as it comes.
      const followed: { id: string; type: string; unit: string | null }[] = [];
      const stream = await fetch(`${api2.address}/v1/events?follow=true`, {
        headers: { authorization: `Bearer ${token}` },
        signal: follow.signal,
      });
      assert.equal(stream.status, 200);
      reading = (async () => {
        let text = "";
        const decoder = new TextDecoder();
        for await (const chunk of stream.body as unknown as AsyncIterable<Uint8Array>) {
          text += decoder.decode(chunk, { stream: true });
          for (let nl = text.indexOf("\n"); nl >= 0; nl = text.indexOf("\n")) {
            const line = text.slice(0, nl).trim();
            text = text.slice(nl + 1);
            if (line) followed.push(JSON.parse(line));
          }
        }
      })().catch(() => {});

      // Events recorded by api1 (the create, the delete) and by the unit's node (its boot, its checkpoint).
      assert.equal((await apiJson(api1, "POST", "/v1/units", { name: "ev" })).status, 201);
      assert.equal((await exec(api2, "ev", ["true"])).exitCode, 0);
      const cp = await apiJson(api2, "POST", "/v1/units/ev/checkpoint", {});
      assert.equal(cp.status, 200, cp.text);
      assert.equal((await api(api1, "DELETE", "/v1/units/ev")).status, 204);
      const wanted = ["unit.created", "unit.booted", "unit.checkpointed", "unit.deleted"];
      const ofEv = (list: { id: string; type: string; unit: string | null }[]) =>
        list.filter((e) => e.unit === "ev" && wanted.includes(e.type));
      for (let i = 0; ofEv(followed).length < wanted.length || ofEv(got).length < wanted.length; i++) {
        assert.ok(
          i < 200,
          `followed ${JSON.stringify(ofEv(followed))}; delivered ${JSON.stringify(ofEv(got))} (within 20 s)`,
        );
        await sleep(100);
      }
      assert.deepEqual(
        ofEv(followed).map((e) => e.type),
        wanted,
        "the follow on api2 has api1's and the node's events, in order",
      );
      const ids = followed.map((e) => e.id);
      assert.deepEqual([...ids].sort(), ids, "ids increase");
      assert.equal(new Set(ids).size, ids.length, "each event once");
      // Two API processes, one delivery of each event.
      await sleep(1500);
      assert.deepEqual(
        ofEv(got).map((e) => e.type),
        wanted,
      );
      assert.equal(new Set(got.map((e) => e.id)).size, got.length, `no event delivered twice: ${JSON.stringify(got)}`);

      // The deliverer (the holder of the lead, named by its listening connection) dies; the other
      // API process takes over and delivers what comes next.
      const holders = (
        await sql<{ name: string }>(
          "select a.application_name as name from pg_locks l join pg_stat_activity a on a.pid = l.pid where l.locktype = 'advisory' and l.granted and a.application_name like 'ums events %'",
        )
      ).map((r) => r.name);
      const deliverer = [api1, api2].find((p) => holders.includes(`ums events ${p.child?.pid}`));
      assert.ok(deliverer, `one API process delivers: ${JSON.stringify(holders)}`);
      const survivor = deliverer === api1 ? api2 : api1;
      await stopProcess(deliverer.child, "SIGKILL");
      assert.equal((await apiJson(survivor, "POST", "/v1/units", { name: "ev2" })).status, 201);
      for (let i = 0; !got.some((e) => e.unit === "ev2" && e.type === "unit.created"); i++) {
        assert.ok(
          i < 300,
          `the other API process delivers once the first died (within 30 s): ${JSON.stringify(got)}; its log: ${survivor.log.slice(-3000)}`,
        );
        await sleep(100);
      }
      await start(deliverer);
      assert.equal((await api(deliverer, "DELETE", "/v1/units/ev2")).status, 204);
      await invariants();
    } finally {
      follow.abort();
      await reading;
      await new Promise((resolve) => receiver.close(resolve));
    }
  });
  it("a unit on a node reaches the API through its sprites_admin connector, at the node's --api-url", async () => {
    const admin = (
      await run(UMS_BIN, ["token", "create", "--org", "acme", "--role", "admin"], {
        env: api1.env as Record<string, string>,
      })
    ).stdout.trim();
    const provisioned = await fetch(`${api2.address}/v1/oauth/connections/provision`, {
      method: "POST",
      headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" },
      body: JSON.stringify({ provider: "sprites_admin", access_policy: { allow_all: true } }),
    });
    const text = await provisioned.text();
    assert.equal(provisioned.status, 201, text);
    const conn = (JSON.parse(text) as { connection: { id: string } }).connection.id;
    assert.equal((await apiJson(api1, "POST", "/v1/units", { name: "adm" })).status, 201);
    const node = (await placement()).get("adm");
    assert.ok(node, "adm is on a node");
    const url = `http://ums.internal:${node.env.UMS_GATEWAY_PORT}/v1/gateway/sprites_admin/${conn}/v1/units/adm`;
    const r = await exec(api2, "adm", [
      "/.unit/bin/node",
      "-e",
      "fetch(process.argv[1]).then(async (r) => console.log(r.status, await r.text()), (e) => console.log(0, String(e)))",
      url,
    ]);
    assert.equal(r.exitCode, 0, r.stderr.toString());
    const [status, ...body] = r.stdout.toString().trim().split(" ");
    assert.equal(status, "200", r.stdout.toString());
    assert.equal((JSON.parse(body.join(" ")) as { name: string }).name, "adm");
    assert.equal((await api(api1, "DELETE", "/v1/units/adm")).status, 204);
  });
});
