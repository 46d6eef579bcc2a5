import { existsSync } from "node:fs";
import { mkdir, readdir, rmdir } from "node:fs/promises";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { run } from "../exec/host-command.js";
import { type MountEntry, mountAt, readMounts } from "../storage/mounts.js";

/** Spec section 8: a unit sees its five most recent checkpoints, read-only, at /.unit/checkpoints. */
export const VISIBLE_CHECKPOINTS = 5;

/** Where the unit sees the view (oci-spec.ts binds `dir` there). */
const IN_UNIT = "/.unit/checkpoints";

/**
 * The native helper that makes a refresh's binds in one process (src/native/view-mount.c, built by
 * `npm run build:agent` into dist/native): without it, each checkpoint shown costs three runs of
 * mount(8) and four reads of the host's mount table (the fallback below, the same binds).
 */
export const VIEW_HELPER = fileURLToPath(new URL("../../native/ums-view", import.meta.url));

/** VIEW_HELPER when it was built, looked at once (a view is made for each operation on a unit). */
let builtHelper: string | null | undefined;
const helperIfBuilt = () => (builtHelper ??= existsSync(VIEW_HELPER) ? VIEW_HELPER : null);

/** `v12` → 12; the most recent checkpoints have the highest numbers. */
function seqOf(id: string): number {
  return /^v(\d+)$/.test(id) ? Number(id.slice(1)) : -1;
}

/** Whether a mountinfo entry's per-mount flags make it read-only. */
function readOnly(options: string): boolean {
  return options.split(",").includes("ro");
}

/**
 * The host side of /.unit/checkpoints: a directory in the unit's run dir, made a shared mount so
 * that binds of checkpoint snapshots made (and removed) here while the unit runs propagate into the
 * unit, whose mount of it is a slave (mount_namespaces(7), shared subtrees).
 *
 * Each bind is read-only from the moment it exists, so that what propagates into the unit is a
 * read-only mount too: a remount (what `mount --bind -o ro` does after its bind) changes only the
 * host's copy, never the copies already propagated. So a snapshot is first bound read-only in
 * `staging`, a private mount whose binds propagate nowhere, and that read-only mount is bound into
 * the view: a bind copies its source's mount flags. In the unit's user namespace the read-only flag
 * of a mount made by the host is locked: root there cannot remount it read-write.
 */
export class CheckpointView {
  constructor(
    /** The host directory bound at /.unit/checkpoints. */
    readonly dir: string,
    /** The unit's directory of checkpoint snapshots. */
    private readonly snapshots: string,
    /** A private mount in the unit's run dir (never seen by the unit) where binds are made read-only. */
    private readonly staging: string,
    /** A snapshot still being received (issue #15): not shown. */
    private readonly partial: (id: string) => boolean = () => false,
    /** The native helper (VIEW_HELPER when it was built), or null for mount(8). */
    private readonly helper: string | null = helperIfBuilt(),
  ) {}

  /** Makes the directory a shared mount point (idempotent) and shows the current checkpoints. */
  async prepare(): Promise<void> {
    await this.prepareMounts();
    await this.refresh();
  }

  /**
   * The view's shared mount point and the private staging mount, both empty (idempotent). A boot
   * makes them before the container and shows the checkpoints (refresh) once the container runs:
   * binds made then reach the unit by propagation, as a running unit's new checkpoints do, and
   * each is read-only from the start (see the class comment).
   */
  async prepareMounts(): Promise<void> {
    await Promise.all([this.selfBind(this.dir, "--make-shared"), this.prepareStaging()]);
  }

  private async prepareStaging(): Promise<void> {
    await this.selfBind(this.staging, "--make-private");
  }

  /** `dir` bound onto itself with the given propagation: one mount(8) run does both (util-linux >= 2.23). */
  private async selfBind(dir: string, propagation: "--make-shared" | "--make-private"): Promise<void> {
    await mkdir(dir, { recursive: true });
    if (!(await mountAt(dir))) await run("mount", ["--bind", propagation, dir, dir]);
  }

  /** Binds the five most recent snapshots and unbinds (and removes) the rest. */
  async refresh(): Promise<void> {
    const mounts = await readMounts();
    if (!mounts.some((m) => m.mountPoint === this.dir)) return; // the unit is not running: nothing to show
    let ids: string[] = [];
    try {
      ids = (await readdir(this.snapshots)).filter((id) => seqOf(id) >= 0 && !this.partial(id));
    } catch {}
    const want = new Set(ids.sort((a, b) => seqOf(b) - seqOf(a)).slice(0, VISIBLE_CHECKPOINTS));
    const mounted = new Set(
      mounts
        .map((m) => m.mountPoint)
        .filter((p) => p.startsWith(`${this.dir}/`))
        .map((p) => p.slice(this.dir.length + 1)),
    );
    const unwanted = (await readdir(this.dir)).filter((id) => !want.has(id));
    const shown = [...want].filter((id) => !mounted.has(id));
    if (this.helper) {
      // Names of the view's directory that are no checkpoint id (none is made here) take the slow way.
      const odd = unwanted.filter((id) => seqOf(id) < 0);
      for (const id of odd) await this.unbind(id, mounted.has(id));
      const ops = [...unwanted.filter((id) => seqOf(id) >= 0).map((id) => `-${id}`), ...shown.map((id) => `+${id}`)];
      // A view prepared by an older ums has no staging mount.
      if (shown.length > 0 && !mounts.some((m) => m.mountPoint === this.staging)) await this.prepareStaging();
      if (ops.length > 0) await run(this.helper, [this.snapshots, this.staging, this.dir, ...ops]);
      return;
    }
    for (const id of unwanted) await this.unbind(id, mounted.has(id));
    for (const id of shown) await this.show(id);
  }

  private async unbind(id: string, mounted: boolean): Promise<void> {
    if (mounted) await run("umount", ["-l", join(this.dir, id)]);
    await rmdir(join(this.dir, id)).catch(() => {});
  }

  /** Binds checkpoint `id` into the view, read-only from the start (see the class comment), with mount(8). */
  private async show(id: string): Promise<void> {
    await this.prepareStaging(); // a view prepared by an older ums has none
    const staged = join(this.staging, id);
    const target = join(this.dir, id);
    await mkdir(staged, { recursive: true });
    await mkdir(target, { recursive: true });
    try {
      // util-linux binds, then remounts the bind read-only: both happen in the private staging mount.
      await run("mount", ["--bind", "-o", "ro", join(this.snapshots, id), staged]);
      const source = await mountAt(staged);
      if (!source || !readOnly(source.options)) throw new Error(`the staged bind of checkpoint ${id} is not read-only`);
      await run("mount", ["--bind", staged, target]);
      const shown = await mountAt(target);
      if (!shown || !readOnly(shown.options)) {
        await run("umount", ["-l", target]).catch(() => {});
        throw new Error(`the bind of checkpoint ${id} at ${target} is not read-only`);
      }
    } finally {
      if (await mountAt(staged)) await run("umount", ["-l", staged]).catch(() => {});
      await rmdir(staged).catch(() => {});
    }
  }

  /**
   * Re-adoption (a unit that kept running while ums restarted): binds the unit sees read-write (made
   * by an older ums, which remounted only the host's copy read-only) are replaced by read-only ones.
   * `pid` is a process in the unit (its PID 1): its mountinfo is the unit's view of its mounts.
   */
  async reassert(pid: number): Promise<void> {
    if (!(await mountAt(this.dir))) return;
    let seen: MountEntry[];
    try {
      seen = await readMounts(`/proc/${pid}/mountinfo`);
    } catch {
      return; // it stopped meanwhile: its next boot prepares a new view
    }
    const writable = seen
      .filter((m) => m.mountPoint.startsWith(`${IN_UNIT}/`) && !readOnly(m.options))
      .map((m) => m.mountPoint.slice(IN_UNIT.length + 1))
      .filter((id) => seqOf(id) >= 0);
    for (const id of new Set(writable)) {
      const target = join(this.dir, id);
      // An unmount propagates to the unit's slave copy; refresh then binds a read-only one.
      while (await mountAt(target)) await run("umount", ["-l", target]);
    }
    await this.refresh();
  }

  /** Unbinds one checkpoint (before its snapshot is deleted: a mounted subvolume cannot be). */
  async hide(id: string): Promise<void> {
    const path = join(this.dir, id);
    if (this.helper && seqOf(id) >= 0) {
      if (existsSync(path)) await run(this.helper, [this.snapshots, this.staging, this.dir, `-${id}`]);
      return;
    }
    if (await mountAt(path)) await run("umount", ["-l", path]);
    await rmdir(path).catch(() => {});
  }

  /** Unbinds everything (the unit stopped). */
  async teardown(): Promise<void> {
    const mounts = (await readMounts())
      .map((m) => m.mountPoint)
      .filter((p) => [this.dir, this.staging].some((d) => p === d || p.startsWith(`${d}/`)));
    // One umount run for all (deepest first); it goes on past a mount that fails, as the old loop did.
    if (mounts.length > 0) await run("umount", ["-l", ...mounts.sort((a, b) => b.length - a.length)]).catch(() => {});
    for (const d of [this.dir, this.staging]) {
      if (!existsSync(d)) continue;
      for (const id of await readdir(d).catch(() => [] as string[])) await rmdir(join(d, id)).catch(() => {});
    }
  }
}
