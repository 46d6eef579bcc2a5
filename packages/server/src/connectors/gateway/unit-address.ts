import { readdir, readFile } from "node:fs/promises";
import { join } from "node:path";
import type { UnitRuntime } from "../../runtime/runtime.js";

interface Link {
  readonly unitId: string;
  readonly unitIp: string;
  readonly hostIp: string;
}

const plain = (ip: string | undefined) => (ip ?? "").replace(/^::ffff:/i, "");

/**
 * Which unit a gateway request comes from (issue #7): its source address must be the address of a
 * unit this server runs, and it must arrive at that unit's own gateway address (the host end of
 * its veth /30). Read from the runtime's per-unit `run/<id>/network.json` records and checked
 * against the runtime's live view on every hit, so a slot handed to another unit is never
 * mistaken for the old one. (The network feature makes the source address unspoofable.)
 */
export class GatewayUnitAddressBook {
  private byIp = new Map<string, Link>();
  private rebuilding: Promise<void> | undefined;
  private lastBuild = 0;

  constructor(
    private readonly runtime: UnitRuntime,
    private readonly dataDir: string,
    private readonly minRebuildMs = 50,
  ) {}

  async unitIdByAddress(remoteIp: string | undefined, localIp: string | undefined): Promise<string | undefined> {
    const ip = plain(remoteIp);
    if (!ip) return undefined;
    let link = this.live(ip);
    if (!link) {
      await this.rebuild();
      link = this.live(ip);
    }
    return link && link.hostIp === plain(localIp) ? link.unitId : undefined;
  }

  private live(ip: string): Link | undefined {
    const link = this.byIp.get(ip);
    return link && this.runtime.address(link.unitId) === ip ? link : undefined;
  }

  private rebuild(): Promise<void> {
    this.rebuilding ??= (async () => {
      const wait = this.lastBuild + this.minRebuildMs - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const next = new Map<string, Link>();
      const run = join(this.dataDir, "run");
      const ids = await readdir(run).catch(() => [] as string[]);
      await Promise.all(
        ids.map(async (unitId) => {
          try {
            const net = JSON.parse(await readFile(join(run, unitId, "network.json"), "utf8"));
            if (typeof net.unitIp === "string" && typeof net.hostIp === "string") {
              next.set(net.unitIp, { unitId, unitIp: net.unitIp, hostIp: net.hostIp });
            }
          } catch {}
        }),
      );
      this.byIp = next;
      this.lastBuild = Date.now();
    })().finally(() => {
      this.rebuilding = undefined;
    });
    return this.rebuilding;
  }
}
