import { join } from "node:path";
import { CheckpointView } from "./checkpoint-view.js";

/**
 * Where a unit's pieces live on the host: its disk on the pool (`units/<id>`: rootfs, checkpoint
 * snapshots, the restore journal), its run dir in the data dir (`run/<id>`: bundle, sockets, the
 * files it sees at /.unit) and its cgroup below this server's parent cgroups.
 */
export class UnitPaths {
  constructor(
    private readonly dataDir: string,
    private readonly poolDir: string,
    private readonly rid: string,
  ) {}

  /** Every unit's disk directory is in here. */
  get unitsDir(): string {
    return join(this.poolDir, "units");
  }
  /** Every unit's run dir is in here. */
  get runRoot(): string {
    return join(this.dataDir, "run");
  }
  /** runc's state root: `runc list` shows only this server's containers. */
  get runcRoot(): string {
    return join(this.dataDir, "runc");
  }

  unitDir(id: string): string {
    return join(this.unitsDir, id);
  }
  rootfs(id: string): string {
    return join(this.unitDir(id), "rootfs");
  }
  checkpointsDir(id: string): string {
    return join(this.unitDir(id), "checkpoints");
  }
  checkpoint(id: string, cpId: string): string {
    return join(this.checkpointsDir(id), cpId);
  }

  runDir(id: string): string {
    return join(this.runRoot, id);
  }
  /** What the unit sees at /.unit/run: owned by host root, bound read-only (see oci-spec.ts). */
  exposedDir(id: string): string {
    return join(this.runDir(id), "exposed");
  }
  /** Host-owned, never visible in the unit: the host binds it and hands the unit the descriptor. */
  agentSocket(id: string): string {
    return join(this.runDir(id), "agent.sock");
  }
  /** In the host-owned directory the unit sees read-only at /.unit/run: ums's socket for the unit's internal API calls. */
  hostSocket(id: string): string {
    return join(this.exposedDir(id), "host.sock");
  }
  checkpointView(id: string): CheckpointView {
    return new CheckpointView(join(this.runDir(id), "checkpoints"), this.checkpointsDir(id));
  }

  /** The unit's cgroup path (the same below every v1 controller). */
  cgroup(id: string): string {
    return `/ums-${this.rid}/${id}`;
  }
}
