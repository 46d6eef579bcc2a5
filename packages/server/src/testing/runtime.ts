import { randomBytes } from "node:crypto";
import { rm } from "node:fs/promises";
import { DEFAULT_UNIT_CPU, DEFAULT_UNIT_DISK_MB, DEFAULT_UNIT_PIDS } from "../config.js";
import { hostPaths } from "../runtime/host.js";
import { UID_RANGE, UID_SHIFT } from "../runtime/image/shift.js";
import { type TestImage, testImage } from "../runtime/image/test-image.js";
import { parseSubnet } from "../runtime/network/addresses.js";
import { readHostNetwork, subnetConflicts } from "../runtime/network/conflicts.js";
import { removeFirewall } from "../runtime/network/firewall.js";
import { unguardSubnet } from "../runtime/network/subnet-guard.js";
import { removeCgroups } from "../runtime/runc/cgroups.js";
import { RuncRuntime } from "../runtime/runc/runc-runtime.js";
import { tryPidLock } from "./pid-lock.js";

/**
 * A real runc runtime for a test server: the shared test image and pool, and host resources of
 * its own (runtime id, a /24 of 10.210.0.0/16 held by a lock file) so test files can run at once.
 */
export interface TestRuntime {
  readonly runtime: RuncRuntime;
  readonly rid: string;
  /** Removes what the runtime put on the host (firewall table, subnet lock). Units are destroyed by the caller. */
  release(): Promise<void>;
}

/**
 * Test servers take /24s of 10.210.0.0/16, next to (not inside) the default unit subnet
 * 10.209.0.0/16: a `ums serve` run with the defaults on the same host (or the table it left,
 * kept so its units survive a restart) does not stop the suite.
 */
export function testSubnet(n: number): string {
  return `10.210.${n}.0/24`;
}

/**
 * A test subnet of this process's own, held by a lock file, that nothing on the host uses (no
 * route, no other ums server's table: conflicts.ts). Throws, naming what is in the way, when the
 * host has none left.
 */
export async function lockSubnet(): Promise<{ n: number; unlock: () => Promise<void> }> {
  const start = randomBytes(1)[0] ?? 0;
  let inTheWay: string[] = [];
  for (let i = 0; i < 256; i++) {
    const n = (start + i) % 256;
    const file = `/tmp/ums-test-subnet-${n}.lock`;
    if (await tryPidLock(file)) {
      // A test killed before its cleanup leaves its units' routes behind, its lock with a dead pid;
      // a server run with a subnet around this one leaves its table: either way it is not free.
      const conflicts = subnetConflicts("-", parseSubnet(testSubnet(n)), await readHostNetwork());
      if (conflicts.length > 0) {
        if (inTheWay.length === 0) inTheWay = conflicts;
        await rm(file, { force: true });
        continue;
      }
      return {
        n,
        // The subnet's `unreachable` route goes with it (whoever ran a server on it added it).
        unlock: async () => {
          await unguardSubnet(parseSubnet(testSubnet(n)));
          await rm(file, { force: true });
        },
      };
    }
  }
  throw new Error(
    `no free test subnet in 10.210.0.0/16 on this host${inTheWay.length ? `: ${inTheWay.join("; ")}` : " (all 256 are locked by running tests)"}`,
  );
}

/**
 * Issue #16: `count` (2, 4, …) consecutive test subnets, aligned, as one subnet of this process's
 * own (`10.210.<n>.0/<24 - log2 count>`, 64 units per /24) for a bench that runs more than 64 units
 * at once. Each /24 is held by its lock file as `lockSubnet` holds one. Throws when none is free.
 */
export async function lockSubnetRange(count: number): Promise<{ subnet: string; unlock: () => Promise<void> }> {
  const bits = Math.log2(count);
  if (!Number.isInteger(bits) || bits < 1 || bits > 6)
    throw new Error(`lockSubnetRange: ${count} is not 2 to 64, a power of 2`);
  const start = ((randomBytes(1)[0] ?? 0) >> bits) << bits;
  for (let i = 0; i < 256; i += count) {
    const first = (start + i) % 256;
    const held: string[] = [];
    for (let n = first; n < first + count; n++) {
      const file = `/tmp/ums-test-subnet-${n}.lock`;
      if (!(await tryPidLock(file))) break;
      held.push(file);
    }
    const subnet = `10.210.${first}.0/${24 - bits}`;
    const free =
      held.length === count && subnetConflicts("-", parseSubnet(subnet), await readHostNetwork()).length === 0;
    if (free) {
      return {
        subnet,
        unlock: async () => {
          await unguardSubnet(parseSubnet(subnet));
          for (const file of held) await rm(file, { force: true });
        },
      };
    }
    for (const file of held) await rm(file, { force: true });
  }
  throw new Error(`no ${count} free consecutive test subnets in 10.210.0.0/16 on this host`);
}

/**
 * The public ranges units of test servers may reach at all: the fake internet's (TEST-NET-2 and
 * TEST-NET-3, RFC 5737), which only exist as namespaces tests create. Nothing else leaves a unit.
 */
export const TEST_EGRESS_RANGES = ["198.51.100.0/24", "203.0.113.0/24"] as const;

/**
 * The environment of every `ums serve` a test or bench starts: units reach only the fake internet's
 * ranges, the host's uplinks are left alone, and DNS goes to a loopback port where nothing answers
 * unless the test points it at its fake resolver.
 */
export const TEST_NETWORK_ENV: Readonly<Record<string, string>> = Object.freeze({
  UMS_EGRESS_RANGES: TEST_EGRESS_RANGES.join(","),
  UMS_UPLINKS: "none",
  UMS_DNS_UPSTREAM: "127.0.0.1:9",
});

export interface TestRuntimeOpts {
  readonly gatewayPort?: number;
  /** The server's unit limits (its config's `unitDefaults`); default: those of `ums serve`. */
  readonly unitDefaults?: { readonly pids: number; readonly cpuCores: number; readonly diskMb?: number };
  /** A pool of the test's own (its path, and the image in it) instead of the shared test pool. */
  readonly pool?: { readonly path: string; readonly imagePath: string };
}

export async function openTestRuntime(dataDir: string, opts: TestRuntimeOpts = {}): Promise<TestRuntime> {
  const image = opts.pool ? undefined : await testImage();
  const rid = randomBytes(2).toString("hex");
  const subnet = await lockSubnet();
  const runtime = await RuncRuntime.open({
    dataDir,
    poolDir: opts.pool?.path ?? (image as TestImage).pool.path,
    imagePath: opts.pool?.imagePath ?? (image as TestImage).path,
    rid,
    subnet: parseSubnet(testSubnet(subnet.n)),
    hostPaths: hostPaths(),
    idShift: UID_SHIFT,
    idCount: UID_RANGE,
    defaultMemoryBytes: 512 * 1024 ** 2,
    defaultPids: opts.unitDefaults?.pids ?? DEFAULT_UNIT_PIDS,
    defaultCpuCores: opts.unitDefaults?.cpuCores ?? DEFAULT_UNIT_CPU,
    defaultDiskBytes: (opts.unitDefaults?.diskMb ?? DEFAULT_UNIT_DISK_MB) * 1024 ** 2,
    bootTimeoutMs: 20_000,
    gatewayPort: opts.gatewayPort ?? 7071,
    egressRanges: TEST_EGRESS_RANGES,
    uplinks: [],
  });
  return {
    runtime,
    rid,
    async release() {
      await runtime.close(); // its long-lived nft process, or the test process never exits
      await removeFirewall(rid);
      await removeCgroups(rid);
      await subnet.unlock();
    },
  };
}
