// Issue #15: `ums node` and the node flags of `ums serve`, through the real launcher bin/ums
// (testing/ums-cli.ts) against a real server with real units.

import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { freePort } from "@ums/server/testing";
import { api, createPgDatabase, createToken, serve, tempDir, ums, umsOk } from "../testing/ums-cli.js";

describe("ums node", { concurrency: 2 }, () => {
  it("list shows this host's node; unit slots and cordon decide where units go (503 UMS_NO_NODE, nothing made); remove only a stopped node without units", async (t) => {
    const dir = await tempDir(t);
    const token = await createToken(dir, "acme");
    const port = await freePort();
    const server = await serve(t, port, [
      "--data-dir",
      dir,
      "--listen",
      `127.0.0.1:${port}`,
      "--node-name",
      "alpha",
      "--node-labels",
      "zone=a,disk=ssd",
      "--node-units",
      "2",
    ]);
    const list = await umsOk(["node", "list", "--data-dir", dir]);
    const [head, row, ...rest] = list.trimEnd().split("\n");
    assert.equal(head, "NAME\tSTATUS\tUNITS\tCPUS\tMEMORY FREE\tDISK FREE\tLABELS\tHEARTBEAT");
    assert.equal(rest.length, 0, list);
    assert.match(row ?? "", /^alpha\tup\t0\/2\t\d+\t\S+\/\S+\t\S+\/\S+\tzone=a,disk=ssd\t\d{4}-/);

    for (const name of ["one", "two"]) {
      assert.equal((await api(server.url, "POST", "/v1/units", token, { name })).status, 201);
    }
    const json = JSON.parse(await umsOk(["node", "list", "--json", "--data-dir", dir]));
    assert.equal(json.name, "alpha");
    assert.equal(json.up, true);
    assert.equal(json.state, "active");
    assert.equal(json.units, 2);
    assert.equal(json.unit_slots, 2);
    assert.deepEqual(json.labels, { zone: "a", disk: "ssd" });
    assert.match(json.id, /^node-[0-9a-f-]{36}$/);
    assert.ok(json.memory_bytes > 0 && json.disk_bytes > 0 && json.disk_free_bytes <= json.disk_bytes);

    // Full: the third is refused, says why, and no unit of that name exists.
    const full = await api(server.url, "POST", "/v1/units", token, { name: "three" });
    assert.equal(full.status, 503, JSON.stringify(full.body));
    assert.equal(full.body.code, "UMS_NO_NODE");
    assert.match(
      full.body.error,
      /^no node can take the unit: of 1 node, 1 is full \(no unit slot left\); nothing was created/,
    );
    assert.equal((await api(server.url, "GET", "/v1/units/three", token)).status, 404);

    // Cordoned: a slot is free, but the node takes no new unit; its units still answer.
    assert.equal((await api(server.url, "DELETE", "/v1/units/two", token)).status, 204);
    assert.equal(await umsOk(["node", "cordon", "alpha", "--data-dir", dir]), "alpha: up, cordoned\n");
    const cordoned = await api(server.url, "POST", "/v1/units", token, { name: "three" });
    assert.equal(cordoned.status, 503);
    assert.match(cordoned.body.error, /1 is cordoned/);
    const exec = await fetch(`${server.url}/v1/units/one/exec?cmd=true`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
    });
    assert.equal(exec.status, 200);
    await exec.arrayBuffer();
    // A fork goes where its source's data is: refused too while that node is cordoned.
    const cp = await fetch(`${server.url}/v1/units/one/checkpoint`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: "{}",
    });
    assert.equal(cp.status, 200);
    assert.match(await cp.text(), /"v0"/);
    const fork = { name: "forked", from: { unit: "one", checkpoint: "v0" } };
    const refused = await api(server.url, "POST", "/v1/units", token, fork);
    assert.equal(refused.status, 503, JSON.stringify(refused.body));
    assert.match(refused.body.error, /1 is cordoned.*\(the unit's data is on that node alone\)/);
    assert.equal(await umsOk(["node", "uncordon", "alpha", "--data-dir", dir]), "alpha: up\n");
    assert.equal((await api(server.url, "POST", "/v1/units", token, fork)).status, 201);

    const up = await ums(["node", "remove", "alpha", "--data-dir", dir]);
    assert.equal(up.code, 2);
    assert.match(up.stderr, /node 'alpha' is up \(heartbeat .*\): stop its 'ums serve' first/);
    const names = (await api(server.url, "GET", "/v1/units", token)).body.sprites.map((u: { name: string }) => u.name);
    assert.deepEqual(names.sort(), ["forked", "one"]);
    assert.deepEqual(await server.stop("SIGTERM"), { code: 0, signal: null });
    // Stopped, but up until its heartbeat is 15 s old.
    for (let i = 0; ; i++) {
      const r = await ums(["node", "remove", "alpha", "--data-dir", dir]);
      assert.equal(r.code, 2);
      if (/still holds 2 units: delete them first, or give --forget-units/.test(r.stderr)) break;
      assert.match(r.stderr, /is up/);
      assert.ok(i < 40, "the stopped node never showed as down");
      await new Promise((res) => setTimeout(res, 500));
    }
    for (const [verb, name] of [
      ["cordon", "nope"],
      ["remove", "nope"],
    ] as const) {
      const r = await ums(["node", verb, name, "--data-dir", dir]);
      assert.equal(r.code, 2);
      assert.match(r.stderr, /no node 'nope'; 'ums node list' shows them/);
    }
  });

  it("remove --forget-units drops a gone node with its units' records; without it, it is refused", async (t) => {
    const dir = await tempDir(t);
    const { openStore } = await import("@ums/server/store");
    const store = await openStore({ dataDir: dir, databaseUrl: undefined });
    try {
      const old = "2026-01-01T00:00:00.000Z";
      await store.nodes.register(
        {
          id: "node-00000000-0000-4000-8000-000000000001",
          name: "gone",
          address: "",
          capacity: { cpus: 1, memoryBytes: 1, diskBytes: 1, unitSlots: null },
          free: { memoryBytes: 1, diskBytes: 1 },
          labels: {},
          version: "0",
          startedAt: old,
        },
        old,
      );
      const org = await store.orgs.ensure("acme", { maxUnits: 10, runningLimit: 1, warmLimit: 1 });
      for (const name of ["a", "b"]) {
        await store.units.create(
          {
            id: `unit-${name}-gone`,
            orgId: org.id,
            name,
            urlLabel: `${name}-gone`,
            status: "cold",
            urlAuth: "unit",
            privateAccess: null,
            labels: [],
            version: null,
            environmentVersion: null,
            createdAt: old,
            nodeId: "node-00000000-0000-4000-8000-000000000001",
          },
          10,
        );
      }
    } finally {
      await store.close();
    }
    assert.match(await umsOk(["node", "list", "--data-dir", dir]), /\ngone\tdown\t2\t1\t/);
    const refused = await ums(["node", "remove", "gone", "--data-dir", dir]);
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /node 'gone' still holds 2 units: delete them first, or give --forget-units/);
    assert.equal(
      await umsOk(["node", "remove", "gone", "--forget-units", "--data-dir", dir]),
      "removed gone and the records of its 2 units\n",
    );
    assert.equal(await umsOk(["node", "list", "--json", "--data-dir", dir]), "");
  });

  it("serve refuses bad node flags (exit 2, naming the value)", async (t) => {
    const dir = await tempDir(t);
    for (const [flag, value, message] of [
      ["--node-name", "Bad_Name", /node name 'Bad_Name' must be 1-63 lowercase letters/],
      ["--node-labels", "zone", /node label 'zone' is not key=value/],
      ["--node-labels", "a=1,a=2", /node label 'a' is given twice/],
      ["--node-units", "0", /--node-units '0' must be an integer from 1 to 1000000/],
    ] as const) {
      const r = await ums(["serve", "--data-dir", dir, flag, value], { timeoutMs: 10_000 });
      assert.equal(r.code, 2, `${flag} ${value}: ${r.stderr}`);
      assert.match(r.stderr, message);
    }
  });

  const pgUrl = process.env.UMS_TEST_PG_URL;
  it("a second host on one PostgreSQL database stops before its runtime when its name is taken, or when the nodes have no endpoints, saying what to do", {
    skip: pgUrl ? false : "UMS_TEST_PG_URL is not set (scripts/test sets it)",
  }, async (t) => {
    const databaseUrl = await createPgDatabase();
    const dir = await tempDir(t);
    const other = await tempDir(t);
    const port = await freePort();
    const env = { UMS_DATABASE_URL: databaseUrl };
    const server = await serve(
      t,
      port,
      ["--data-dir", dir, "--listen", `127.0.0.1:${port}`, "--node-name", "same"],
      env,
    );
    const second = await ums(
      ["serve", "--data-dir", other, "--listen", "127.0.0.1:0", "--gateway-port", "0", "--node-name", "same"],
      { env, timeoutMs: 30_000 },
    );
    assert.equal(second.code, 2, second.stderr);
    assert.match(
      second.stderr,
      /node name 'same' is taken by another node \(node-[0-9a-f-]{36}, last heartbeat .*\): give this host another with --node-name/,
    );
    // Another name, but neither node has an endpoint: API processes could not reach both.
    const third = await ums(
      ["serve", "--data-dir", other, "--listen", "127.0.0.1:0", "--gateway-port", "0", "--node-name", "third"],
      { env, timeoutMs: 30_000 },
    );
    assert.equal(third.code, 2, third.stderr);
    assert.match(third.stderr, /already has node 'same' .*nodes that share a database need endpoints .*--node-listen/);
    const rows = (await umsOk(["node", "list", "--json", "--data-dir", dir], { env })).trim().split("\n");
    assert.equal(rows.length, 1);
    assert.equal(JSON.parse(rows[0] ?? "{}").name, "same");
    await server.stop("SIGTERM");
  });
});
