import { existsSync } from "node:fs";
import { mkdir, readdir, rmdir } from "node:fs/promises";
import { join } from "node:path";
import { run } from "../exec/host-command.js";
import { mountAt, readMounts } from "../storage/mounts.js";

/** Spec section 8: a unit sees its five most recent checkpoints, read-only, at /.unit/checkpoints. */
export const VISIBLE_CHECKPOINTS = 5;

/** `v12` → 12; the most recent checkpoints have the highest numbers. */
function seqOf(id: string): number {
  return /^v(\d+)$/.test(id) ? Number(id.slice(1)) : -1;
}

/**
 * The host side of /.unit/checkpoints: a directory in the unit's run dir, made a shared mount so
 * that read-only binds of checkpoint snapshots made (and removed) here while the unit runs
 * propagate into the unit, whose mount of it is a slave (mount_namespaces(7), shared subtrees).
 */
export class CheckpointView {
  constructor(
    /** The host directory bound at /.unit/checkpoints. */
    readonly dir: string,
    /** The unit's directory of checkpoint snapshots. */
    private readonly snapshots: string,
  ) {}

  /** Makes the directory a shared mount point (idempotent) and shows the current checkpoints. */
  async prepare(): Promise<void> {
    await mkdir(this.dir, { recursive: true });
    if (!(await mountAt(this.dir))) {
      await run("mount", ["--bind", this.dir, this.dir]);
      await run("mount", ["--make-shared", this.dir]);
    }
    await this.refresh();
  }

  /** Binds the five most recent snapshots and unbinds (and removes) the rest. */
  async refresh(): Promise<void> {
    if (!(await mountAt(this.dir))) return; // the unit is not running: nothing to show
    let ids: string[] = [];
    try {
      ids = (await readdir(this.snapshots)).filter((id) => seqOf(id) >= 0);
    } catch {}
    const want = new Set(ids.sort((a, b) => seqOf(b) - seqOf(a)).slice(0, VISIBLE_CHECKPOINTS));
    const mounted = new Set(
      (await readMounts())
        .map((m) => m.mountPoint)
        .filter((p) => p.startsWith(`${this.dir}/`))
        .map((p) => p.slice(this.dir.length + 1)),
    );
    for (const id of await readdir(this.dir)) {
      if (want.has(id)) continue;
      if (mounted.has(id)) await run("umount", ["-l", join(this.dir, id)]);
      await rmdir(join(this.dir, id)).catch(() => {});
    }
    for (const id of want) {
      if (mounted.has(id)) continue;
      await mkdir(join(this.dir, id), { recursive: true });
      // The snapshot is a read-only subvolume: writes fail with EROFS whatever the bind's flags.
      await run("mount", ["--bind", "-o", "ro", join(this.snapshots, id), join(this.dir, id)]);
    }
  }

  /** Unbinds one checkpoint (before its snapshot is deleted: a mounted subvolume cannot be). */
  async hide(id: string): Promise<void> {
    const path = join(this.dir, id);
    if (await mountAt(path)) await run("umount", ["-l", path]);
    await rmdir(path).catch(() => {});
  }

  /** Unbinds everything (the unit stopped). */
  async teardown(): Promise<void> {
    const mounts = (await readMounts())
      .map((m) => m.mountPoint)
      .filter((p) => p === this.dir || p.startsWith(`${this.dir}/`));
    for (const p of mounts.sort((a, b) => b.length - a.length)) await run("umount", ["-l", p]).catch(() => {});
    if (existsSync(this.dir)) {
      for (const id of await readdir(this.dir).catch(() => [] as string[]))
        await rmdir(join(this.dir, id)).catch(() => {});
    }
  }
}
