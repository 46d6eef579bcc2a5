import { existsSync } from "node:fs";
import { readFile, statfs } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { run } from "../runtime/exec/host-command.js";
import { parseSubnet } from "../runtime/network/addresses.js";
import { readHostNetwork, subnetConflicts } from "../runtime/network/conflicts.js";
import { canRaiseKeyQuota, KEY_QUOTA, keyQuotaShortfall, readKeyQuota } from "../runtime/runc/key-quota.js";

export interface Check {
  readonly name: string;
  readonly ok: boolean;
  /** What was found. */
  readonly detail: string;
  /** What to do about a failure. */
  readonly fix?: string;
  /** A warning does not fail the doctor. */
  readonly warning?: boolean;
}

export interface DoctorOpts {
  readonly dataDir: string;
  readonly unitSubnet: string;
}

const GiB = 2 ** 30;

async function which(tool: string): Promise<string | undefined> {
  return run("sh", ["-c", `command -v ${tool}`]).then(
    (r) => r.stdout.trim() || undefined,
    () => undefined,
  );
}

/**
 * Issue #20 part 7: `ums doctor` checks what `ums serve` needs of this host and says what to fix.
 * Every check reads only (no packet is sent, nothing is changed).
 */
export async function doctor(o: DoctorOpts): Promise<Check[]> {
  const checks: Check[] = [];
  const add = (c: Check) => checks.push(c);

  add(
    process.getuid?.() === 0
      ? { name: "root", ok: true, detail: "running as root" }
      : { name: "root", ok: false, detail: "not root", fix: "run ums serve (and ums doctor) as root" },
  );

  const userns = Number((await readFile("/proc/sys/user/max_user_namespaces", "utf8").catch(() => "0")).trim());
  add(
    userns > 0
      ? { name: "user namespaces", ok: true, detail: `max_user_namespaces = ${userns}` }
      : {
          name: "user namespaces",
          ok: false,
          detail: "user namespaces are off",
          fix: "sysctl -w user.max_user_namespaces=15000 (and in /etc/sysctl.d/)",
        },
  );

  const short = keyQuotaShortfall(await readKeyQuota());
  add(
    short.length === 0
      ? { name: "key quota", ok: true, detail: `kernel.keys.maxkeys >= ${KEY_QUOTA.maxkeys}` }
      : (await canRaiseKeyQuota())
        ? { name: "key quota", ok: true, detail: `low (${short.join(", ")}); ums serve raises it at start` }
        : {
            name: "key quota",
            ok: false,
            detail: `low and not writable here (${short.join(", ")}): units stop booting at about that many`,
            fix: `sysctl -w kernel.keys.maxkeys=${KEY_QUOTA.maxkeys} kernel.keys.maxbytes=${KEY_QUOTA.maxbytes}`,
          },
  );

  const filesystems = await readFile("/proc/filesystems", "utf8").catch(() => "");
  add(
    /\tbtrfs$/m.test(filesystems)
      ? { name: "btrfs", ok: true, detail: "the kernel has btrfs" }
      : { name: "btrfs", ok: false, detail: "btrfs is not in /proc/filesystems", fix: "modprobe btrfs" },
  );

  const v2 = existsSync("/sys/fs/cgroup/cgroup.controllers");
  const controllers = v2
    ? (await readFile("/sys/fs/cgroup/cgroup.controllers", "utf8").catch(() => "")).trim().split(/\s+/)
    : ["cpu", "memory", "pids", "freezer"].filter((c) => existsSync(`/sys/fs/cgroup/${c}`));
  const missing = ["cpu", "memory", "pids"].filter((c) => !controllers.includes(c));
  add(
    missing.length === 0
      ? { name: "cgroups", ok: true, detail: `${v2 ? "v2 (unified)" : "v1"}: ${controllers.join(", ")}` }
      : {
          name: "cgroups",
          ok: false,
          detail: `${v2 ? "v2" : "v1"} without ${missing.join(", ")}`,
          fix: "enable the cpu, memory and pids controllers (kernel command line cgroup_enable=memory, or systemd's Delegate)",
        },
  );

  for (const [tool, pkg] of [
    ["runc", "runc"],
    ["nft", "nftables"],
    ["ip", "iproute2"],
    ["mkfs.btrfs", "btrfs-progs"],
    ["btrfs", "btrfs-progs"],
    ["losetup", "mount"],
  ] as const) {
    const path = await which(tool);
    add(
      path
        ? { name: tool, ok: true, detail: path }
        : { name: tool, ok: false, detail: `${tool} is not on PATH`, fix: `apt-get install ${pkg}` },
    );
  }

  const nft = await run("nft", ["list", "tables"]).then(
    () => undefined,
    (err: Error) => err.message,
  );
  add(
    nft === undefined
      ? { name: "nftables", ok: true, detail: "nft answers" }
      : { name: "nftables", ok: false, detail: nft, fix: "load nf_tables (modprobe nf_tables) and run as root" },
  );

  let dir = resolve(o.dataDir);
  while (!existsSync(dir) && dir !== dirname(dir)) dir = dirname(dir);
  try {
    const s = await statfs(dir);
    const free = s.bavail * s.bsize;
    const text = `${(free / GiB).toFixed(1)} GiB free at ${dir}`;
    add(
      free >= 4 * GiB
        ? { name: "free space", ok: true, detail: text }
        : free >= GiB
          ? {
              name: "free space",
              ok: true,
              warning: true,
              detail: text,
              fix: "units' disks and the image need room: give the data dir at least 4 GiB",
            }
          : {
              name: "free space",
              ok: false,
              detail: text,
              fix: "free space or move --data-dir (the base image alone needs about 1 GiB)",
            },
    );
  } catch (err) {
    add({ name: "free space", ok: false, detail: (err as Error).message, fix: "check --data-dir" });
  }

  let rid = "-";
  rid = (await readFile(resolve(o.dataDir, "runtime-id"), "utf8").catch(() => rid)).trim();
  try {
    const conflicts = subnetConflicts(rid, parseSubnet(o.unitSubnet), await readHostNetwork());
    add(
      conflicts.length === 0
        ? { name: "unit subnet", ok: true, detail: `${o.unitSubnet}: no route or other ums server uses it` }
        : { name: "unit subnet", ok: false, detail: conflicts.join("; "), fix: "pass another --unit-subnet" },
    );
  } catch (err) {
    add({
      name: "unit subnet",
      ok: false,
      detail: (err as Error).message,
      fix: "pass a --unit-subnet like 10.209.0.0/16",
    });
  }
  return checks;
}
