import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { NodeRecord } from "../../store/records.js";
import type { Store } from "../../store/store.js";
import { NODE_NAME_TTL_MS, NodeNames } from "./node-names.js";

describe("node names for units' answers (issue #16 part 7)", () => {
  function setup() {
    let rows = [{ id: "n1", name: "alpha" }];
    let reads = 0;
    let now = 1_000_000;
    const store = {
      nodes: {
        list: async () => {
          reads++;
          return rows as NodeRecord[];
        },
      },
    } as unknown as Pick<Store, "nodes">;
    const names = new NodeNames(store, () => now);
    return {
      names,
      reads: () => reads,
      set: (r: typeof rows) => {
        rows = r;
      },
      advance: (ms: number) => {
        now += ms;
      },
    };
  }

  it("reads the nodes once for many answers, again after the TTL, and at once for a node it does not know", async () => {
    const t = setup();
    assert.equal(await t.names.name("n1"), "alpha");
    assert.equal(await t.names.name("n1"), "alpha");
    assert.equal(t.reads(), 1);
    t.set([
      { id: "n1", name: "alpha-renamed" },
      { id: "n2", name: "beta" },
    ]);
    assert.equal(await t.names.name("n1"), "alpha", "within the TTL");
    assert.equal(await t.names.name("n2"), "beta", "a new node is read at once");
    assert.equal(t.reads(), 2);
    assert.equal(await t.names.name("n1"), "alpha-renamed", "that read brought the rest too");
    t.set([{ id: "n2", name: "beta2" }]);
    t.advance(NODE_NAME_TTL_MS);
    assert.equal(await t.names.name("n2"), "beta2");
    assert.equal(await t.names.name("n1"), undefined, "a removed node has no name");
    assert.equal(t.reads(), 4, "n1 unknown after the read: one more read, then undefined");
  });

  it("asks nothing for no nodes, and shares one read between concurrent callers", async () => {
    const t = setup();
    assert.equal((await t.names.of([])).size, 0);
    assert.equal(t.reads(), 0);
    const all = await Promise.all([t.names.name("n1"), t.names.name("n1"), t.names.of(["n1"])]);
    assert.equal(all[0], "alpha");
    assert.equal(t.reads(), 1);
  });
});
