import { join } from "node:path";
import { CheckpointView } from "./checkpoint-view.js";

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
    dataDir: string,
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

  /** The host side of the unit's /.unit/checkpoints (checkpoint-view.ts). */
  checkpointView(id: string): CheckpointView {
    const unit = this.unit(id);
    return new CheckpointView(join(unit.run, "checkpoints"), unit.checkpoints, join(unit.run, "checkpoints-staging"));
  }
}
