import { spawn } from "node:child_process";
import { access, chmod, mkdir, readFile, rename, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { run, toolEnv } from "../exec/host-command.js";
import { createSubvolume, deleteSubvolume, isReadonly, isSubvolume, setReadonly } from "../storage/btrfs.js";
import { withFileLock } from "../storage/lock.js";
import { unmountBelow } from "../storage/mounts.js";
import type { Pool } from "../storage/pool.js";
import { readFileCapabilities, writeNamespacedCapabilities } from "./caps.js";
import {
  DEBIAN_SUITE,
  debianSources,
  IMAGE_PACKAGES,
  IMAGE_VARIANTS,
  type ImageVariant,
  imageNameProblem,
} from "./packages.js";
import { shiftTree, UID_RANGE, UID_SHIFT } from "./shift.js";

/**
 * Version of what the build puts into an image beyond the Debian packages (the user, sudoers, the
 * placeholders, the uid shift). Bump it when that changes: cached images of an older version are
 * rebuilt.
 */
export const IMAGE_CONTENT_VERSION = 1;

/** The user units run commands as by default. */
export const UNIT_USER = Object.freeze({ name: "unit", uid: 1000, gid: 1000, home: "/home/unit", shell: "/bin/bash" });

/** The hostname the image ships in /etc/hostname and /etc/hosts until the runtime writes the unit's name. */
export const PLACEHOLDER_HOSTNAME = "unit";

export interface ImageManifest {
  name: string;
  variant: ImageVariant;
  contentVersion: number;
  suite: string;
  /** apt sources it was built from (also in the image's /etc/apt/sources.list). */
  sources: string[];
  /** Packages asked for on top of minbase. */
  packages: string[];
  /** Every installed package and its version. */
  installed: Record<string, string>;
  /** Host id of the image's root; the image's ids 0..uidRange-1 are stored as uidShift+id. */
  uidShift: number;
  uidRange: number;
  user: typeof UNIT_USER;
  builtAt: string;
  buildSeconds: number;
  /** Files, directories and links in the image. */
  entries: number;
  /** Apparent size of its regular files. */
  bytes: number;
}

export type BuildStep = "cache" | "wait" | "prepare" | "bootstrap" | "configure" | "shift" | "finalize" | "done";

export interface BuildProgress {
  step: BuildStep;
  message: string;
  /** 0-100 overall, when known. */
  percent?: number;
}

export interface BuildImageOptions {
  /** The pool, or its mount point. */
  pool: Pick<Pool, "path"> | string;
  /** Image name: the subvolume is `<pool>/images/<name>`. */
  name: string;
  variant: ImageVariant;
  /** Rebuild even when a valid cached image exists (it is replaced at the end of the build). */
  force?: boolean;
  /** apt sources (`deb URL SUITE COMPONENTS` lines); default {@link debianSources}. */
  sources?: string[];
  onProgress?: (progress: BuildProgress) => void;
  /** Aborting kills mmdebstrap and removes the half-built image. */
  signal?: AbortSignal;
}

export interface ImagePaths {
  /** The read-only image subvolume. */
  path: string;
  /** `<pool>/images/<name>.json`. */
  manifest: string;
  /** The writable subvolume a build works in. */
  building: string;
  /** TMPDIR of the build's mmdebstrap, removed with the build (a killed mmdebstrap leaves files there). */
  tmp: string;
  lock: string;
}

export function imagePaths(pool: Pick<Pool, "path"> | string, name: string): ImagePaths {
  const problem = imageNameProblem(name);
  if (problem) throw new Error(`image name '${name}' ${problem}`);
  const images = join(typeof pool === "string" ? pool : pool.path, "images");
  return {
    path: join(images, name),
    manifest: join(images, `${name}.json`),
    building: join(images, `.${name}.building`),
    tmp: join(images, `.${name}.tmp`),
    lock: join(images, `.${name}.lock`),
  };
}

export async function readImageManifest(
  pool: Pick<Pool, "path"> | string,
  name: string,
): Promise<ImageManifest | undefined> {
  try {
    return JSON.parse(await readFile(imagePaths(pool, name).manifest, "utf8")) as ImageManifest;
  } catch {
    return undefined;
  }
}

/**
 * Why a cached image cannot be used (undefined: it can): it must be a read-only subvolume with a
 * manifest of the current content version and the asked variant.
 */
async function cacheProblem(paths: ImagePaths, variant: ImageVariant): Promise<string | undefined> {
  if (!(await isSubvolume(paths.path))) return "not built yet";
  let manifest: ImageManifest;
  try {
    manifest = JSON.parse(await readFile(paths.manifest, "utf8"));
  } catch {
    return "no manifest (an interrupted build)";
  }
  if (manifest.contentVersion !== IMAGE_CONTENT_VERSION) {
    return `content version ${manifest.contentVersion}, current is ${IMAGE_CONTENT_VERSION}`;
  }
  if (manifest.variant !== variant) return `it is the ${manifest.variant} variant`;
  if (!(await isReadonly(paths.path))) return "it is not read-only";
  return undefined;
}

/** The path of a valid cached image, or undefined. */
export async function cachedImage(
  pool: Pick<Pool, "path"> | string,
  name: string,
  variant: ImageVariant,
): Promise<string | undefined> {
  const paths = imagePaths(pool, name);
  return (await cacheProblem(paths, variant)) === undefined ? paths.path : undefined;
}

/** Removes an image (subvolume and manifest). Units already made from it are independent snapshots and stay. */
export async function deleteImage(pool: Pick<Pool, "path"> | string, name: string): Promise<void> {
  const paths = imagePaths(pool, name);
  await withFileLock(paths.lock, async () => {
    await rm(paths.manifest, { force: true });
    if (await isSubvolume(paths.path)) await deleteSubvolume(paths.path);
  });
}

/** Milestones of mmdebstrap's `I:` lines and the overall percentage they stand for. */
const BOOTSTRAP_MILESTONES: Array<[RegExp, number]> = [
  [/^I: running apt-get update/, 5],
  [/^I: downloading packages/, 12],
  [/^I: extracting archives/, 35],
  [/^I: installing essential packages/, 45],
  [/^I: installing remaining packages/, 60],
  [/^I: cleaning package lists/, 80],
  [/^I: success/, 84],
];

/** The percentage for an mmdebstrap output line, or undefined when it is not a milestone. */
export function bootstrapPercent(line: string): number | undefined {
  return BOOTSTRAP_MILESTONES.find(([re]) => re.test(line))?.[1];
}

/**
 * Builds (or returns from cache) the base image `<pool>/images/<name>`: a read-only btrfs subvolume
 * holding a Debian minbase bootstrap with the variant's packages, the user `unit` with passwordless
 * sudo, placeholders the runtime fills at boot, and every owner shifted by {@link UID_SHIFT}.
 * Concurrent builds of one image (processes or callers) are serialised by a lock file; the second
 * one finds the first one's result in the cache.
 */
export async function buildImage(opts: BuildImageOptions): Promise<string> {
  if (!IMAGE_VARIANTS.includes(opts.variant)) throw new Error(`unknown image variant '${opts.variant}'`);
  const paths = imagePaths(opts.pool, opts.name);
  const report = (p: BuildProgress) => opts.onProgress?.(p);

  if (!opts.force && (await cacheProblem(paths, opts.variant)) === undefined) {
    report({ step: "cache", message: `image ${opts.name} is built (cached)`, percent: 100 });
    return paths.path;
  }
  return withFileLock(
    paths.lock,
    async () => {
      const problem = await cacheProblem(paths, opts.variant);
      if (problem === undefined && !opts.force) {
        report({ step: "cache", message: `image ${opts.name} was built by another process`, percent: 100 });
        return paths.path;
      }
      await build(opts, paths, problem ?? "rebuild forced", report);
      return paths.path;
    },
    {
      timeoutMs: 30 * 60_000,
      onWait: (pid) =>
        report({ step: "wait", message: `waiting for another build of ${opts.name} (pid ${pid ?? "?"})`, percent: 0 }),
    },
  );
}

async function removeBuilding(building: string): Promise<void> {
  await unmountBelow(building);
  if (await isSubvolume(building)) await deleteSubvolume(building);
  else await rm(building, { recursive: true, force: true });
}

async function build(
  opts: BuildImageOptions,
  paths: ImagePaths,
  reason: string,
  report: (p: BuildProgress) => void,
): Promise<void> {
  const started = Date.now();
  const packages = [...IMAGE_PACKAGES[opts.variant]];
  const sources = opts.sources ?? debianSources();
  report({ step: "prepare", message: `building image ${opts.name} (${opts.variant}): ${reason}`, percent: 0 });
  if (await stat(paths.building).catch(() => undefined)) {
    report({ step: "prepare", message: "removing the leftover of an interrupted build", percent: 1 });
    await removeBuilding(paths.building);
  }
  await createSubvolume(paths.building);
  await rm(paths.tmp, { recursive: true, force: true });
  await mkdir(paths.tmp, { mode: 0o700 });
  try {
    await bootstrap(paths.building, paths.tmp, packages, sources, report, opts.signal);
    opts.signal?.throwIfAborted();

    report({ step: "configure", message: `user ${UNIT_USER.name}, sudo, placeholders`, percent: 86 });
    await configureRootfs(paths.building);
    const installed = await installedPackages(paths.building);
    opts.signal?.throwIfAborted();

    report({ step: "shift", message: `shifting owners by ${UID_SHIFT}`, percent: 90 });
    const t0 = Date.now();
    const caps = await readFileCapabilities(paths.building);
    const shifted = await shiftTree(paths.building);
    if (caps) await writeNamespacedCapabilities(paths.building, caps, UID_SHIFT);
    else report({ step: "shift", message: "no python3 in the image: file capabilities were not kept", percent: 95 });
    report({
      step: "shift",
      message: `${shifted.changed} of ${shifted.entries} entries shifted in ${Date.now() - t0} ms${
        caps && Object.keys(caps).length ? `; file capabilities kept on ${Object.keys(caps).join(", ")}` : ""
      }`,
      percent: 96,
    });
    opts.signal?.throwIfAborted();

    report({ step: "finalize", message: `making ${paths.path} read-only`, percent: 97 });
    await setReadonly(paths.building, true);
    await rm(paths.manifest, { force: true });
    if (await isSubvolume(paths.path)) await deleteSubvolume(paths.path);
    else await rm(paths.path, { recursive: true, force: true });
    // A read-only subvolume can be renamed within its parent directory.
    await rename(paths.building, paths.path);
    await run("btrfs", ["filesystem", "sync", paths.path]);
    const manifest: ImageManifest = {
      name: opts.name,
      variant: opts.variant,
      contentVersion: IMAGE_CONTENT_VERSION,
      suite: DEBIAN_SUITE,
      sources,
      packages,
      installed,
      uidShift: UID_SHIFT,
      uidRange: UID_RANGE,
      user: UNIT_USER,
      builtAt: new Date().toISOString(),
      buildSeconds: Math.round((Date.now() - started) / 100) / 10,
      entries: shifted.entries,
      bytes: shifted.bytes,
    };
    await writeFile(`${paths.manifest}.tmp`, `${JSON.stringify(manifest, null, 2)}\n`, { mode: 0o644 });
    await rename(`${paths.manifest}.tmp`, paths.manifest);
    report({ step: "done", message: `image ${opts.name} built in ${manifest.buildSeconds} s`, percent: 100 });
  } catch (err) {
    await removeBuilding(paths.building).catch(() => {});
    throw err;
  } finally {
    await rm(paths.tmp, { recursive: true, force: true });
  }
}

/** Runs mmdebstrap into `target` (an empty directory), streaming its lines as progress. */
async function bootstrap(
  target: string,
  tmpdir: string,
  packages: string[],
  sources: string[],
  report: (p: BuildProgress) => void,
  signal: AbortSignal | undefined,
): Promise<void> {
  const args = [
    "--variant=minbase",
    "--mode=root",
    "--format=directory",
    // The build dir sits in a root-only data dir that apt's _apt user cannot enter: download as root
    // (as apt would anyway, after a warning).
    '--aptopt=APT::Sandbox::User "root"',
    `--include=${packages.join(",")}`,
    DEBIAN_SUITE,
    target,
    ...sources,
  ];
  report({ step: "bootstrap", message: `mmdebstrap ${args.join(" ")}`, percent: 2 });
  let percent = 2;
  const tail: string[] = [];
  signal?.throwIfAborted();
  const child = spawn("mmdebstrap", args, {
    env: toolEnv({ TMPDIR: tmpdir }),
    // mmdebstrap reads apt sources from stdin when it is not a terminal: give it nothing.
    stdio: ["ignore", "pipe", "pipe"],
    // Its own process group, so that an abort stops apt and dpkg too, not just mmdebstrap.
    detached: true,
  });
  let killTimer: NodeJS.Timeout | undefined;
  const onAbort = () => {
    const kill = (sig: NodeJS.Signals) => {
      try {
        if (child.pid) process.kill(-child.pid, sig);
      } catch {}
    };
    kill("SIGTERM");
    killTimer = setTimeout(() => kill("SIGKILL"), 5000);
  };
  signal?.addEventListener("abort", onAbort, { once: true });
  const onLine = (line: string) => {
    if (!line.trim()) return;
    tail.push(line);
    if (tail.length > 40) tail.shift();
    percent = bootstrapPercent(line) ?? percent;
    report({ step: "bootstrap", message: line, percent });
  };
  createInterface({ input: child.stdout }).on("line", onLine);
  createInterface({ input: child.stderr }).on("line", onLine);
  const [code, sig] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.on("error", (err) => {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") {
        reject(new Error("mmdebstrap is not installed (apt-get install mmdebstrap)"));
      } else reject(err);
    });
    child.on("close", (c, s) => resolve([c, s]));
  }).finally(() => {
    signal?.removeEventListener("abort", onAbort);
    clearTimeout(killTimer);
  });
  signal?.throwIfAborted();
  if (code !== 0) {
    throw new Error(`mmdebstrap failed (${sig ? `signal ${sig}` : `exit ${code}`}):\n${tail.join("\n")}`);
  }
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

/** Plain file writes inside the rootfs (the build owns it; nothing in it is a link we did not make). */
async function put(root: string, rel: string, content: string, mode = 0o644): Promise<void> {
  const path = join(root, rel);
  await rm(path, { force: true });
  await writeFile(path, content, { mode });
  await chmod(path, mode);
}

export const PLACEHOLDER_HOSTS = [
  "127.0.0.1\tlocalhost",
  `127.0.1.1\t${PLACEHOLDER_HOSTNAME}`,
  "::1\tlocalhost ip6-localhost ip6-loopback",
  "ff02::1\tip6-allnodes",
  "ff02::2\tip6-allrouters",
  "",
].join("\n");

/** Step b: the user, sudo, the placeholders the runtime fills at boot, and less weight. */
async function configureRootfs(root: string): Promise<void> {
  const u = UNIT_USER;
  await run("chroot", [root, "groupadd", "--gid", String(u.gid), u.name]);
  await run("chroot", [
    root,
    "useradd",
    "--uid",
    String(u.uid),
    "--gid",
    String(u.gid),
    "--create-home",
    "--home-dir",
    u.home,
    "--shell",
    u.shell,
    "--comment",
    "unit user",
    u.name,
  ]);
  await mkdir(join(root, "etc/sudoers.d"), { recursive: true, mode: 0o755 });
  await put(root, "etc/sudoers.d/unit", `${u.name} ALL=(ALL) NOPASSWD:ALL\n`, 0o440);
  if (await exists(join(root, "usr/sbin/visudo"))) {
    await run("chroot", [root, "visudo", "--check", "--quiet", "--file", "/etc/sudoers.d/unit"]);
  }
  // The runtime writes the unit's name into these two before every boot.
  await put(root, "etc/hostname", `${PLACEHOLDER_HOSTNAME}\n`);
  await put(root, "etc/hosts", PLACEHOLDER_HOSTS);
  // The runtime binds or writes the unit's resolver here.
  await put(root, "etc/resolv.conf", "");
  // Mount point of the runtime's /.unit (agent, node, init, agent socket).
  await mkdir(join(root, ".unit"), { mode: 0o755 });
  await chmod(join(root, ".unit"), 0o755);
  if (await exists(join(root, "usr/sbin/locale-gen"))) {
    await put(root, "etc/locale.gen", "en_US.UTF-8 UTF-8\n");
    await run("chroot", [root, "locale-gen"]);
  }
  await put(root, "etc/default/locale", "LANG=C.UTF-8\n");
  // apt lists and caches: `apt-get update` brings them back when a unit needs them.
  await rm(join(root, "var/lib/apt/lists"), { recursive: true, force: true });
  await mkdir(join(root, "var/lib/apt/lists/partial"), { recursive: true, mode: 0o700 });
  for (const f of ["pkgcache.bin", "srcpkgcache.bin"]) await rm(join(root, "var/cache/apt", f), { force: true });
  await rm(join(root, "var/log/apt/eipp.log.xz"), { force: true });
}

/** Installed packages and versions, from dpkg's status file. */
async function installedPackages(root: string): Promise<Record<string, string>> {
  const text = await readFile(join(root, "var/lib/dpkg/status"), "utf8");
  const out: Record<string, string> = {};
  for (const para of text.split(/\n\n+/)) {
    const name = /^Package: (.+)$/m.exec(para)?.[1];
    const version = /^Version: (.+)$/m.exec(para)?.[1];
    const status = /^Status: (.+)$/m.exec(para)?.[1];
    if (name && version && status?.endsWith(" installed")) out[name] = version;
  }
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => (a < b ? -1 : 1)));
}
