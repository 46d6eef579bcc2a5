import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { run } from "../exec/host-command.js";
import { firewallTable } from "./firewall.js";

/**
 * Replies to a unit's connections arrive on the host's uplink and are routed to the unit, which
 * the kernel does only when that interface forwards (ip-sysctl.rst, conf/<if>/forwarding; it is
 * the input interface that counts). ums turns forwarding on only on the uplinks given, only where
 * it is off, and remembers which (`uplinks.json`): on those its firewall forwards nothing but
 * replies of connections it masqueraded, so the host routes nothing else it did not route before.
 */
export async function enableUplinks(rid: string, dataDir: string, uplinks: readonly string[]): Promise<void> {
  const file = join(dataDir, "uplinks.json");
  let ours: string[] = [];
  try {
    ours = JSON.parse(await readFile(file, "utf8"));
  } catch {}
  for (const dev of uplinks) {
    const sysctl = `/proc/sys/net/ipv4/conf/${dev}/forwarding`;
    if (!/^[\w.-]{1,15}$/.test(dev) || !existsSync(sysctl)) continue;
    if ((await readFile(sysctl, "utf8")).trim() === "0") {
      await run("nft", ["add", "element", "inet", firewallTable(rid), "uplinks", `{ "${dev}" }`]);
      await writeFile(sysctl, "1");
      if (!ours.includes(dev)) ours.push(dev);
    }
  }
  for (const dev of ours) await run("nft", ["add", "element", "inet", firewallTable(rid), "uplinks", `{ "${dev}" }`]);
  if (ours.length > 0) await writeFile(file, JSON.stringify(ours));
}

/** The interfaces of the host's IPv4 default routes (read from the routing table; no packet is sent). */
export async function defaultUplinks(): Promise<string[]> {
  const { stdout } = await run("ip", ["-4", "-j", "route", "show", "default"]);
  const routes = JSON.parse(stdout || "[]") as { dev?: string }[];
  return [...new Set(routes.flatMap((r) => (r.dev ? [r.dev] : [])))];
}
