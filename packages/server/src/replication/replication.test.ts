import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { chmod, chown, link, mkdir, readdir, readFile, rename, rm, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { deleteSubvolume, isSubvolume } from "../runtime/storage/btrfs.js";
import { isReplicationError, ReplicationError } from "./errors.js";
import { deleteExport, discardExport, exportCheckpoint, zstdCounts } from "./export.js";
import { importCheckpoint } from "./import.js";
import { checkpointKeys } from "./keys.js";
import { type Manifest, validateManifest } from "./manifest.js";
import { listExports, readManifest } from "./manifest-io.js";
import { type ObjectStore, readObject } from "./object-store.js";
import {
  checkpointOf,
  childTools,
  describeTree,
  makeSubvolume,
  poolScratch,
  randomFile,
  randomId,
  setXattr,
  startTestS3,
  type TestS3,
  toolsOf,
} from "./test-fixtures.js";

const MiB = 1024 * 1024;
const PART = 5 * MiB;
const root = process.getuid?.() === 0;

/** Rejects with a ReplicationError of `code`. */
async function rejectsWith(p: Promise<unknown>, code: string): Promise<ReplicationError> {
  try {
    await p;
  } catch (err) {
    assert.ok(isReplicationError(err), `not a ReplicationError: ${(err as Error)?.stack ?? err}`);
    assert.equal(err.code, code, err.message);
    return err;
  }
  assert.fail(`did not reject (expected ${code})`);
}

describe("validateManifest", () => {
  const good: Manifest = {
    format: "ums-checkpoint-export",
    version: 1,
    unitId: "u1",
    checkpointId: "c2",
    parentCheckpointId: "c1",
    chain: ["c1", "c2"],
    sourceUuid: null,
    compression: "zstd",
    uncompressedBytes: 100,
    compressedBytes: 15,
    partSize: 10,
    parts: [
      { size: 10, sha256: "a".repeat(64) },
      { size: 5, sha256: "b".repeat(64) },
    ],
    createdAt: new Date(0).toISOString(),
  };
  it("accepts a well-formed manifest", () => {
    assert.deepEqual(validateManifest(structuredClone(good), "c2"), good);
  });
  it("rejects hostile ids, broken chains and absurd sizes", () => {
    const cases: Array<[string, Record<string, unknown>]> = [
      ["id with ..", { checkpointId: "../c2" }],
      ["unit id with /", { unitId: "a/b" }],
      ["chain with ..", { chain: ["../../etc", "c2"] }],
      ["chain not ending in itself", { chain: ["c1", "c3"] }],
      ["parent not in chain", { parentCheckpointId: "c0" }],
      ["repeated chain", { chain: ["c2", "c2"] }],
      ["huge part", { partSize: 2 ** 50 }],
      ["huge compressed", { compressedBytes: 2 ** 60 }],
      ["negative size", { parts: [{ size: -1, sha256: "a".repeat(64) }] }],
      ["sizes not summing", { compressedBytes: 16 }],
      [
        "short middle part",
        {
          parts: [
            { size: 5, sha256: "a".repeat(64) },
            { size: 10, sha256: "b".repeat(64) },
          ],
        },
      ],
      [
        "bad sha",
        {
          parts: [
            { size: 10, sha256: "zz" },
            { size: 5, sha256: "b".repeat(64) },
          ],
        },
      ],
      ["too many parts", { parts: Array.from({ length: 10_001 }, () => ({ size: 10, sha256: "a".repeat(64) })) }],
      ["no parts", { parts: [], compressedBytes: 0 }],
      ["fractional", { uncompressedBytes: 1.5 }],
      ["other version", { version: 2 }],
      ["not for this id", { checkpointId: "c9", chain: ["c1", "c9"] }],
    ];
    for (const [what, patch] of cases) {
      const m = { ...structuredClone(good), ...patch };
      assert.throws(
        () => validateManifest(m, "c2"),
        (err: unknown) => isReplicationError(err, "INVALID_MANIFEST"),
        what,
      );
    }
  });
});

describe("zstdCounts", () => {
  it("reads the exact byte counts of zstd -vv's summary, and nothing from another line", () => {
    const stderr =
      "*** Zstandard CLI (64-bit) v1.5.4 ***\n/*stdin*\\   :100.00%   (629145602 B => 629160015 B, /*stdout*\\) \n";
    assert.deepEqual(zstdCounts(stderr), { in: 629145602, out: 629160015 });
    assert.equal(zstdCounts("/*stdin*\\ : 58.64%   (  64.0 MiB =>  37.5 MiB, /*stdout*\\)"), undefined);
  });
});

describe("checkpoint export and import (btrfs, S3 on loopback)", { skip: !root && "needs root" }, () => {
  let s3: TestS3 | undefined;
  let scratch: { dir: string; remove(): Promise<void> } | undefined;
  const S = () => s3 as TestS3;
  const D = () => (scratch as { dir: string }).dir;

  before(async () => {
    scratch = await poolScratch("repl");
    s3 = await startTestS3();
  });
  after(async () => {
    try {
      await s3?.stop();
    } finally {
      await scratch?.remove();
    }
    assert.deepEqual(await childTools(), []);
  });

  /** A unit-like subvolume with a bit of everything. */
  async function makeLive(dir: string, randomMiB: number): Promise<string> {
    const live = join(dir, "live");
    await makeSubvolume(live);
    randomFile(join(live, "random.bin"), randomMiB * MiB);
    await writeFile(join(live, "text.txt"), "compressible ".repeat(200_000));
    await mkdir(join(live, "etc/secret"), { recursive: true });
    await writeFile(join(live, "etc/secret/key"), "k");
    await chmod(join(live, "etc/secret"), 0o700);
    await chmod(join(live, "etc/secret/key"), 0o600);
    await chown(join(live, "etc/secret/key"), 1234, 5678);
    await chown(join(live, "etc"), 100_000, 100_000);
    await symlink("../../etc/passwd", join(live, "etc/link"));
    await link(join(live, "text.txt"), join(live, "hard.txt"));
    await chmod(join(live, "text.txt"), 0o4755);
    setXattr(join(live, "text.txt"), "user.note", "hello");
    return live;
  }
  /** `makeLive` under `<dir>/src`, and a checkpoint of it: its id and its snapshot's path. */
  async function sourceCheckpoint(dir: string, randomMiB: number): Promise<{ cp: string; snap: string }> {
    await mkdir(join(dir, "src"), { recursive: true });
    const live = await makeLive(join(dir, "src"), randomMiB);
    const cp = randomId("cp");
    const snap = join(dir, "src", cp);
    await checkpointOf(live, snap);
    return { cp, snap };
  }

  /** Receives `cp` from `store` into `<dir>/dst`: it must be the same tree as `snap`. */
  async function receivedAsSnapshot(dir: string, cp: string, snap: string, store: ObjectStore = S().store) {
    const dst = join(dir, "dst");
    await mkdir(dst);
    await importCheckpoint({ store, checkpointId: cp, destDir: dst });
    assert.deepEqual(await describeTree(join(dst, cp)), await describeTree(snap));
  }

  const stateDir = () => join(D(), "state");

  it("exports a checkpoint and receives it into another directory with identical contents", async () => {
    const dir = join(D(), "full");
    const { cp } = await sourceCheckpoint(dir, 12);
    const exported = await exportCheckpoint({
      store: S().store,
      unitId: "unit1",
      checkpointId: cp,
      snapshotPath: join(dir, "src", cp),
      stateDir: stateDir(),
      partSize: PART,
    });
    const m = exported.manifest;
    assert.equal(m.parentCheckpointId, null);
    assert.deepEqual(m.chain, [cp]);
    assert.ok(m.parts.length >= 3, `${m.parts.length} parts`);
    assert.equal(exported.uploadedBytes, m.compressedBytes);
    assert.ok(m.uncompressedBytes !== null, "zstd's byte count was read");
    assert.ok(m.uncompressedBytes > 14 * MiB && m.compressedBytes < m.uncompressedBytes);
    assert.deepEqual(await readManifest(S().store, cp), m);
    assert.ok((await listExports(S().store)).includes(cp));
    assert.deepEqual(await readdir(stateDir()), [], "no upload state left");
    // Exporting again does nothing.
    const again = await exportCheckpoint({
      store: S().store,
      unitId: "unit1",
      checkpointId: cp,
      snapshotPath: join(dir, "src", cp),
      stateDir: stateDir(),
    });
    assert.equal(again.alreadyExported, true);
    // A snapshot not named after its checkpoint could not be received as it.
    await rejectsWith(
      exportCheckpoint({
        store: S().store,
        unitId: "unit1",
        checkpointId: "other",
        snapshotPath: join(dir, "src", cp),
        stateDir: stateDir(),
      }),
      "INVALID_ID",
    );

    const dst = join(dir, "dst");
    await mkdir(dst);
    const imported = await importCheckpoint({ store: S().store, checkpointId: cp, destDir: dst });
    assert.deepEqual(imported.received, [cp]);
    assert.equal(imported.path, join(dst, cp));
    assert.ok(await isSubvolume(imported.path));
    assert.deepEqual(await describeTree(imported.path), await describeTree(join(dir, "src", cp)));
    assert.deepEqual(await readdir(dst), [cp]);
    // Present already: nothing to do; a second import would need a fresh place.
    assert.deepEqual((await importCheckpoint({ store: S().store, checkpointId: cp, destDir: dst })).received, []);
    assert.deepEqual(await childTools(), []);
  });

  it("exports a chain of 3 incrementally and receives it where none of its sources are", async () => {
    const dir = join(D(), "chain");
    await mkdir(join(dir, "src"), { recursive: true });
    const live = await makeLive(join(dir, "src"), 6);
    const ids = [randomId("c1-"), randomId("c2-"), randomId("c3-")];
    const trees: string[][] = [];
    const change = [
      async () => {},
      async () => {
        await writeFile(join(live, "new.txt"), "new file");
        await rm(join(live, "hard.txt"));
        await writeFile(join(live, "etc/secret/key"), "changed");
      },
      async () => {
        await rename(join(live, "new.txt"), join(live, "etc/moved.txt"));
        await chmod(join(live, "etc/moved.txt"), 0o640);
        setXattr(join(live, "etc/moved.txt"), "user.x", "y");
      },
    ];
    const manifests: Manifest[] = [];
    for (const [i, id] of ids.entries()) {
      await change[i]?.();
      await checkpointOf(live, join(dir, "src", id));
      trees.push(await describeTree(join(dir, "src", id)));
      const r = await exportCheckpoint({
        store: S().store,
        unitId: "unit2",
        checkpointId: id,
        snapshotPath: join(dir, "src", id),
        parent:
          i > 0
            ? { checkpointId: ids[i - 1] as string, snapshotPath: join(dir, "src", ids[i - 1] as string) }
            : undefined,
        stateDir: stateDir(),
        partSize: PART,
      });
      manifests.push(r.manifest);
    }
    assert.deepEqual(manifests[2]?.chain, ids);
    assert.equal(manifests[2]?.parentCheckpointId, ids[1]);
    assert.ok((manifests[1]?.compressedBytes ?? 0) < 64 * 1024, "an incremental stream holds only the changes");
    // As if on another node: the sources are gone, only the store has them.
    for (const id of ids) await deleteSubvolume(join(dir, "src", id));
    await deleteSubvolume(live);

    const dst = join(dir, "dst");
    await mkdir(dst);
    const r = await importCheckpoint({ store: S().store, checkpointId: ids[2] as string, destDir: dst });
    assert.deepEqual(r.received, ids);
    for (const [i, id] of ids.entries()) assert.deepEqual(await describeTree(join(dst, id)), trees[i], id);

    // A host that has the first two receives only the third.
    const dst2 = join(dir, "dst2");
    await mkdir(dst2);
    assert.deepEqual(
      (await importCheckpoint({ store: S().store, checkpointId: ids[1] as string, destDir: dst2 })).received,
      ids.slice(0, 2),
    );
    assert.deepEqual(
      (await importCheckpoint({ store: S().store, checkpointId: ids[2] as string, destDir: dst2 })).received,
      [ids[2]],
    );
    assert.deepEqual(await describeTree(join(dst2, ids[2] as string)), trees[2]);
    // A parent said to be here that is on no subvolume of this filesystem: receive cannot find it.
    for (const d of [dst, dst2]) for (const id of [...ids].reverse()) await deleteSubvolume(join(d, id));
    const dst3 = join(dir, "dst3");
    await mkdir(dst3);
    await rejectsWith(
      importCheckpoint({
        store: S().store,
        checkpointId: ids[2] as string,
        destDir: dst3,
        isPresent: async (id) => id === ids[1],
      }),
      "PARENT_MISSING",
    );
    assert.deepEqual(await readdir(dst3), []);
  });

  it("resumes an interrupted export without uploading the stored parts again", async () => {
    const dir = join(D(), "resume");
    const { cp, snap } = await sourceCheckpoint(dir, 30);
    const ac = new AbortController();
    let stored = 0;
    await rejectsWith(
      exportCheckpoint({
        store: S().store,
        unitId: "unit3",
        checkpointId: cp,
        snapshotPath: snap,
        stateDir: stateDir(),
        partSize: PART,
        concurrency: 1,
        signal: ac.signal,
        onProgress: (p) => {
          stored = p.uploadedBytes;
          if (p.uploadedBytes >= 3 * PART) ac.abort();
        },
      }),
      "ABORTED",
    );
    assert.deepEqual(await childTools(), [], "no btrfs or zstd left running");
    assert.equal(await readManifest(S().store, cp, { missingOk: true }), undefined);
    assert.ok(stored >= 3 * PART);

    const r = await exportCheckpoint({
      store: S().store,
      unitId: "unit3",
      checkpointId: cp,
      snapshotPath: snap,
      stateDir: stateDir(),
      partSize: PART,
    });
    assert.equal(r.resumed, true);
    assert.ok(r.skippedBytes >= 3 * PART, `skipped ${r.skippedBytes}`);
    assert.equal(r.uploadedBytes + r.skippedBytes, r.manifest.compressedBytes);
    assert.ok(r.uploadedBytes < r.manifest.compressedBytes);

    await receivedAsSnapshot(dir, cp, snap);
  });

  it("resumes an export whose process was killed (SIGKILL) mid-way", async () => {
    const dir = join(D(), "killed");
    const { cp, snap } = await sourceCheckpoint(dir, 30);
    const opts = {
      unitId: "unit8",
      checkpointId: cp,
      snapshotPath: snap,
      stateDir: stateDir(),
      partSize: PART,
      concurrency: 1,
    };
    const code = `
      const { S3ObjectStore } = await import(${JSON.stringify(new URL("./object-store.js", import.meta.url).href)});
      const { exportCheckpoint } = await import(${JSON.stringify(new URL("./export.js", import.meta.url).href)});
      const [endpoint, opts] = [process.argv[1], JSON.parse(process.argv[2])];
      const store = new S3ObjectStore({ endpoint, region: "us-east-1", bucket: ${JSON.stringify(S().bucket)}, forcePathStyle: true,
        keyPrefix: "ums/", credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" } });
      // Slowed after each part, so that it is killed between parts 2 and the end.
      await exportCheckpoint({ ...opts, store, onProgress: () => { const t = Date.now() + 300; while (Date.now() < t); } });`;
    const child = spawn(process.execPath, ["--input-type=module", "-e", code, S().endpoint, JSON.stringify(opts)], {
      stdio: ["ignore", "ignore", "pipe"],
    });
    let stderr = "";
    child.stderr?.on("data", (d) => {
      stderr += d;
    });
    const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
    const statePath = join(stateDir(), `${cp}.export.json`);
    const storedParts = async () => {
      try {
        return (JSON.parse(await readFile(statePath, "utf8")) as { parts: unknown[] }).parts.length;
      } catch {
        return 0;
      }
    };
    try {
      for (let i = 0; (await storedParts()) < 2; i++) {
        assert.ok(i < 600 && child.exitCode === null, `the exporting process ended early: ${stderr}`);
        await new Promise((r) => setTimeout(r, 50));
      }
    } finally {
      // Its btrfs send and zstd, found before it dies (they are re-parented then).
      const tools = await toolsOf(child.pid as number);
      child.kill("SIGKILL");
      await exited;
      for (const pid of tools) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {} // gone already (EPIPE ended it)
      }
    }
    const r = await exportCheckpoint({ ...opts, store: S().store });
    assert.equal(r.resumed, true);
    assert.ok(r.skippedBytes >= 2 * PART, `skipped ${r.skippedBytes}`);
    assert.equal(r.uploadedBytes + r.skippedBytes, r.manifest.compressedBytes);
    await receivedAsSnapshot(dir, cp, snap);
  });

  it("resumes after a network error, keeping the parts stored before it", async () => {
    const dir = join(D(), "neterr");
    const { cp, snap } = await sourceCheckpoint(dir, 24);
    // The store as seen through a link that breaks at the third part.
    let calls = 0;
    const real = S().store;
    const flaky: ObjectStore = Object.assign(Object.create(real) as ObjectStore, {
      uploadPart: (...args: Parameters<ObjectStore["uploadPart"]>) => {
        if (++calls === 3) return Promise.reject(new ReplicationError("STORE_FAILED", "upload part 3: ECONNRESET"));
        return real.uploadPart(...args);
      },
    });
    const opts = {
      unitId: "unit7",
      checkpointId: cp,
      snapshotPath: snap,
      stateDir: stateDir(),
      partSize: PART,
      concurrency: 1,
    };
    await rejectsWith(exportCheckpoint({ ...opts, store: flaky }), "STORE_FAILED");
    assert.deepEqual(await childTools(), []);
    const r = await exportCheckpoint({ ...opts, store: real });
    assert.equal(r.resumed, true);
    assert.equal(r.skippedBytes, 2 * PART);
    assert.equal(r.uploadedBytes, r.manifest.compressedBytes - 2 * PART);
    await receivedAsSnapshot(dir, cp, snap, real);
  });

  it("starts over cleanly when the regenerated stream differs from the interrupted one", async () => {
    const dir = join(D(), "restart");
    const { cp, snap } = await sourceCheckpoint(dir, 12);
    const ac = new AbortController();
    await rejectsWith(
      exportCheckpoint({
        store: S().store,
        unitId: "unit4",
        checkpointId: cp,
        snapshotPath: snap,
        stateDir: stateDir(),
        partSize: PART,
        concurrency: 1,
        signal: ac.signal,
        onProgress: (p) => p.uploadedBytes >= PART && ac.abort(),
      }),
      "ABORTED",
    );
    const statePath = join(stateDir(), `${cp}.export.json`);
    const state = JSON.parse(await readFile(statePath, "utf8")) as { parts: Array<{ sha256: string }> };
    assert.ok(state.parts.length >= 1);
    (state.parts[0] as { sha256: string }).sha256 = "0".repeat(64);
    await writeFile(statePath, JSON.stringify(state));
    const r = await exportCheckpoint({
      store: S().store,
      unitId: "unit4",
      checkpointId: cp,
      snapshotPath: snap,
      stateDir: stateDir(),
      partSize: PART,
    });
    assert.equal(r.skippedBytes, 0);
    assert.equal(r.uploadedBytes, r.manifest.compressedBytes);
    await receivedAsSnapshot(dir, cp, snap);
  });

  it("a cancelled export leaves no process, and discardExport leaves nothing in the store", async () => {
    const dir = join(D(), "cancel");
    const { cp } = await sourceCheckpoint(dir, 12);
    const ac = new AbortController();
    const p = exportCheckpoint({
      store: S().store,
      unitId: "unit5",
      checkpointId: cp,
      snapshotPath: join(dir, "src", cp),
      stateDir: stateDir(),
      partSize: PART,
      signal: ac.signal,
    });
    setTimeout(() => ac.abort(), 30);
    await rejectsWith(p, "ABORTED");
    assert.deepEqual(await childTools(), []);
    await discardExport({ store: S().store, checkpointId: cp, stateDir: stateDir() });
    assert.deepEqual(await S().store.list(checkpointKeys(cp).dir), []);
    assert.deepEqual(await readdir(stateDir()), []);
  });

  describe("imports that fail leave nothing behind", () => {
    let cp = "";
    let dir = "";
    let stream: Buffer = Buffer.alloc(0);
    before(async () => {
      dir = join(D(), "bad");
      ({ cp } = await sourceCheckpoint(dir, 12));
      await exportCheckpoint({
        store: S().store,
        unitId: "unit6",
        checkpointId: cp,
        snapshotPath: join(dir, "src", cp),
        stateDir: stateDir(),
        partSize: PART,
      });
      stream = await readObject(S().store, checkpointKeys(cp).stream, 1024 * MiB);
    });
    const restore = () => S().store.putObject(checkpointKeys(cp).stream, stream);
    const dstOf = async (name: string) => {
      const dst = join(dir, name);
      await mkdir(dst);
      return dst;
    };
    const assertClean = async (dst: string) => {
      assert.deepEqual(await readdir(dst), [], "no partial subvolume");
      assert.deepEqual(await childTools(), [], "no process");
    };

    it("a corrupt part: CHECKSUM_MISMATCH", async () => {
      const bad = Buffer.from(stream);
      bad[PART + 100] = (bad[PART + 100] ?? 0) ^ 0xff; // in part 2: part 1 is received already
      await S().store.putObject(checkpointKeys(cp).stream, bad);
      const dst = await dstOf("corrupt");
      try {
        await rejectsWith(importCheckpoint({ store: S().store, checkpointId: cp, destDir: dst }), "CHECKSUM_MISMATCH");
        await assertClean(dst);
      } finally {
        await restore();
      }
    });

    it("a truncated stream: TRUNCATED", async () => {
      await S().store.putObject(checkpointKeys(cp).stream, stream.subarray(0, stream.length - 10));
      const dst = await dstOf("truncated");
      try {
        await rejectsWith(importCheckpoint({ store: S().store, checkpointId: cp, destDir: dst }), "TRUNCATED");
        await assertClean(dst);
      } finally {
        await restore();
      }
    });

    it("cancelled mid-way: ABORTED", async () => {
      const dst = await dstOf("aborted");
      const ac = new AbortController();
      await rejectsWith(
        importCheckpoint({
          store: S().store,
          checkpointId: cp,
          destDir: dst,
          signal: ac.signal,
          onProgress: (p) => p.bytes > PART && ac.abort(),
        }),
        "ABORTED",
      );
      await assertClean(dst);
    });

    it("a stream that makes another subvolume than its manifest says: RECEIVE_FAILED", async () => {
      const other = randomId("other");
      const m = await readManifest(S().store, cp);
      await S().store.putObject(checkpointKeys(other).stream, stream);
      await S().store.putObject(
        checkpointKeys(other).manifest,
        Buffer.from(JSON.stringify({ ...m, checkpointId: other, chain: [other] })),
      );
      const dst = await dstOf("renamed");
      try {
        await rejectsWith(importCheckpoint({ store: S().store, checkpointId: other, destDir: dst }), "RECEIVE_FAILED");
        await assertClean(dst);
      } finally {
        await deleteExport({ store: S().store, checkpointId: other });
      }
    });

    it("hostile manifests and ids are refused before anything is received", async () => {
      const dst = await dstOf("hostile");
      await rejectsWith(importCheckpoint({ store: S().store, checkpointId: "../etc", destDir: dst }), "INVALID_ID");
      const m = await readManifest(S().store, cp);
      const evil = randomId("evil");
      const put = (body: unknown) =>
        S().store.putObject(checkpointKeys(evil).manifest, Buffer.from(JSON.stringify(body)));
      try {
        for (const body of [
          { ...m, checkpointId: evil, chain: ["../../x", evil], parentCheckpointId: "../../x" },
          {
            ...m,
            checkpointId: evil,
            chain: [evil],
            partSize: 2 ** 40,
            parts: [{ size: 2 ** 40, sha256: "a".repeat(64) }],
            compressedBytes: 2 ** 40,
          },
          { ...m, checkpointId: evil, chain: [evil], uncompressedBytes: -5 },
          "not an object",
        ]) {
          await put(body);
          await rejectsWith(
            importCheckpoint({ store: S().store, checkpointId: evil, destDir: dst }),
            "INVALID_MANIFEST",
          );
        }
        // A manifest whose part list agrees but whose stream is not there.
        await put({ ...m, checkpointId: evil, chain: [evil] });
        await rejectsWith(importCheckpoint({ store: S().store, checkpointId: evil, destDir: dst }), "NOT_FOUND");
        // An oversized manifest.
        await S().store.putObject(checkpointKeys(evil).manifest, Buffer.alloc(5 * MiB, 32));
        await rejectsWith(importCheckpoint({ store: S().store, checkpointId: evil, destDir: dst }), "INVALID_MANIFEST");
        await assertClean(dst);
      } finally {
        await deleteExport({ store: S().store, checkpointId: evil });
      }
    });
  });
});
