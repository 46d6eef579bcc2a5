// Test helpers of the replication tests: an S3-compatible server on loopback (the API's and the
// nodes' tests of the object store use it too), a scratch directory on the shared btrfs test pool,
// trees to compare, and the child processes still running.
import { execFileSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { lstat, mkdir, mkdtemp, readdir, readFile, readlink, rm, rmdir } from "node:fs/promises";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import S3rver from "s3rver";
import { testImage } from "../runtime/image/test-image.js";
import { createSubvolume, deleteSubvolume, isSubvolume, snapshot } from "../runtime/storage/btrfs.js";
import { freePort } from "../testing/free-port.js";
import { S3ObjectStore } from "./object-store.js";

export interface TestS3Options {
  /** The bucket, made at the start ("ums-test" unless given). */
  bucket?: string;
  /** Where the keys begin, in `store` and in `url` ("ums/" unless given; "" for none). */
  keyPrefix?: string;
  /**
   * A restart: the port and the files of a server stopped with `keepFiles`, so that what was
   * stored is there again at the address a server's `--object-store` names.
   */
  restart?: { port: number; dir: string };
}

export interface TestS3 {
  store: S3ObjectStore;
  /** The server's files (to corrupt a stored object behind its back). */
  dir: string;
  port: number;
  endpoint: string;
  bucket: string;
  /** The object store for `ums serve --object-store` (UMS_OBJECT_STORE): bucket, prefix, endpoint. */
  url: string;
  /** The credentials s3rver takes, for a server's environment. */
  env: { AWS_ACCESS_KEY_ID: string; AWS_SECRET_ACCESS_KEY: string };
  /** Stops the server (once: a second stop only removes the files) and removes its files unless `keepFiles`. */
  stop(opts?: { keepFiles?: boolean }): Promise<void>;
}

/**
 * s3rver on 127.0.0.1, its files in a temp dir. A first start takes a free port below the kernel's
 * ephemeral range (free-port.ts): a restart on the same port could otherwise find it held by any
 * outgoing connection on the host.
 */
export async function startTestS3(opts: TestS3Options = {}): Promise<TestS3> {
  const { bucket = "ums-test", keyPrefix = "ums/", restart } = opts;
  const dir = restart?.dir ?? (await mkdtemp(join(tmpdir(), "ums-s3-")));
  const server = new S3rver({
    address: "127.0.0.1",
    port: restart?.port ?? (await freePort()),
    silent: true,
    directory: dir,
    configureBuckets: [{ name: bucket, configs: [] }],
  });
  let info: AddressInfo;
  try {
    info = (await server.run()) as AddressInfo;
  } catch (err) {
    // A restart's files belong to the server stopped before it (its stop removes them).
    if (!restart) await rm(dir, { recursive: true, force: true });
    throw err;
  }
  const endpoint = `http://127.0.0.1:${info.port}`;
  const credentials = { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" };
  const store = new S3ObjectStore({
    endpoint,
    region: "us-east-1",
    bucket,
    forcePathStyle: true,
    keyPrefix,
    credentials,
  });
  let closed: Promise<void> | undefined;
  return {
    store,
    dir,
    port: info.port,
    endpoint,
    bucket,
    url: `s3://${bucket}/${keyPrefix}?endpoint=${endpoint}&path_style=true`,
    env: { AWS_ACCESS_KEY_ID: credentials.accessKeyId, AWS_SECRET_ACCESS_KEY: credentials.secretAccessKey },
    stop: async ({ keepFiles = false } = {}) => {
      store.destroy();
      closed ??= server.close();
      try {
        await closed;
      } finally {
        if (!keepFiles) await rm(dir, { recursive: true, force: true });
      }
    },
  };
}

/** A directory of its own on the shared test pool (btrfs), for subvolumes; `remove` deletes them all. */
export async function poolScratch(prefix: string): Promise<{ dir: string; remove(): Promise<void> }> {
  const image = await testImage();
  const base = join(image.pool.path, "replication-tests");
  let dir: string | undefined;
  for (let attempt = 1; !dir; attempt++) {
    await mkdir(base, { recursive: true });
    try {
      dir = await mkdtemp(join(base, `${prefix}-`));
    } catch (err) {
      // Another suite's remove() took the (then empty) base away in between: make it again.
      if ((err as NodeJS.ErrnoException).code !== "ENOENT" || attempt >= 5) throw err;
    }
  }
  return {
    dir,
    remove: async () => {
      await removeTree(dir);
      await rmdir(base).catch(() => {}); // another suite's scratch may still be in it
    },
  };
}

/** Deletes every subvolume under `dir` (found within 3 levels), then the directory. */
export async function removeTree(dir: string): Promise<void> {
  const walk = async (d: string, depth: number): Promise<void> => {
    let entries: string[];
    try {
      entries = await readdir(d);
    } catch {
      return;
    }
    for (const e of entries) {
      const p = join(d, e);
      if (await isSubvolume(p)) await deleteSubvolume(p);
      else if (depth < 3 && (await lstat(p).catch(() => undefined))?.isDirectory()) await walk(p, depth + 1);
    }
  };
  if (await isSubvolume(dir)) await deleteSubvolume(dir);
  else await walk(dir, 0);
  await rm(dir, { recursive: true, force: true });
}

/** A file of `bytes` random (incompressible) bytes, written without holding it all in memory. */
export function randomFile(path: string, bytes: number): void {
  execFileSync("dd", ["if=/dev/urandom", `of=${path}`, "bs=1M", `count=${Math.ceil(bytes / 2 ** 20)}`, "status=none"]);
}

export function setXattr(path: string, name: string, value: string): void {
  execFileSync("python3", [
    "-c",
    "import os,sys; os.setxattr(sys.argv[1], sys.argv[2], sys.argv[3].encode(), follow_symlinks=False)",
    path,
    name,
    value,
  ]);
}

function xattrs(path: string): string {
  return execFileSync(
    "python3",
    [
      "-c",
      "import os,sys; p=sys.argv[1]; print(sorted((n, os.getxattr(p, n, follow_symlinks=False).hex()) for n in os.listxattr(p, follow_symlinks=False)))",
      path,
    ],
    { encoding: "utf8" },
  ).trim();
}

/** Every entry under `root`: type, mode, owner, size, content hash, link target, xattrs. */
export async function describeTree(root: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (rel: string) => {
    const abs = join(root, rel);
    const st = await lstat(abs);
    let what = `${rel || "."} mode=${st.mode.toString(8)} uid=${st.uid} gid=${st.gid}`;
    if (st.isFile()) {
      what += ` size=${st.size} nlink=${st.nlink} sha=${createHash("sha256")
        .update(await readFile(abs))
        .digest("hex")
        .slice(0, 16)}`;
    } else if (st.isSymbolicLink()) what += ` -> ${await readlink(abs)}`;
    if (!st.isSymbolicLink()) what += ` x=${xattrs(abs)}`;
    out.push(what);
    if (st.isDirectory()) for (const e of (await readdir(abs)).sort()) await walk(join(rel, e));
  };
  await walk("");
  return out;
}

/** The btrfs/zstd processes this process started that are still there. */
export async function childTools(): Promise<string[]> {
  return (await toolChildren(process.pid)).map((c) => `${c.pid} ${c.name}`);
}

/** The pids of the btrfs/zstd children of process `ppid`. */
export async function toolsOf(ppid: number): Promise<number[]> {
  return (await toolChildren(ppid)).map((c) => c.pid);
}

async function toolChildren(ppid: number): Promise<Array<{ pid: number; name: string }>> {
  const out: Array<{ pid: number; name: string }> = [];
  for (const pid of await readdir("/proc")) {
    if (!/^\d+$/.test(pid)) continue;
    const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => "");
    const m = /^\d+ \((.*)\) \S+ (\d+)/.exec(stat);
    if (m && Number(m[2]) === ppid && /^(btrfs|zstd)$/.test(m[1] ?? ""))
      out.push({ pid: Number(pid), name: m[1] ?? "" });
  }
  return out;
}

/** A fresh writable subvolume at `path`. */
export async function makeSubvolume(path: string): Promise<void> {
  await createSubvolume(path);
}

/** A read-only snapshot of `src` at `dst` (a checkpoint). */
export async function checkpointOf(src: string, dst: string): Promise<void> {
  await snapshot(src, dst, { readonly: true });
}

export const randomId = (prefix: string) => `${prefix}${randomBytes(4).toString("hex")}`;
