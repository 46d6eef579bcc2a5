import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import type { UnitNode } from "../../node/unit-node.js";
import { openStore } from "../../store/open.js";
import type { UnitRecord } from "../../store/records.js";
import type { Store } from "../../store/store.js";
import { ApiError } from "../errors.js";
import { RecipeBuilds } from "./recipe-build.js";

/**
 * A node whose build ends before the steps it asked for do: what a build on another node does when
 * its stream to that node breaks (remote-node.ts runs the steps apart from the stream).
 */
function nodeThatBreaks(store: Store) {
  const destroyed: UnitRecord[] = [];
  const node = {
    baseImage: async () => ({ bytes: 1, builtAt: "2026-11-29T00:00:00.000Z" }),
    buildImage: async (
      _org: unknown,
      _recipe: unknown,
      _source: string,
      hooks: { steps?: (draftId: string) => Promise<unknown> },
    ) => {
      const steps = hooks.steps?.("img-draft");
      // The steps go on after the build ended; their own end is nobody's but theirs.
      steps?.catch(() => {});
      throw new Error("the stream to the node broke");
    },
    fillDraft: async (_imageId: string, unit: UnitRecord) => {
      if (destroyed.some((u) => u.id === unit.id)) throw new Error(`unit '${unit.name}' was deleted`);
    },
    wake: async () => {
      throw new Error("not reached");
    },
    destroy: async (unit: UnitRecord) => {
      destroyed.push(unit);
      return store.units.delete(unit.orgId, unit.name);
    },
  };
  return { node: node as unknown as UnitNode, destroyed };
}

describe("recipe builds", () => {
  let dir: string;
  let store: Store;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "ums-recipe-build-"));
    store = await openStore({ dataDir: dir, databaseUrl: undefined });
  });
  after(async () => {
    await store?.close();
    await rm(dir, { recursive: true, force: true });
  });

  it("deletes the steps' unit when the build ended while the unit was being made, and leaves the organization none", async () => {
    const org = await store.orgs.ensure("builds", { maxUnits: 5, runningLimit: 1, warmLimit: 1 });
    const { node, destroyed } = nodeThatBreaks(store);
    const builds = new RecipeBuilds(store, node, (name) => new ApiError(409, "UMS_BUILDING", name));
    const prepared = await builds.prepare(org, { name: "img", steps: ["true"] });
    await assert.rejects(prepared.run({ progress: () => {} }), /the stream to the node broke/);
    assert.equal(destroyed.length, 1, "the unit made for the steps is deleted");
    assert.match(destroyed[0]?.name ?? "", /^image-build/);
    assert.deepEqual(
      (await store.units.page(org.id, { limit: 10 })).map((u) => u.name),
      [],
      "no unit of the build is left",
    );
  });
});
