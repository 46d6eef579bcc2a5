// Issue #17: every lifecycle event type appears for the action that causes it, with its actor;
// the list pages, filters and stays within its organization; a follow sees the same events in
// the same order, and a follow after a page's last id continues it with no gap and no duplicate.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startSqliteServer, type TestServer } from "../testing/server.js";
import { tools } from "../testing/services.js";

interface Ev {
  id: string;
  type: string;
  time: string;
  unit: string | null;
  actor: string;
  data: Record<string, unknown>;
}

/** A follow (NDJSON) whose events collect in `events` until `close()`. */
async function follow(url: string, token: string, query = "") {
  const abort = new AbortController();
  const res = await fetch(`${url}/v1/events?follow=true${query}`, {
    headers: { authorization: `Bearer ${token}` },
    signal: abort.signal,
  });
  const events: Ev[] = [];
  const body = res.status === 200 ? "" : await res.text();
  const done =
    res.status === 200 && res.body
      ? (async () => {
          const reader = (res.body as ReadableStream<Uint8Array>).getReader();
          const dec = new TextDecoder();
          let buf = "";
          try {
            for (;;) {
              const { value, done } = await reader.read();
              if (done) return;
              buf += dec.decode(value, { stream: true });
              let nl = buf.indexOf("\n");
              while (nl >= 0) {
                events.push(JSON.parse(buf.slice(0, nl)) as Ev);
                buf = buf.slice(nl + 1);
                nl = buf.indexOf("\n");
              }
            }
          } catch {
            // aborted
          }
        })()
      : Promise.resolve();
  return {
    status: res.status,
    events,
    body: () => body,
    async close() {
      abort.abort();
      await done;
    },
  };
}

async function until<T>(what: string, f: () => Promise<T | undefined> | T | undefined, ms = 30_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await f();
    if (v !== undefined) return v;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe("lifecycle events (GET /v1/events)", { timeout: 240_000 }, () => {
  let s: TestServer;
  let token: string;
  let tokenId: string;
  let t: ReturnType<typeof tools>;
  let live: Awaited<ReturnType<typeof follow>>;

  const list = async (query = "", tok = token) => {
    const r = await s.api("GET", `/v1/events${query}`, { token: tok });
    assert.equal(r.status, 200, r.text);
    return r.body as { events: Ev[]; has_more: boolean; next_continuation_token: string | null };
  };
  const all = async (query = "") => {
    const out: Ev[] = [];
    let token: string | null = null;
    do {
      const page = await list(`?max_results=500${query}${token ? `&continuation_token=${token}` : ""}`);
      out.push(...page.events);
      token = page.next_continuation_token;
    } while (token);
    return out;
  };
  const seen = (type: string, unit: string, pred: (e: Ev) => boolean = () => true) =>
    until(`${type} of ${unit}`, async () =>
      (await all(`&unit=${unit}&type=${type}`)).find((e) => e.type === type && pred(e)),
    );

  before(async () => {
    s = await startSqliteServer({ idleWarm: "2s", idleCold: "4s", sweepMs: 200 });
    token = await s.token("acme");
    const toks = await s.api("GET", "/v1/organizations/acme/tokens", { token });
    tokenId = toks.body.tokens[0].id;
    t = tools(s, token);
    live = await follow(s.url, token);
    assert.equal(live.status, 200);
  });
  after(async () => {
    // The server closes with a follow still open (it ends it), then the follow's reader stops.
    await s?.close();
    await live?.close();
  });

  it("records each action's event with its actor: created, booted, policy, checkpoint, restore, fork, delete", async () => {
    const actor = `token:${tokenId}`;
    assert.equal((await s.api("POST", "/v1/units", { token, json: { name: "ev" } })).status, 201);
    const created = await seen("unit.created", "ev");
    assert.equal(created.actor, actor);
    assert.match(created.id, /^evt_/);
    assert.ok(Date.parse(created.time) > 0);
    assert.equal((await t.sh("ev", "true")).code, 0);
    const booted = await seen("unit.booted", "ev");
    assert.equal(booted.actor, "system");
    assert.equal(typeof booted.data.ms, "number");
    const pol = await s.api("POST", "/v1/units/ev/policy/network", { token, json: { rules: [] } });
    assert.ok(pol.status < 300, pol.text);
    const changed = await seen("policy.changed", "ev");
    assert.equal(changed.data.policy, "network");
    assert.equal(changed.actor, actor);
    const cp = await s.api("POST", "/v1/units/ev/checkpoint", { token, json: { comment: "one" } });
    assert.match(cp.text, /"complete"/);
    assert.equal((await seen("unit.checkpointed", "ev")).data.checkpoint, "v0");
    const restore = await s.api("POST", "/v1/units/ev/checkpoints/v0/restore", { token });
    assert.match(restore.text, /"complete"/);
    const restored = await seen("unit.restored", "ev");
    assert.deepEqual(restored.data, { checkpoint: "v0", backup: "v1" });
    assert.equal(restored.actor, actor);
    const fork = await s.api("POST", "/v1/units", {
      token,
      json: { name: "ev-fork", from: { unit: "ev", checkpoint: "v0" } },
    });
    assert.equal(fork.status, 201, fork.text);
    assert.deepEqual((await seen("unit.forked", "ev-fork")).data, { source: "ev", checkpoint: "v0" });
    assert.equal((await s.api("DELETE", "/v1/units/ev-fork", { token })).status, 204);
    assert.equal((await seen("unit.deleted", "ev-fork")).actor, actor);
  });

  it("a checkpoint and a restore asked from inside the unit have actor 'unit'", async () => {
    const curl = "curl -sS --unix-socket /.unit/api.sock";
    const r = await t.sh("ev", `${curl} -X POST -d '{"comment":"inside"}' http://unit/v1/checkpoint`);
    assert.match(r.out, /"complete"/, r.out + r.err);
    const id = /"id":"(v\d+)"/.exec(r.out)?.[1];
    assert.ok(id);
    const cp = await seen("unit.checkpointed", "ev", (e) => e.data.checkpoint === id);
    assert.equal(cp.actor, "unit");
    await t.sh("ev", `${curl} -X POST http://unit/v1/checkpoints/${id}/restore`);
    const restored = await seen("unit.restored", "ev", (e) => e.data.checkpoint === id);
    assert.equal(restored.actor, "unit");
  });

  it("a service that crashes and is restarted: service.crashed, service.restarted", async () => {
    await until("the unit back after the restore", async () =>
      (await t.sh("ev", "true")).code === 0 ? true : undefined,
    );
    const put = await t.put("ev", "flaky", { cmd: "sh", args: ["-c", "sleep 0.2; echo boom >&2; exit 3"] });
    assert.equal(put.status, 200, put.text);
    const crashed = await seen("service.crashed", "ev");
    assert.equal(crashed.data.service, "flaky");
    assert.equal(crashed.data.exit_code, 3);
    assert.equal(crashed.data.error, "boom");
    assert.equal(crashed.actor, "system");
    const restarted = await seen("service.restarted", "ev");
    assert.equal(restarted.data.service, "flaky");
    assert.ok(restarted.id > crashed.id);
    assert.equal((await s.api("DELETE", "/v1/units/ev/services/flaky", { token })).status, 204);
  });

  it("an idle unit is warmed, woken by a request, then warmed and cooled", async () => {
    const warmed = await seen("unit.warmed", "ev");
    await t.sh("ev", "true");
    const woken = await seen("unit.woken", "ev", (e) => e.id > warmed.id);
    const cooled = await seen("unit.cooled", "ev", (e) => e.id > woken.id);
    assert.equal(cooled.actor, "system");
    await t.sh("ev", "true");
    await seen("unit.booted", "ev", (e) => e.id > cooled.id);
  });

  it("limits reached: max_units at a create, running_limit at a wake", async () => {
    const lim = await s.token("lim", { limits: { maxUnits: 2, runningLimit: 1 } });
    for (const name of ["a", "b"]) {
      assert.equal((await s.api("POST", "/v1/units", { token: lim, json: { name } })).status, 201);
    }
    const third = await s.api("POST", "/v1/units", { token: lim, json: { name: "c" } });
    assert.equal(third.status, 403);
    const l = tools(s, lim);
    // `a` is held busy by a running command while `b` asks to run.
    const busy = l.sh("a", "sleep 4");
    await until("a running", async () =>
      (await s.api("GET", "/v1/units/a", { token: lim })).body.status === "running" ? true : undefined,
    );
    const refused = await s.api("POST", "/v1/units/b/exec?cmd=true", { token: lim });
    assert.equal(refused.status, 409, refused.text);
    await busy;
    const r = await s.api("GET", "/v1/events?type=limit.reached", { token: lim });
    const kinds = r.body.events.map((e: Ev) => [e.data.kind, e.unit]);
    assert.deepEqual(kinds, [
      ["max_units", "c"],
      ["running_limit", "b"],
    ]);
    // Another organization's events are not acme's, nor acme's theirs.
    assert.ok((await all()).every((e) => e.unit !== "a" && e.unit !== "c"));
    assert.ok(r.body.events.every((e: Ev) => e.unit !== "ev"));
    const other = await s.api("GET", "/v1/events?unit=ev", { token: lim });
    assert.deepEqual(other.body.events, []);
  });

  it("pages with continuation tokens; a follow after a page's last id continues it with no gap or duplicate", async () => {
    const everything = await all();
    assert.ok(everything.length >= 15, `${everything.length} events`);
    const ids = everything.map((e) => e.id);
    assert.deepEqual([...ids].sort(), ids, "oldest first, ids increasing");
    const first = await list("?max_results=3");
    assert.equal(first.events.length, 3);
    assert.equal(first.has_more, true);
    assert.deepEqual(
      first.events.map((e) => e.id),
      ids.slice(0, 3),
    );
    const second = await list(`?max_results=3&continuation_token=${first.next_continuation_token}`);
    assert.deepEqual(
      second.events.map((e) => e.id),
      ids.slice(3, 6),
    );
    // The live follow opened at the start saw everything, in the same order.
    await until("the live follow to catch up", () => (live.events.length >= ids.length ? true : undefined));
    assert.deepEqual(live.events.map((e) => e.id).slice(0, ids.length), ids);
    // A follow from the 6th event: the stored rest first, then a new one live; each once.
    const resumed = await follow(s.url, token, `&since=${ids[5]}`);
    try {
      await until("the stored rest", () => (resumed.events.length >= ids.length - 6 ? true : undefined));
      assert.equal((await s.api("POST", "/v1/units", { token, json: { name: "later" } })).status, 201);
      const later = await until("the new event", () => resumed.events.find((e) => e.unit === "later"));
      assert.equal(later.type, "unit.created");
      const got = resumed.events.map((e) => e.id);
      const expected = (await all()).map((e) => e.id).slice(6);
      assert.deepEqual(got, expected);
    } finally {
      await resumed.close();
    }
    // Filters: by unit and by type.
    const byType = await all("&type=unit.created,unit.deleted");
    assert.ok(byType.length >= 2 && byType.every((e) => e.type === "unit.created" || e.type === "unit.deleted"));
  });

  it("bad input is refused with 400; a 33rd follow of one organization is refused with 429", async () => {
    for (const q of [
      "?type=unit.exploded",
      "?since=nope",
      "?continuation_token=evt_zz",
      "?max_results=0",
      "?follow=maybe",
    ]) {
      const r = await s.api("GET", `/v1/events${q}`, { token });
      assert.equal(r.status, 400, `${q}: ${r.text}`);
      assert.equal(r.body.code, "UMS_VALIDATION");
    }
    const open = [];
    try {
      // The live follow of before() is one of acme's.
      for (let i = 0; i < 31; i++) open.push(await follow(s.url, token));
      assert.ok(open.every((f) => f.status === 200));
      const over = await follow(s.url, token);
      assert.equal(over.status, 429);
      await over.close();
      assert.equal(JSON.parse(over.body()).code, "UMS_EVENT_FOLLOW_LIMIT");
      // Another organization is not affected.
      const lim = await s.token("lim");
      const theirs = await follow(s.url, lim);
      assert.equal(theirs.status, 200);
      await theirs.close();
    } finally {
      for (const f of open) await f.close();
    }
    // Closed follows give their slots back.
    await until("a slot free again", async () => {
      const f = await follow(s.url, token);
      await f.close();
      return f.status === 200 ? true : undefined;
    });
  });
});
