import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { readFile, writeFile } from "node:fs/promises";
import { createRequire } from "node:module";
import { dirname, join, resolve } from "node:path";
import type { Logger } from "pino";
import { buildImage } from "./image/build.js";
import { defaultImageName, type ImageVariant } from "./image/packages.js";
import { UID_RANGE, UID_SHIFT } from "./image/shift.js";
import { parseSubnet } from "./network/addresses.js";
import { defaultUplinks } from "./network/uplinks.js";
import type { UnitEgressOptions } from "./runc/config.js";
import { RuncRuntime } from "./runc/runc-runtime.js";
import type { UnitRuntime } from "./runtime.js";
import { openPool } from "./storage/pool.js";

export interface HostRuntimeOptions extends UnitEgressOptions {
  readonly dataDir: string;
  readonly poolDevice?: string | undefined;
  readonly unitSubnet: string;
  readonly imageVariant?: ImageVariant;
  /** Use an already mounted pool (the test suite shares one) instead of `<dataDir>/pool`. */
  readonly poolDir?: string | undefined;
  /** A unit's limits where its resources policy names none (`ums serve --unit-pids`, `--unit-cpu`). */
  readonly unitDefaults: { readonly pids: number; readonly cpuCores: number; readonly diskMb: number };
  /** Aborting stops an image build in progress and cleans it up. */
  readonly signal?: AbortSignal;
}

/** The host pieces a unit needs from outside: node, catatonit, the agent bundle and node-pty. */
export function hostPaths(): { node: string; init: string; agentDir: string; nodePty?: string; preload?: string } {
  const require = createRequire(import.meta.url);
  const agentDir = join(dirname(require.resolve("@ums/agent/package.json")), "dist");
  if (!existsSync(join(agentDir, "agent.cjs"))) {
    throw new Error(`the unit agent is not built (${agentDir}/agent.cjs); run 'npm run build:agent'`);
  }
  const init = ["/usr/bin/catatonit", "/usr/libexec/podman/catatonit"].find((p) => existsSync(p));
  if (!init) throw new Error("catatonit is not installed (apt-get install catatonit)");
  let nodePty: string | undefined;
  try {
    nodePty = dirname(createRequire(join(agentDir, "..", "package.json")).resolve("node-pty/package.json"));
  } catch {}
  // The agent build's statfs library (a unit's `df` shows its disk) when the host could compile it.
  const preload = join(agentDir, "ld.so.preload");
  const withPreload = existsSync(preload) && existsSync(join(agentDir, "libums-statfs.so"));
  return { node: process.execPath, init, agentDir, ...(nodePty && { nodePty }), ...(withPreload && { preload }) };
}

/** A few hex characters naming this data dir's host resources, kept across restarts. */
export async function runtimeId(dataDir: string): Promise<string> {
  const file = join(dataDir, "runtime-id");
  try {
    const rid = (await readFile(file, "utf8")).trim();
    if (/^[0-9a-f]{4}$/.test(rid)) return rid;
  } catch {}
  const rid = randomBytes(2).toString("hex");
  await writeFile(file, `${rid}\n`);
  return rid;
}

/** Opens the pool, builds (or finds) the base image and starts the runc runtime. */
export async function openHostRuntime(opts: HostRuntimeOptions, log: Logger): Promise<UnitRuntime> {
  if (process.getuid?.() !== 0) throw new Error("ums serve runs units and must run as root");
  const variant = opts.imageVariant ?? "full";
  const poolDir =
    opts.poolDir ??
    (await openPool({ dataDir: opts.dataDir, ...(opts.poolDevice && { device: opts.poolDevice }) })).path;
  let lastPercent = -1;
  const imagePath = await buildImage({
    pool: poolDir,
    name: defaultImageName(variant),
    variant,
    ...(opts.signal && { signal: opts.signal }),
    onProgress: (p) => {
      const pct = p.percent === undefined ? undefined : Math.floor(p.percent);
      if (p.step === "bootstrap" && pct !== undefined && pct === lastPercent) return;
      if (pct !== undefined) lastPercent = pct;
      log.info({ step: p.step, percent: pct }, `image: ${p.message}`);
    },
  });
  const rt = await RuncRuntime.open({
    dataDir: resolve(opts.dataDir),
    poolDir,
    imagePath,
    rid: await runtimeId(opts.dataDir),
    subnet: parseSubnet(opts.unitSubnet),
    hostPaths: hostPaths(),
    idShift: UID_SHIFT,
    idCount: UID_RANGE,
    defaultMemoryBytes: 2 * 1024 ** 3,
    defaultPids: opts.unitDefaults.pids,
    defaultCpuCores: opts.unitDefaults.cpuCores,
    defaultDiskBytes: opts.unitDefaults.diskMb * 1024 ** 2,
    bootTimeoutMs: 15_000,
    gatewayPort: opts.gatewayPort,
    egressRanges: opts.egressRanges,
    uplinks: opts.uplinks ?? (await defaultUplinks()),
  });
  if (rt.keyQuota.raised.length > 0)
    log.info(
      { raised: rt.keyQuota.raised },
      "raised the kernel's key quota for the units' host uid (one key per running unit)",
    );
  if (rt.keyQuota.error) log.warn({ err: rt.keyQuota.error }, "the kernel's key quota is low for many units");
  if (rt.quotaError) {
    log.warn(
      { err: rt.quotaError },
      "units' disk limits are not enforced: simple btrfs quotas could not be switched on for the pool (kernel 6.7 or later and python3 are needed)",
    );
  }
  return rt;
}
