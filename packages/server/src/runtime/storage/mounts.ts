import { readFile, stat } from "node:fs/promises";
import { basename } from "node:path";
import { run } from "../exec/host-command.js";

export interface MountEntry {
  mountPoint: string;
  fsType: string;
  source: string;
  options: string;
}

/** `\040`-style escapes of /proc/self/mountinfo. */
function unescapeOctal(field: string): string {
  return field.replace(/\\([0-7]{3})/g, (_, oct: string) => String.fromCharCode(Number.parseInt(oct, 8)));
}

/**
 * The mounts of this process's mount namespace (or of the one of the process whose mountinfo
 * `file` is, e.g. `/proc/<pid>/mountinfo`: its mount points are then as that process sees them), in
 * mount order. `options` are the per-mount flags (`ro` or `rw` first), not the filesystem's.
 */
export async function readMounts(file = "/proc/self/mountinfo"): Promise<MountEntry[]> {
  const text = await readFile(file, "utf8");
  const out: MountEntry[] = [];
  for (const line of text.split("\n")) {
    if (!line) continue;
    const [left, right] = line.split(" - ");
    if (!left || !right) continue;
    const l = left.split(" ");
    const r = right.split(" ");
    out.push({
      mountPoint: unescapeOctal(l[4] ?? ""),
      options: l[5] ?? "",
      fsType: r[0] ?? "",
      source: unescapeOctal(r[1] ?? ""),
    });
  }
  return out;
}

/** The top-most mount at exactly `path` (an absolute, resolved path), if any. */
export async function mountAt(path: string): Promise<MountEntry | undefined> {
  const all = await readMounts();
  return all.filter((m) => m.mountPoint === path).at(-1);
}

/** Mounts at or below `path` (an absolute, resolved path), deepest first. */
export async function mountsBelow(path: string): Promise<MountEntry[]> {
  const prefix = path.endsWith("/") ? path : `${path}/`;
  const all = await readMounts();
  return all.filter((m) => m.mountPoint === path || m.mountPoint.startsWith(prefix)).reverse();
}

/**
 * Unmounts everything at or below `path`, deepest first. Only for trees this process created (e.g. a
 * crashed image build leaves mmdebstrap's /proc and /dev mounts inside its target).
 */
export async function unmountBelow(path: string): Promise<number> {
  let count = 0;
  for (let round = 0; round < 8; round++) {
    const mounts = await mountsBelow(path);
    if (mounts.length === 0) return count;
    for (const m of mounts) {
      await run("umount", [m.mountPoint]).catch(() => run("umount", ["--lazy", m.mountPoint]));
      count++;
    }
  }
  const left = await mountsBelow(path);
  if (left.length) throw new Error(`could not unmount ${left.map((m) => m.mountPoint).join(", ")}`);
  return count;
}

/** The mount `path` (an absolute, resolved path) is on: the deepest mount point at or above it. */
export async function mountOf(path: string): Promise<MountEntry | undefined> {
  let best: MountEntry | undefined;
  for (const m of await readMounts()) {
    const covers = m.mountPoint === "/" || path === m.mountPoint || path.startsWith(`${m.mountPoint}/`);
    if (covers && (best === undefined || m.mountPoint.length >= best.mountPoint.length)) best = m;
  }
  return best;
}

/**
 * When the filesystem at `path` is on a loop device: the device number (st_dev) of the filesystem
 * its backing file is on; else undefined (a real block device, or the backing file is gone).
 */
export async function loopBackingDevice(path: string): Promise<number | undefined> {
  const source = (await mountOf(path))?.source;
  if (source === undefined || !/^\/dev\/loop\d+$/.test(source)) return undefined;
  try {
    const backing = (await readFile(`/sys/block/${basename(source)}/loop/backing_file`, "utf8")).trim();
    if (backing.endsWith(" (deleted)")) return undefined;
    return (await stat(backing)).dev;
  } catch {
    return undefined;
  }
}
