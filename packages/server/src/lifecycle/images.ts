import { randomUUID } from "node:crypto";
import type { Readable } from "node:stream";
import type { ImageRecipe } from "@ums/protocol";
import type { Logger } from "pino";
import type { UnitRuntime } from "../runtime/runtime.js";
import { type ImageRecord, onNode, type UnitRecord } from "../store/records.js";
import type { Store } from "../store/store.js";
import { ImageGoneError, ImageInUseError } from "./errors.js";
import type { UnitTable } from "./unit-table.js";

/** The lock of an image's files (a key of the units' mutex that no unit id can take). */
export const lockOf = (i: Pick<ImageRecord, "id">) => `image:${i.id}`;

/** A new image's row, not ready, on node `nodeId` (its files are made there). */
function draftRecord(orgId: string, name: string, source: string, nodeId: string | null): ImageRecord {
  return {
    id: `img-${randomUUID()}`,
    orgId,
    name,
    source,
    environmentVersion: "",
    config: "{}",
    bytes: 0,
    ready: false,
    createdAt: new Date().toISOString(),
    supersededAt: null,
    nodeId,
  };
}

/**
 * Issue #18: organization images, crash-safe like templates (templates.ts): the row is written
 * first, not ready, then the files, then the flag; deleting clears the flag first, then removes the
 * files, then the row; the start's sweep removes rows that are not ready with whatever files they
 * have. An image is deleted only while no unit or template refers to it: units take their config
 * (env, user, working dir) from it at every boot. A name has builds: a finished build supersedes
 * the name's build until then, which stays (hidden) while units or templates use it, so that an
 * upgrade can compare a unit with the build it came from; `prune` removes it once nothing does.
 */
export class ImageWork {
  constructor(
    private readonly table: UnitTable,
    private readonly store: Store,
    private readonly runtime: UnitRuntime,
    private readonly log: Logger,
    /** Issue #15: this node's id (Lifecycle's `nodeId`). */
    private readonly nodeId?: string,
  ) {}

  /**
   * Imports the archive `body` streams as the organization's image `name`: ImageExistsError
   * (store) when the name is taken, ImageArchiveError for an archive ums cannot use; `progress`
   * tells of each layer once the archive is read.
   */
  async import(
    orgId: string,
    name: string,
    body: Readable,
    hooks: { progress: (message: string) => void; signal?: AbortSignal },
  ): Promise<ImageRecord> {
    const image = draftRecord(orgId, name, "", this.nodeId ?? null);
    await this.store.images.insert(image);
    try {
      return await this.table.mutex.run(lockOf(image), async () => {
        const made = await this.runtime.importImage(image.id, body, hooks.progress, hooks.signal);
        const ready: ImageRecord = {
          ...image,
          source: made.source,
          environmentVersion: `${name}@${image.id.slice(4, 16)}`,
          config: JSON.stringify(made.config),
          bytes: made.bytes,
          ready: true,
        };
        await this.superseding(await this.store.images.finish(ready));
        for (const s of made.skipped.slice(0, 20)) hooks.progress(`left out ${s.path}: ${s.reason}`);
        if (made.skipped.length > 20) hooks.progress(`left out ${made.skipped.length - 20} more entries`);
        return ready;
      });
    } catch (err) {
      await this.discard(image).catch((e: unknown) =>
        this.log.error({ err: e, imageId: image.id }, "removing a failed image import"),
      );
      throw err;
    }
  }

  /**
   * Builds the organization's image `recipe.name` from a recipe (issue #18): its draft (base image
   * with the recipe's packages, its files), then `steps` (the caller runs the recipe's steps in a
   * unit made from the draft with `fillDraft`, and names the checkpoint of it that becomes the
   * image), then read-only. Crash-safe like an import: the row is not ready until the end.
   */
  async build(
    orgId: string,
    recipe: ImageRecipe,
    source: string,
    hooks: {
      progress: (message: string) => void;
      signal?: AbortSignal;
      steps?: (draftId: string) => Promise<{ unitId: string; checkpoint: string }>;
    },
  ): Promise<ImageRecord> {
    const image = draftRecord(orgId, recipe.name, source, this.nodeId ?? null);
    await this.store.images.insert(image);
    try {
      return await this.table.mutex.run(lockOf(image), async () => {
        await this.runtime.draftRecipeImage(image.id, recipe, hooks.progress, hooks.signal);
        if (hooks.steps) {
          const made = await hooks.steps(image.id);
          await this.runtime.imageFromCheckpoint(image.id, made.unitId, made.checkpoint);
        }
        const sealed = await this.runtime.sealRecipeImage(image.id, recipe);
        const ready: ImageRecord = {
          ...image,
          environmentVersion: `${recipe.name}@${image.id.slice(4, 16)}`,
          config: JSON.stringify(sealed.config),
          bytes: sealed.bytes,
          ready: true,
        };
        await this.superseding(await this.store.images.finish(ready));
        return ready;
      });
    } catch (err) {
      await this.discard(image).catch((e: unknown) =>
        this.log.error({ err: e, imageId: image.id }, "removing a failed image build"),
      );
      throw err;
    }
  }

  /** Gives the unit that runs a recipe's steps a writable snapshot of the image's draft. */
  fillDraft(imageId: string, unit: UnitRecord): Promise<void> {
    return this.table.mutex.run(unit.id, () => {
      this.table.assertNotDeleted(unit);
      return this.runtime.create(unit.id, imageId);
    });
  }

  /** Deletes an image; ImageInUseError while units or templates refer to it. */
  delete(image: ImageRecord): Promise<void> {
    return this.table.mutex.run(lockOf(image), async () => {
      const users = await this.store.images.usedBy(image.id);
      if (users > 0) throw new ImageInUseError(image.name, users);
      await this.store.images.hide(image.id);
      await this.runtime.deleteImage(image.id);
      await this.store.images.delete(image.id);
    });
  }

  /** Gives a new unit a writable snapshot of the image, under the unit's lock then the image's. */
  fill(image: ImageRecord, unit: UnitRecord): Promise<void> {
    return this.table.mutex.run(unit.id, () => {
      this.table.assertNotDeleted(unit);
      return this.table.mutex.run(lockOf(image), async () => {
        const fresh = await this.store.images.get(image.orgId, image.name);
        if (fresh?.id !== image.id) throw new ImageGoneError(image.name);
        await this.runtime.create(unit.id, image.id);
      });
    });
  }

  /** Builds a newer one superseded: removed now unless units or templates use them (then by `prune`, later). */
  private async superseding(older: readonly string[]): Promise<void> {
    for (const id of older) {
      await this.pruneOne(id).catch((err: unknown) =>
        this.log.error({ err, imageId: id }, "removing an image build a newer one superseded"),
      );
    }
  }

  /**
   * Removes this node's superseded builds no unit or template uses any more (after a unit's delete
   * or upgrade, and at start); returns how many went. Another node's are its own to remove.
   */
  async prune(): Promise<number> {
    let removed = 0;
    for (const i of await this.store.images.superseded(this.nodeId)) {
      if (await this.pruneOne(i.id)) removed++;
    }
    return removed;
  }

  /** `prune` after a unit or template went or moved on: its failure is logged, the next one tries again. */
  async pruneQuietly(): Promise<void> {
    await this.prune().catch((err: unknown) => this.log.error({ err }, "removing superseded image builds failed"));
  }

  private pruneOne(id: string): Promise<boolean> {
    return this.table.mutex.run(lockOf({ id }), async () => {
      if ((await this.store.images.usedBy(id)) > 0) return false;
      const fresh = await this.store.images.getById(id);
      // A build of the name on another node (a newer one here superseded it) has its files there.
      if (!fresh || fresh.supersededAt === null || !onNode(fresh, this.nodeId)) return false;
      await this.discard(fresh);
      return true;
    });
  }

  private async discard(image: Pick<ImageRecord, "id">): Promise<void> {
    await this.runtime.deleteImage(image.id);
    await this.store.images.delete(image.id);
  }

  /**
   * At start: removes every image of this node that is not ready (a crash in its import or delete),
   * files and row. Another node's is left alone: its import or build may be under way.
   */
  async sweep(): Promise<number> {
    let removed = 0;
    for (const i of await this.store.images.all(this.nodeId)) {
      if (i.ready) continue;
      await this.discard(i);
      removed++;
    }
    if (removed > 0) this.log.info({ removed }, "removed images a crash left half-made or half-deleted");
    const pruned = await this.prune();
    if (pruned > 0) this.log.info({ pruned }, "removed superseded image builds no unit uses");
    return removed;
  }
}
