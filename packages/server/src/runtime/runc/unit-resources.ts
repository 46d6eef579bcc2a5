import { run } from "../exec/host-command.js";
import type { ResourceLimits, ResourcesPolicy } from "../runtime.js";
import { cfsQuota, unitsCpuBudget } from "./cpu-share.js";

/** A unit's memory, pids, CPU and disk limits: its resources policy, the server's defaults where it names none. */
export class UnitResources {
  constructor(
    private readonly defaults: {
      readonly memoryBytes: number;
      readonly pids: number;
      readonly cpuCores: number;
      readonly diskBytes: number;
    },
    /** The host's cores: units share all but half of one (cpu-share.ts). */
    private readonly hostCores: number,
  ) {}

  limits(): ResourceLimits {
    return {
      defaults: {
        memory: { limit_mb: Math.round(this.defaults.memoryBytes / (1024 * 1024)) },
        pids: { limit: this.defaults.pids },
        cpu: { cores: this.defaults.cpuCores },
        disk: { limit_mb: Math.round(this.defaults.diskBytes / (1024 * 1024)) },
      },
      maxCpuCores: unitsCpuBudget(this.hostCores),
    };
  }

  memoryBytes(r: ResourcesPolicy): number {
    return r.memory ? r.memory.limit_mb * 1024 * 1024 : this.defaults.memoryBytes;
  }

  diskBytes(r: ResourcesPolicy): number {
    return r.disk ? r.disk.limit_mb * 1024 * 1024 : this.defaults.diskBytes;
  }

  pids(r: ResourcesPolicy): number {
    return r.pids?.limit ?? this.defaults.pids;
  }

  /** A policy above what units may use now (fewer cores than when it was set) gets all of it. */
  cpuCores(r: ResourcesPolicy): number {
    return Math.min(r.cpu?.cores ?? this.defaults.cpuCores, unitsCpuBudget(this.hostCores));
  }

  /** The CFS quota of `cpuCores`. */
  cpu(r: ResourcesPolicy): { quota: number; period: number } {
    return cfsQuota(this.cpuCores(r));
  }

  /** `runc update` of a running container; false when the kernel refuses (the limits wait for the next boot). */
  async apply(runcRoot: string, id: string, r: ResourcesPolicy): Promise<boolean> {
    const mem = this.memoryBytes(r);
    const cpu = this.cpu(r);
    try {
      await run("runc", [
        "--root",
        runcRoot,
        "update",
        "--memory",
        String(mem),
        "--memory-swap",
        String(mem),
        "--pids-limit",
        String(this.pids(r)),
        "--cpu-period",
        String(cpu.period),
        "--cpu-quota",
        String(cpu.quota),
        id,
      ]);
      return true;
    } catch {
      // Lowering a memory limit below current use is refused by the kernel: it applies at next boot.
      return false;
    }
  }
}
