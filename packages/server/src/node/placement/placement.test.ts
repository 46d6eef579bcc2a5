import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { seededRandom } from "../../soak/rng.js";
import type { NodeRecord, OrgRecord } from "../../store/records.js";
import type { Store } from "../../store/store.js";
import { NoNodeError } from "../errors.js";
import { NodePlacement } from "./node-placement.js";
import { MIN_FREE_DISK, MIN_FREE_MEMORY, type PlacementCandidate, place, score } from "./placement.js";

const GiB = 1024 ** 3;
const NOW = Date.parse("2026-11-28T12:00:00Z");
const req = { now: NOW, downAfterMs: 15_000 };

function node(name: string, o: Partial<NodeRecord> = {}): NodeRecord {
  return {
    id: `node-${name}`,
    name,
    address: "",
    state: "active",
    capacity: { cpus: 8, memoryBytes: 32 * GiB, diskBytes: 500 * GiB, unitSlots: 100 },
    free: { memoryBytes: 16 * GiB, diskBytes: 250 * GiB },
    labels: {},
    version: "test",
    createdAt: new Date(NOW - 3_600_000).toISOString(),
    startedAt: new Date(NOW - 3_600_000).toISOString(),
    heartbeatAt: new Date(NOW - 1_000).toISOString(),
    ...o,
  };
}

const cand = (n: NodeRecord, units = 0, orgUnits = 0, reachable = true): PlacementCandidate => ({
  node: n,
  units,
  orgUnits,
  reachable,
});

describe("placement (issue #15 part 3)", () => {
  it("leaves out nodes that are down, cordoned, draining, unreachable, unlabelled, full or short, and says how many of each", () => {
    const stale = new Date(NOW - 16_000).toISOString();
    const cands = [
      cand(node("down", { heartbeatAt: stale })),
      cand(node("cordoned", { state: "cordoned" })),
      cand(node("draining", { state: "draining" })),
      cand(node("far"), 0, 0, false),
      cand(node("full", { labels: { zone: "b" } }), 100),
      cand(node("nomem", { labels: { zone: "b" }, free: { memoryBytes: MIN_FREE_MEMORY - 1, diskBytes: 250 * GiB } })),
      cand(node("nodisk", { labels: { zone: "b" }, free: { memoryBytes: 16 * GiB, diskBytes: MIN_FREE_DISK - 1 } })),
      cand(node("zone-a", { labels: { zone: "a" } })),
    ];
    const r = place(cands, { ...req, labels: { zone: "b" } });
    assert.equal(r.ok, false);
    assert.match(
      !r.ok ? r.reason : "",
      /^no node can take the unit: of 8 nodes, 1 is down \(no heartbeat\), 1 is cordoned, 1 is draining, 1 is not reachable from this API process, 1 is full \(no unit slot left\), 1 is short of memory, 1 is short of disk, 1 is without the labels asked for$/,
    );
    // Without the label asked for, only zone-a can take it, whatever the draws.
    for (let seed = 0; seed < 20; seed++) {
      const ok = place(cands, req, seededRandom(seed));
      assert.equal(ok.ok && ok.node.name, "zone-a");
    }
    assert.equal(place([], req).ok === false && (place([], req) as { reason: string }).reason, "no node is registered");
  });

  it("matches every label asked for, exactly", () => {
    const cands = [
      cand(node("a", { labels: { zone: "a", disk: "ssd" } })),
      cand(node("b", { labels: { zone: "a" } })),
      cand(node("c", { labels: { zone: "ab", disk: "ssd" } })),
    ];
    for (let seed = 0; seed < 20; seed++) {
      const r = place(cands, { ...req, labels: { zone: "a", disk: "ssd" } }, seededRandom(seed));
      assert.equal(r.ok && r.node.name, "a");
    }
  });

  it("a heartbeat exactly at the limit is up, one past it is down", () => {
    const at = (ms: number) => [cand(node("n", { heartbeatAt: new Date(NOW - ms).toISOString() }))];
    assert.equal(place(at(15_000), req).ok, true);
    assert.equal(place(at(15_001), req).ok, false);
  });

  it("the node in this process is up whatever its heartbeat's age; it is still refused for what else it lacks", () => {
    const late = node("n", { heartbeatAt: new Date(NOW - 60_000).toISOString() });
    assert.equal(place([cand(late)], req).ok, false);
    assert.equal(place([{ ...cand(late), local: true }], req).ok, true);
    const r = place([{ ...cand(node("n", { ...late, state: "cordoned" })), local: true }], req);
    assert.equal(r.ok, false);
    assert.match(r.ok ? "" : r.reason, /cordoned/);
  });

  it("a unit's disk quota must fit in what the node has free", () => {
    const cands = [cand(node("small", { free: { memoryBytes: 16 * GiB, diskBytes: 5 * GiB } }))];
    assert.equal(place(cands, { ...req, diskBytes: 4 * GiB }).ok, true);
    assert.equal(place(cands, { ...req, diskBytes: 6 * GiB }).ok, false);
  });

  it("of two, the one with more free wins, and the one without the organization's units", () => {
    const roomy = node("roomy", { free: { memoryBytes: 30 * GiB, diskBytes: 450 * GiB } });
    const tight = node("tight", { free: { memoryBytes: 2 * GiB, diskBytes: 20 * GiB } });
    for (let seed = 0; seed < 20; seed++) {
      const r = place([cand(tight, 90), cand(roomy, 10)], req, seededRandom(seed));
      assert.equal(r.ok && r.node.name, "roomy");
    }
    // Equal room: the node without the organization's units wins.
    for (let seed = 0; seed < 20; seed++) {
      const r = place([cand(node("a"), 10, 10), cand(node("b"), 10, 0)], req, seededRandom(seed));
      assert.equal(r.ok && r.node.name, "b");
    }
    assert.ok(score(cand(node("a"), 10, 10), 10) < score(cand(node("b"), 10, 0), 10));
    // Each draw of two from many: a node with the most of the organization's units loses to any other.
    assert.ok(score(cand(node("a"), 10, 3), 3) + 0.3 < score(cand(node("b"), 10, 1), 3));
  });

  it("a node without a unit count limit is scored by memory and disk alone", () => {
    const open = node("open", { capacity: { cpus: 8, memoryBytes: 32 * GiB, diskBytes: 500 * GiB, unitSlots: null } });
    assert.equal(place([cand(open, 1_000_000)], req).ok, true);
    const s = score(cand(open, 5000), 0);
    assert.ok(Math.abs(s - (1 + 0.5 + 0.5) / 3) < 1e-9, `score ${s}`);
  });

  it("keeps 100 equal nodes within a few units of each other over 10,000 placements, and spreads an organization", () => {
    const nodes = Array.from({ length: 100 }, (_, i) =>
      node(`n${String(i).padStart(3, "0")}`, {
        capacity: { cpus: 8, memoryBytes: 32 * GiB, diskBytes: 500 * GiB, unitSlots: 200 },
      }),
    );
    const units = new Map<string, number>(nodes.map((n) => [n.id, 0]));
    const org = new Map<string, number>(nodes.map((n) => [n.id, 0]));
    const random = seededRandom(7);
    for (let i = 0; i < 10_000; i++) {
      const mine = i % 10 === 0; // one organization makes a tenth of the units
      const r = place(
        nodes.map((n) => cand(n, units.get(n.id) ?? 0, mine ? (org.get(n.id) ?? 0) : 0)),
        req,
        random,
      );
      assert.ok(r.ok);
      units.set(r.node.id, (units.get(r.node.id) ?? 0) + 1);
      if (mine) org.set(r.node.id, (org.get(r.node.id) ?? 0) + 1);
    }
    const counts = [...units.values()];
    assert.ok(
      Math.max(...counts) - Math.min(...counts) <= 6,
      `units per node ${Math.min(...counts)}..${Math.max(...counts)}`,
    );
    const mine = [...org.values()];
    assert.ok(
      Math.max(...mine) - Math.min(...mine) <= 4,
      `the organization's per node ${Math.min(...mine)}..${Math.max(...mine)}`,
    );
  });

  it("draws at random: equal nodes each get picked, not always the first", () => {
    const nodes = [node("a"), node("b"), node("c")];
    const picked = new Set<string>();
    const random = seededRandom(1);
    for (let i = 0; i < 50; i++) {
      const r = place(
        nodes.map((n) => cand(n)),
        req,
        random,
      );
      if (r.ok) picked.add(r.node.name);
    }
    assert.deepEqual([...picked].sort(), ["a", "b", "c"]);
  });
});

describe("NodePlacement: counting units only where they can change the choice (issue #16 part 7)", () => {
  // A store with just the two reads placement makes; `usage` records that it was asked.
  function storeOf(nodes: NodeRecord[], counts: Record<string, number> = {}) {
    const calls = { usage: 0 };
    const store = {
      nodes: {
        list: async () => nodes,
        usage: async () => {
          calls.usage++;
          return nodes.map((n) => ({ node: n, units: counts[n.id] ?? 0, orgUnits: 0 }));
        },
      },
    } as unknown as Store;
    return { store, calls };
  }
  const org = { id: "org-1" } as OrgRecord;
  const placement = (store: Store) =>
    new NodePlacement(
      store,
      () => true,
      () => NOW,
    );
  const unlimited = { cpus: 8, memoryBytes: 32 * GiB, diskBytes: 500 * GiB, unitSlots: null };

  it("one node that can take units and does not count slots: chosen without counting every unit", async () => {
    const down = node("b", { heartbeatAt: new Date(NOW - 60_000).toISOString() });
    const { store, calls } = storeOf([node("a", { capacity: unlimited }), down, node("c", { state: "cordoned" })]);
    assert.equal(await placement(store).choose(org), "node-a");
    assert.equal(calls.usage, 0);
  });

  it("a node that counts slots is counted: a full one is refused", async () => {
    const { store, calls } = storeOf([node("a")], { "node-a": 100 });
    await assert.rejects(placement(store).choose(org), (err: Error) => {
      assert.ok(err instanceof NoNodeError);
      assert.match(err.message, /full \(no unit slot left\)/);
      return true;
    });
    assert.equal(calls.usage, 1);
  });

  it("this process's own node with a late heartbeat (its timer held up) still takes units; another's does not", async () => {
    const late = { heartbeatAt: new Date(NOW - 60_000).toISOString(), capacity: unlimited };
    const local = (store: Store) =>
      new NodePlacement(
        store,
        () => true,
        () => NOW,
        Math.random,
        "node-a",
      );
    assert.equal(await local(storeOf([node("a", late)]).store).choose(org), "node-a");
    await assert.rejects(local(storeOf([node("b", late)]).store).choose(org), /1 is down/);
    await assert.rejects(placement(storeOf([node("a", late)]).store).choose(org), /1 is down/);
    const counted = storeOf([node("a", { ...late, capacity: { ...unlimited, unitSlots: 10 } })], { "node-a": 3 });
    assert.equal(await local(counted.store).choose(org), "node-a");
    assert.equal(counted.calls.usage, 1);
  });

  it("two nodes that can: counted and scored, and `on` still binds the choice to one", async () => {
    const nodes = [node("a", { capacity: unlimited }), node("b", { capacity: unlimited })];
    const two = storeOf(nodes);
    assert.match(await placement(two.store).choose(org), /^node-[ab]$/);
    assert.equal(two.calls.usage, 1);
    const bound = storeOf(nodes);
    assert.equal(await placement(bound.store).choose(org, { on: "node-b" }), "node-b");
    assert.equal(bound.calls.usage, 0);
    const not = storeOf(nodes);
    assert.equal(await placement(not.store).choose(org, { not: "node-b" }), "node-a");
    assert.equal(not.calls.usage, 0);
  });
});
