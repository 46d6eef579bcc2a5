// Issue #17: the event log's bounds (7 days, at most N per organization, pruned as it writes and
// at start) and its one guarantee to followers: each event once, in order, no gap, while events
// are written concurrently with the follow's catch-up from the store.
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import pino from "pino";
import { openStore } from "../store/open.js";
import type { Store } from "../store/store.js";
import { EventLog, type NewEvent } from "./event-log.js";
import { limitReachedRecorder } from "./limit.js";

describe("event log", () => {
  let store: Store;
  let dir: string;
  const log = pino({ level: "silent" });
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "ums-events-"));
    store = await openStore({ dataDir: dir, databaseUrl: undefined });
  });
  after(async () => {
    await store?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("keeps at most maxPerOrg events per organization and drops those past the retention", async () => {
    const org = await store.orgs.ensure("prune", { maxUnits: 1, runningLimit: 1, warmLimit: 1 });
    const other = await store.orgs.ensure("prune-other", { maxUnits: 1, runningLimit: 1, warmLimit: 1 });
    // An old event, as a previous run would have left it.
    await store.events.add({
      id: "evt_000000000000000000a",
      orgId: other.id,
      at: new Date(Date.now() - 8 * 86_400_000).toISOString(),
      type: "unit.created",
      unit: "old",
      actor: "system",
      data: "{}",
    });
    const events = new EventLog(store, log, { retentionMs: 7 * 86_400_000, maxPerOrg: 150 });
    await events.start();
    assert.deepEqual(await store.events.list(other.id, { limit: 10 }), [], "the 8-day-old event is gone at start");
    let most = 0;
    for (let i = 0; i < 330; i++) {
      events.emit({ orgId: org.id, type: "unit.booted", unit: `u${i}`, actor: "system", data: { i } });
      if (i % 10 === 9) {
        await events.settled();
        most = Math.max(most, (await store.events.list(org.id, { limit: 1000 })).length);
      }
    }
    await events.settled();
    const left = await store.events.list(org.id, { limit: 1000 });
    assert.ok(most <= 150, `at most 150 at any time, saw ${most}`);
    assert.ok(left.length > 0 && left.length <= 150);
    // The newest are the ones kept.
    assert.equal(JSON.parse(left.at(-1)?.data ?? "{}").i, 329);
    const kept = left.map((e) => JSON.parse(e.data).i as number);
    assert.deepEqual(
      kept,
      [...kept].sort((a, b) => a - b),
    );
    assert.equal(kept[0], 330 - left.length);
    await events.close();
  });

  it("a follow from a cursor sees every later event once, in order, while events keep coming", async () => {
    const org = await store.orgs.ensure("follow", { maxUnits: 1, runningLimit: 1, warmLimit: 1 });
    const events = new EventLog(store, log);
    await events.start();
    for (let i = 0; i < 600; i++)
      events.emit({ orgId: org.id, type: "unit.created", unit: "a", actor: "system", data: { i } });
    await events.settled();
    const first = (await store.events.list(org.id, { limit: 10 })).at(-1)?.id;
    const stop = new AbortController();
    const got: number[] = [];
    const reading = (async () => {
      for await (const e of events.follow(org.id, { since: first }, stop.signal)) {
        got.push(JSON.parse(e.data).i);
        if (got.length === 590 + 400) stop.abort();
      }
    })();
    // More events while the follow pages through the stored ones.
    for (let i = 600; i < 1000; i++) {
      events.emit({ orgId: org.id, type: "unit.created", unit: "a", actor: "system", data: { i } });
      if (i % 50 === 0) await new Promise((r) => setImmediate(r));
    }
    await events.settled();
    await Promise.race([
      reading,
      new Promise((_, reject) => setTimeout(() => reject(new Error(`follow stuck at ${got.length}`)), 20_000)),
    ]);
    assert.deepEqual(
      got,
      Array.from({ length: 990 }, (_, k) => k + 10),
    );
    await events.close();
  });

  it("limitReached (for the usage sampler): a limit.reached event of kind memory or disk, once a minute per unit and kind", async () => {
    const org = await store.orgs.ensure("limits", { maxUnits: 5, runningLimit: 1, warmLimit: 1 });
    const unit = await store.units.create(
      {
        id: "unit-limit-test",
        orgId: org.id,
        name: "full",
        urlLabel: "full-abcdefgh",
        status: "cold",
        urlAuth: "unit",
        privateAccess: null,
        labels: [],
        version: null,
        environmentVersion: null,
        createdAt: new Date().toISOString(),
      },
      5,
    );
    const got: NewEvent[] = [];
    let now = 1_000_000;
    const report = limitReachedRecorder(
      store,
      (e) => got.push(e),
      () => now,
    );
    await report({ unitId: unit.id, kind: "memory", limitBytes: 512, usedBytes: 512 });
    await report({ unitId: unit.id, kind: "memory", limitBytes: 512, usedBytes: 512 });
    await report({ unitId: unit.id, kind: "disk" });
    await report({ unitId: "unit-gone", kind: "disk" });
    now += 61_000;
    await report({ unitId: unit.id, kind: "memory" });
    assert.deepEqual(
      got.map((e) => [e.orgId === org.id, e.type, e.unit, e.actor, e.data]),
      [
        [true, "limit.reached", "full", "system", { kind: "memory", limit_bytes: 512, used_bytes: 512 }],
        [true, "limit.reached", "full", "system", { kind: "disk" }],
        [true, "limit.reached", "full", "system", { kind: "memory" }],
      ],
    );
  });
});
