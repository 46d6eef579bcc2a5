import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { testDialects } from "../../../testing/dialects.js";
import { startTestServer, type TestServer } from "../../../testing/server.js";
import { events, nodeHttp, tools } from "../../../testing/services.js";

const sqlite = testDialects[0];

/**
 * Spec 4.7 (services part) and keep-awake tasks from a process in the unit, over /.unit/api.sock;
 * services coming back after the unit went cold and after a checkpoint restore (spec 3.3). The
 * server idles units fast (warm after 2 s, cold 3 s later).
 */
describe("services: internal API, tasks, cold boots and restores", () => {
  let s: TestServer;
  let token: string;
  let t: ReturnType<typeof tools>;
  const curl = (unit: string, args: string) =>
    t.sh(unit, `curl -sS -w '\\n%{http_code}' --unix-socket /.unit/api.sock ${args}`).then((r) => {
      const lines = r.out.trimEnd().split("\n");
      return { status: Number(lines.pop()), text: lines.join("\n"), err: r.err };
    });
  const unitId = async (name: string) => {
    const org = await s.server.store.orgs.getBySlug("inner");
    const unit = await s.server.store.units.get(org?.id ?? "", name);
    assert.ok(unit);
    return unit.id;
  };
  const waitStatus = async (name: string, status: string, ms: number) => {
    const id = await unitId(name);
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
      if (s.server.lifecycle.statusOf(id) === status) return;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.fail(`unit ${name} is ${s.server.lifecycle.statusOf(id)}, not ${status}, after ${ms} ms`);
  };

  before(async () => {
    if (!sqlite) throw new Error("no sqlite");
    s = await startTestServer(sqlite, { idleWarm: "2s", idleCold: "3s", sweepMs: 200 });
    token = await s.token("inner");
    t = tools(s, token);
    for (const name of ["in", "nap"]) await s.api("POST", "/v1/units", { token, json: { name } });
  });
  after(() => s?.close());

  it("manages services from inside the unit without a token", async () => {
    // Before any service claims http_port, the proxy goes to 8080 (nothing listens there).
    assert.equal((await s.api("GET", "/v1/units/in/", { token })).status, 502);
    const body = JSON.stringify({ ...nodeHttp(9100, "inner"), http_port: 9100 });
    const put = await curl("in", `-X PUT -d '${body}' 'http://unit/v1/services/web?duration=0'`);
    assert.equal(put.status, 200, put.text + put.err);
    assert.equal(JSON.parse(put.text).http_port, 9100);
    await t.until("in", "web", (b) => b.state.status === "running");
    // The agent told ums: the proxy now reaches the new http_port service.
    const proxied = await s.api("GET", "/v1/units/in/p", { token });
    assert.equal(proxied.text, "inner/p");
    const streamed = await curl(
      "in",
      `-X PUT -d '{"cmd":"sh","args":["-c","echo hi; sleep 1000"]}' 'http://unit/v1/services/echo?duration=1s'`,
    );
    assert.equal(streamed.status, 200);
    const ev = events(streamed.text);
    assert.ok(
      ev.some((e) => e.type === "stdout" && e.data === "hi"),
      streamed.text,
    );
    const list = JSON.parse((await curl("in", "http://unit/v1/services")).text);
    assert.deepEqual(
      list.map((x: { name: string }) => x.name),
      ["echo", "web"],
    );
    const one = JSON.parse((await curl("in", "http://unit/v1/services/echo")).text);
    assert.equal(one.state.status, "running");
    const sig = await curl("in", `-X POST -d '{"name":"echo","signal":"TERM"}' http://unit/v1/services/signal`);
    assert.equal(sig.status, 200, sig.text);
    assert.equal(JSON.parse(sig.text).pid, one.state.pid);
    const bad = await curl("in", `-X PUT -d '{"args":[]}' 'http://unit/v1/services/x?duration=0'`);
    assert.equal(bad.status, 400);
    assert.match(bad.text, /cmd: is required/);
    const del = await curl("in", "-X DELETE http://unit/v1/services/web");
    assert.equal(del.status, 204);
    assert.equal((await s.api("GET", "/v1/units/in/services/web", { token })).status, 404);
    assert.equal((await s.api("GET", "/v1/units/in/p", { token })).status, 502);
  });

  it("holds the unit running while a keep-awake task lives", async () => {
    const tooLong = await curl("nap", `-X POST -d '{"name":"build","expire":"25h"}' http://unit/v1/tasks`);
    assert.equal(tooLong.status, 400);
    assert.match(tooLong.text, /expire: must be at most 24h/);
    const made = await curl("nap", `-X POST -d '{"name":"build","expire":"60s"}' http://unit/v1/tasks`);
    assert.equal(made.status, 201, made.text);
    assert.ok(Date.parse(JSON.parse(made.text).expire) > Date.now() + 50_000);
    assert.equal(JSON.parse((await curl("nap", "http://unit/v1/tasks")).text)[0].name, "build");
    await new Promise((r) => setTimeout(r, 4500)); // past idle-warm (2 s) and then some
    assert.equal(s.server.lifecycle.statusOf(await unitId("nap")), "running");
    const short = await curl("nap", `-X PUT -d '{"expire":"1s"}' http://unit/v1/tasks/build`);
    assert.equal(short.status, 200, short.text);
    await waitStatus("nap", "warm", 8000);
  });

  it("starts the unit's services again after it went cold", async () => {
    assert.equal((await t.put("nap", "keep", { cmd: "sleep", args: ["1000"], needs: [] })).status, 200);
    await t.until("nap", "keep", (b) => b.state.status === "running");
    await waitStatus("nap", "cold", 15_000);
    const coldAt = Date.now();
    const back = await t.until("nap", "keep", (b) => b.state.status === "running");
    assert.ok(Date.parse(back.state.started_at as string) >= coldAt - 100, JSON.stringify(back));
  });

  it("brings services back with a checkpoint restore", async () => {
    const cp = events((await s.api("POST", "/v1/units/nap/checkpoint", { token, json: {} })).text).at(-1);
    const id = /(v\d+)/.exec(cp?.data ?? "")?.[1];
    assert.ok(id, JSON.stringify(cp));
    assert.equal((await s.api("DELETE", "/v1/units/nap/services/keep", { token })).status, 204);
    assert.equal((await t.put("nap", "other", { cmd: "sleep", args: ["999"], needs: [] })).status, 200);
    const r = await s.api("POST", `/v1/units/nap/checkpoints/${id}/restore`, { token });
    assert.equal(events(r.text).at(-1)?.type, "complete", r.text);
    const keep = await t.until("nap", "keep", (b) => b.state.status === "running");
    assert.deepEqual(keep.args, ["1000"]);
    assert.equal((await s.api("GET", "/v1/units/nap/services/other", { token })).status, 404);
  });
});
