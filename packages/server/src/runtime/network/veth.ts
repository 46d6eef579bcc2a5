import { run } from "../exec/host-command.js";

export interface VethLink {
  /** An existing network namespace: its end of the pair is `eth0`. */
  readonly netns: string;
  /** The host end's name (at most 15 bytes, IFNAMSIZ - 1). */
  readonly hostIf: string;
  readonly hostIp: string;
  readonly nsIp: string;
  /** More `ip -batch` lines for the host side, run after its end is up. */
  readonly hostLines?: readonly string[];
  /** More `ip -batch` lines inside the namespace, run after its default route is in place. */
  readonly nsLines?: readonly string[];
}

/**
 * Joins a network namespace to the host with a veth pair: `hostIf` outside and `eth0` inside, a
 * /30 between them, and the namespace's default route leading to the host (ip-link(8), veth).
 */
export async function linkNamespace(link: VethLink): Promise<void> {
  const { netns, hostIf, hostIp, nsIp } = link;
  await run("ip", ["-batch", "-"], {
    input: [
      `link add ${hostIf} type veth peer name eth0 netns ${netns}`,
      `addr add ${hostIp}/30 dev ${hostIf}`,
      `link set ${hostIf} up`,
      ...(link.hostLines ?? []),
    ].join("\n"),
  });
  await run("ip", ["-n", netns, "-batch", "-"], {
    input: [
      "link set lo up",
      `addr add ${nsIp}/30 dev eth0`,
      "link set eth0 up",
      `route add default via ${hostIp}`,
      ...(link.nsLines ?? []),
    ].join("\n"),
  });
}
