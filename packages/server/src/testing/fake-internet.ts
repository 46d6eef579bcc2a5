import { type ChildProcess, spawn } from "node:child_process";
import { rm } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { run } from "../runtime/exec/host-command.js";
import { linkNamespace } from "../runtime/network/veth.js";
import { tryPidLock } from "./pid-lock.js";

/**
 * A fake internet for network tests (issue #6): a network namespace the test creates, reached
 * from the host through a veth, holding a DNS server and HTTP servers at public-looking addresses
 * of the documentation ranges (RFC 5737 TEST-NET-2 198.51.100.0/24 for the link, TEST-NET-3
 * 203.0.113.0/24 for the servers). Each fixture takes a /28 slice of both (16 at most at once,
 * held by a lock file). Before anything else the slices are routed `unreachable` (high metric), so
 * if the fixture's route is missing no packet for them follows the host's default route; test
 * servers' units may reach nothing outside these ranges at all (testing/runtime.ts).
 */
export interface FakeInternet {
  /** `ip:port` of its DNS server, for `--dns-upstream`. */
  readonly dnsUpstream: string;
  readonly dnsIp: string;
  /** The address of each name it serves. */
  readonly hosts: Readonly<Record<string, string>>;
  /** An address with an HTTP server that no name resolves to. */
  readonly rawIp: string;
  /** The host's own address on the link (a "public" address of the host). */
  readonly hostLinkIp: string;
  /** Its network namespace (`ip netns exec` it to serve more at its addresses). */
  readonly netns: string;
  /** What its DNS server was asked, and how many /stream responses are open. */
  seen(): Promise<{ queries: { name: string; type: string }[]; streams: number }>;
  /**
   * Sets more DNS records (no HTTP server behind them; replacing those set before): name → answer
   * sets. The n-th query of a type for the name gets the n-th set, the last one repeating, so a
   * name can change its answer between two lookups (DNS rebinding). IPv4 addresses answer A
   * queries, IPv6 ones AAAA; TTL 0.
   */
  setRecords(records: Readonly<Record<string, readonly (readonly string[])[]>>): Promise<void>;
  close(): Promise<void>;
}

export interface FakeInternetOpts {
  readonly names: readonly string[];
  /** TTL of its DNS answers (default 30 s). */
  readonly ttlS?: number;
  /** Ports the names' HTTP servers listen on besides 80. */
  readonly httpPorts?: readonly number[];
}

const SLICES = 16;
const sliceLock = (k: number) => `/tmp/ums-fake-internet-${k}.lock`;

async function lockSlice(): Promise<{ k: number; unlock: () => Promise<void> }> {
  for (let attempt = 0; attempt < 200; attempt++) {
    for (let k = 0; k < SLICES; k++) {
      if (await tryPidLock(sliceLock(k))) return { k, unlock: () => rm(sliceLock(k), { force: true }) };
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error("no free fake internet slice");
}

export async function startFakeInternet(opts: FakeInternetOpts): Promise<FakeInternet> {
  const { k, unlock } = await lockSlice();
  const base = 16 * k;
  const linkNet = `198.51.100.${base}/28`;
  const serverNet = `203.0.113.${base}/28`;
  const hostLinkIp = `198.51.100.${base + 1}`;
  const nsLinkIp = `198.51.100.${base + 2}`;
  const ns = `ums-fakenet-${k}`;
  const hostIf = `umsfn${k}`;
  const dnsIp = `203.0.113.${base + 1}`;
  const rawIp = `203.0.113.${base + 2}`;
  if (opts.names.length > 11) throw new Error("the fake internet serves at most 11 names");
  const hosts = Object.fromEntries(opts.names.map((n, i) => [n.toLowerCase(), `203.0.113.${base + 3 + i}`]));
  let child: ChildProcess | undefined;

  const cleanup = async () => {
    if (child?.pid && child.exitCode === null) {
      const exited = new Promise((r) => child?.once("exit", r));
      child.kill("SIGKILL");
      await exited;
    }
    await run("ip", ["link", "del", hostIf]).catch(() => {});
    await run("ip", ["netns", "del", ns]).catch(() => {});
    for (const net of [serverNet, linkNet]) {
      await run("ip", ["route", "del", net]).catch(() => {});
      await run("ip", ["route", "del", "unreachable", net, "metric", "4000"]).catch(() => {});
    }
    await unlock();
  };

  try {
    await cleanup().catch(() => {}); // a leftover of a crashed run with this slice
    // The cleanup of a leftover removed the lock too: take it again.
    if (!(await tryPidLock(sliceLock(k)))) throw new Error(`fake internet slice ${k} was taken meanwhile`);
    for (const net of [linkNet, serverNet]) await run("ip", ["route", "add", "unreachable", net, "metric", "4000"]);
    await run("ip", ["netns", "add", ns]);
    await linkNamespace({
      netns: ns,
      hostIf,
      hostIp: hostLinkIp,
      nsIp: nsLinkIp,
      hostLines: [`route add ${serverNet} via ${nsLinkIp} dev ${hostIf} metric 100`],
      nsLines: [dnsIp, rawIp, ...Object.values(hosts)].map((ip) => `addr add ${ip}/32 dev lo`),
    });
    // Replies to units' (masqueraded) connections arrive here and are routed on to the unit.
    await run("sh", ["-c", `echo 1 > /proc/sys/net/ipv4/conf/${hostIf}/forwarding`]);
    const script = fileURLToPath(new URL("./fake-internet-server.js", import.meta.url));
    const serve = {
      dnsIp,
      ttlS: opts.ttlS ?? 30,
      hosts: { ...hosts, "raw.invalid": rawIp },
      ports: [80, ...(opts.httpPorts ?? [])],
    };
    const proc = spawn("ip", ["netns", "exec", ns, process.execPath, script, JSON.stringify(serve)], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    child = proc;
    await new Promise<void>((resolve, reject) => {
      proc.once("exit", (code) => reject(new Error(`fake internet exited with ${code}`)));
      proc.stdout?.on("data", (d: Buffer) => d.toString().includes("ready") && resolve());
    });
  } catch (err) {
    await cleanup();
    throw err;
  }
  return {
    dnsUpstream: `${dnsIp}:53`,
    dnsIp,
    hosts,
    rawIp,
    hostLinkIp,
    netns: ns,
    async seen() {
      const res = await fetch(`http://${dnsIp}:8053/`);
      return (await res.json()) as { queries: { name: string; type: string }[]; streams: number };
    },
    async setRecords(records) {
      const res = await fetch(`http://${dnsIp}:8053/records`, { method: "POST", body: JSON.stringify(records) });
      if (!res.ok) throw new Error(`fake internet: setting records answered ${res.status}`);
    },
    close: cleanup,
  };
}
