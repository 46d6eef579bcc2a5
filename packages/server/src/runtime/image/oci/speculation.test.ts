import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { existsSync } from "node:fs";
import { lstat, mkdir, readdir, readFile, readlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import { describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { suiteTempDir } from "../../../testing/temp-dir.js";
import { noUnhandledRejections } from "../../../testing/unhandled.js";
import { ImageArchiveError } from "./errors.js";
import { importOciArchive } from "./import-archive.js";
import { importUpload } from "./import-upload.js";
import {
  dockerSaveArchive,
  gzip,
  type ImageSpec,
  imageConfig,
  lowerLayer,
  makeTar,
  sha256,
  upperLayer,
} from "./test-archives.js";

/*
 * Issue #18: layers applied while the archive arrives (speculation.ts). Whatever the guess, the
 * image must be the one an import of the whole archive makes, and a guess that goes wrong must
 * leave nothing of it, in the image or outside it.
 */

const SHIFT = 100000;
const RANGE = 65536;

/** `data` as a request body would come: in pieces of `piece` bytes, a turn of the event loop apart. */
function trickle(data: Buffer, piece = 4096, failAt?: number): Readable {
  return Readable.from(
    (async function* () {
      for (let off = 0; off < data.length; off += piece) {
        if (failAt !== undefined && off >= failAt) throw new Error("the client went away");
        yield data.subarray(off, off + piece);
        await sleep(1);
      }
    })(),
  );
}

/** Every path below `root` with its type, owner, mode and content (or link target), sorted. */
async function tree(root: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(root, { recursive: true })) {
    const p = join(root, e);
    const s = await lstat(p);
    let what = s.isDirectory() ? "dir" : s.isSymbolicLink() ? `-> ${await readlink(p)}` : "?";
    if (s.isFile())
      what = createHash("sha256")
        .update(await readFile(p))
        .digest("hex");
    out.push(`${e} ${s.uid}:${s.gid} ${(s.mode & 0o7777).toString(8)} ${what}`);
  }
  return out.sort();
}

describe("layers applied while the archive arrives", {
  skip: process.getuid?.() === 0 ? false : "needs root (chown)",
}, () => {
  const dir = suiteTempDir("ums-oci-speculation-");
  let n = 0;
  noUnhandledRejections();

  async function space(): Promise<{ base: string; root: string; work: string; upload: string }> {
    const base = join(dir(), `case${n++}`);
    await mkdir(join(base, "work"), { recursive: true });
    await mkdir(join(base, "root"));
    return { base, root: join(base, "root"), work: join(base, "work"), upload: join(base, "upload.tar") };
  }

  /** The import as `ums serve` runs it (importUpload): the upload received while its layers are guessed. */
  async function speculative(archive: Buffer, failAt?: number) {
    const c = await space();
    const progress: string[] = [];
    try {
      const done = await importUpload(trickle(archive, 4096, failAt), c.root, {
        upload: c.upload,
        workDir: c.work,
        uidShift: SHIFT,
        uidRange: RANGE,
        onProgress: (p) => progress.push(p.message),
      });
      return { ...c, done, progress };
    } catch (err) {
      throw Object.assign(err as Error, { space: c });
    }
  }

  /** The same archive imported whole, with no guess: what the image must be. */
  async function plain(archive: Buffer): Promise<string[]> {
    const c = await space();
    await writeFile(c.upload, archive);
    await importOciArchive(c.upload, c.root, { workDir: c.work, uidShift: SHIFT, uidRange: RANGE });
    return tree(c.root);
  }

  const spec = async (): Promise<ImageSpec> => ({ layers: [await lowerLayer(), await upperLayer()] });
  const arrived = /applied [12]\/2 layers while the archive arrived/;

  it("layers that come in the manifest's order are applied as they arrive, and the image is the same", async () => {
    const archive = await dockerSaveArchive(await spec());
    const r = await speculative(archive);
    assert.ok(
      r.progress.some((m) => arrived.test(m)),
      r.progress.join("\n"),
    );
    assert.equal(r.done.layers, 2);
    assert.equal(r.done.stats.whiteouts, 2);
    assert.deepEqual(await tree(r.root), await plain(archive));
    assert.deepEqual(await readdir(join(r.root, "var/cache")), ["upper"]);
    assert.ok(!existsSync(join(r.root, "etc/old.conf")), "the upper layer's whiteout was applied after the lower");
  });

  it("layers that come in another order are undone and applied again in the manifest's", async () => {
    const archive = await dockerSaveArchive(await spec(), { order: [1, 0] });
    const r = await speculative(archive);
    assert.ok(!r.progress.some((m) => arrived.test(m)), r.progress.join("\n"));
    assert.deepEqual(await tree(r.root), await plain(archive));
    assert.deepEqual(
      await readdir(join(r.root, "var/cache")),
      ["upper"],
      "the upper layer's opaque dir hides the lower's",
    );
    assert.ok(!existsSync(join(r.root, "etc/old.conf")));
  });

  it("a tar in the archive that is no layer of the image leaves nothing in it", async () => {
    const junk = await makeTar([
      { name: "junk", data: "not from the image" },
      { name: "etc/passwd", data: "evil::0:0::/:/bin/sh\n" },
    ]);
    const archive = await dockerSaveArchive(await spec(), { first: [{ name: "extra/junk.tar", data: junk }] });
    const r = await speculative(archive);
    assert.ok(!existsSync(join(r.root, "junk")));
    assert.doesNotMatch(await readFile(join(r.root, "etc/passwd"), "utf8"), /evil/);
    assert.deepEqual(await tree(r.root), await plain(archive));
  });

  it("a guessed tar that tries to leave the root fails alone: the import goes on, nothing is written outside", async () => {
    const leaving = await makeTar([
      { name: "link", type: "symlink", linkname: "../../.." },
      { name: "link/escaped-by-link", data: "x" },
      { name: "../escaped-by-name", data: "x" },
    ]);
    const archive = await dockerSaveArchive(await spec(), { first: [{ name: "a/escape.tar", data: leaving }] });
    const r = await speculative(archive);
    assert.deepEqual(await tree(r.root), await plain(archive));
    for (const p of [r.base, join(r.base, ".."), join(r.base, "../.."), "/"]) {
      assert.ok(!existsSync(join(p, "escaped-by-link")), `nothing written at ${p}`);
      assert.ok(!existsSync(join(p, "escaped-by-name")), `nothing written at ${p}`);
    }
  });

  it("a gzip layer whose content is not its diff_id is refused as without the guess", async () => {
    const s = await spec();
    const other = await makeTar([{ name: "other", data: "not the layer the config names" }]);
    // The config's diff_ids name `s.layers`; the archive's second layer is `other`, gzip.
    const config = imageConfig(s);
    const configName = `${sha256(config)}.json`;
    const archive = await makeTar([
      { name: "l1/layer.tar", data: s.layers[0] as Buffer },
      { name: "l2/layer.tar", data: gzip(other) },
      { name: configName, data: config },
      {
        name: "manifest.json",
        data: JSON.stringify([{ Config: configName, Layers: ["l1/layer.tar", "l2/layer.tar"] }]),
      },
    ]);
    await assert.rejects(speculative(archive), (err: Error) => {
      assert.ok(err instanceof ImageArchiveError, String(err));
      assert.match(err.message, /layer 2: .*does not match its diff_id/);
      return true;
    });
  });

  it("an upload cut short stops the guess: nothing writes to the root afterwards", async () => {
    const big = await makeTar(
      Array.from({ length: 400 }, (_, i) => ({ name: `data/f${i}`, data: Buffer.alloc(4096, i) })),
    );
    const archive = await dockerSaveArchive({ layers: [big, await upperLayer()] });
    let space: { root: string; upload: string } | undefined;
    await assert.rejects(speculative(archive, archive.length >> 1), (err: Error & { space?: typeof space }) => {
      assert.match(err.message, /went away/);
      space = err.space;
      return true;
    });
    assert.ok(space);
    const now = await tree(space.root);
    await sleep(200);
    assert.deepEqual(await tree(space.root), now, "stopped: the root does not change");
    assert.ok(now.length < 400, "the layer's second half never arrived");
  });
});
