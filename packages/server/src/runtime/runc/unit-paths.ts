import { existsSync } from "node:fs";
import { join } from "node:path";
import { CheckpointView } from "./checkpoint-view.js";

const RECEIVING = "receiving.";

/** Where one unit's pieces live on the host. */
export interface UnitLayout {
  /** Its disk directory on the pool: rootfs, checkpoint snapshots, the restore journal. */
  readonly disk: string;
  readonly rootfs: string;
  /** Its checkpoint snapshots, one read-only subvolume each. */
  readonly checkpoints: string;
  /** Its run dir in the data dir: bundle, logs, the files it sees at /.unit. */
  readonly run: string;
  /** What the unit sees at /.unit/run: owned by host root, bound read-only (see oci-spec.ts). */
  readonly exposed: string;
  /** Host-owned, never visible in the unit: the host binds it and hands the unit the descriptor. */
  readonly agentSocket: string;
  /** In `exposed`: where ums listens for the unit's internal API calls (the agent forwards them). */
  readonly hostSocket: string;
  /** Its cgroup path (the same below every v1 controller). */
  readonly cgroup: string;
}

/**
 * The host paths of this server's units: disks on the pool (`units/<id>`), run dirs in the data dir
 * (`run/<id>`) and cgroups below this server's parent cgroups (`/ums-<rid>`).
 */
export class UnitPaths {
  /** Every unit's disk directory is in here. */
  readonly unitsDir: string;
  /** Every unit's run dir is in here. */
  readonly runRoot: string;
  /** runc's state root: `runc list` shows only this server's containers. */
  readonly runcRoot: string;

  constructor(
    /** The server's data dir. */
    readonly dataDir: string,
    poolDir: string,
    /** This server's runtime id (its data dir's `runtime-id`). */
    readonly rid: string,
  ) {
    this.unitsDir = join(poolDir, "units");
    this.runRoot = join(dataDir, "run");
    this.runcRoot = join(dataDir, "runc");
  }

  unit(id: string): UnitLayout {
    const disk = join(this.unitsDir, id);
    const run = join(this.runRoot, id);
    return {
      disk,
      rootfs: join(disk, "rootfs"),
      checkpoints: join(disk, "checkpoints"),
      run,
      exposed: join(run, "exposed"),
      agentSocket: join(run, "agent.sock"),
      hostSocket: join(run, "exposed", "host.sock"),
      cgroup: `/ums-${this.rid}/${id}`,
    };
  }

  /** Checkpoint `cpId`'s snapshot. */
  checkpoint(id: string, cpId: string): string {
    return join(this.unit(id).checkpoints, cpId);
  }

  /**
   * Issue #15: the mark of checkpoint `cpId` being received (from the object store or another
   * node), in the unit's disk dir (host-only), written before the receive and removed once it is
   * whole. A snapshot with its mark is partial: not a checkpoint here (`hasCheckpoint`), never shown
   * to the unit, and removed at the next start (a crash mid-receive leaves one writable and half full).
   */
  receivingMark(id: string, cpId: string): string {
    return join(this.unit(id).disk, `${RECEIVING}${this.rid}.${cpId}`);
  }

  /**
   * Received snapshots that are whole, whose mark waits for their files to reach the disk
   * (`<unit id>/<checkpoint>`; runc-runtime.ts `receiving`): checkpoints already, in this process.
   */
  readonly whole = new Set<string>();

  /** Whether the unit's snapshot of `cpId` is one still being received (or, after a crash, one that never was whole). */
  isPartial(id: string, cpId: string): boolean {
    return existsSync(this.receivingMark(id, cpId)) && !this.whole.has(`${id}/${cpId}`);
  }

  /** Checkpoints of the unit that this server had begun to receive and did not finish (receivingMark). */
  receivingIn(names: readonly string[]): string[] {
    const prefix = `${RECEIVING}${this.rid}.`;
    return names.filter((n) => n.startsWith(prefix)).map((n) => n.slice(prefix.length));
  }

  /** The host side of the unit's /.unit/checkpoints (checkpoint-view.ts). */
  checkpointView(id: string): CheckpointView {
    const unit = this.unit(id);
    return new CheckpointView(
      join(unit.run, "checkpoints"),
      unit.checkpoints,
      join(unit.run, "checkpoints-staging"),
      (cpId) => this.isPartial(id, cpId),
    );
  }
}
