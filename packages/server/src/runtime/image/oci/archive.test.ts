import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { createReadStream } from "node:fs";
import { lstat, mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, it } from "node:test";
import { suiteTempDir } from "../../../testing/temp-dir.js";
import { noUnhandledRejections } from "../../../testing/unhandled.js";
import { readOciArchive } from "./archive.js";
import { ImageArchiveError } from "./errors.js";
import { importOciArchive } from "./import-archive.js";
import {
  blob,
  dockerSaveArchive,
  gzip,
  imageConfig,
  lowerLayer,
  makeTar,
  OCI_LAYER_GZIP,
  ociLayoutArchive,
  sha256,
  type TarItem,
  upperLayer,
} from "./test-archives.js";

const SHIFT = 100000;
const RANGE = 65536;

const spec = async () => ({
  layers: [await lowerLayer(), await upperLayer()],
  env: ["PATH=/usr/local/bin:/usr/bin:/bin", "APP_MODE=prod"],
  workingDir: "/app",
  user: "app:app",
});

/** Rejects with an ImageArchiveError whose message matches `re`. */
async function rejectsWith(p: Promise<unknown>, re: RegExp): Promise<void> {
  await assert.rejects(p, (err: Error) => {
    assert.ok(err instanceof ImageArchiveError, `not an ImageArchiveError: ${err.stack}`);
    assert.match(err.message, re);
    return true;
  });
}

/** Every path under `dir` that is a symlink. */
async function symlinksUnder(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const e of await readdir(dir, { withFileTypes: true, recursive: true })) {
    if (e.isSymbolicLink()) out.push(join(e.parentPath, e.name));
  }
  return out;
}

describe("image archives", { skip: process.getuid?.() === 0 ? false : "needs root (chown)" }, () => {
  const dir = suiteTempDir("ums-oci-archive-");
  let n = 0;
  noUnhandledRejections();

  async function place(data: Buffer, name = "image.tar"): Promise<{ archive: string; work: string; root: string }> {
    const base = join(dir(), `case${n++}`);
    await mkdir(join(base, "work"), { recursive: true });
    await mkdir(join(base, "root"));
    await writeFile(join(base, name), data);
    return { archive: join(base, name), work: join(base, "work"), root: join(base, "root") };
  }
  const importIt = (c: { archive: string; work: string; root: string }) =>
    importOciArchive(c.archive, c.root, { workDir: c.work, uidShift: SHIFT, uidRange: RANGE });

  async function checkImported(root: string): Promise<void> {
    const own = async (p: string) => {
      const s = await lstat(join(root, p));
      return [s.uid, s.gid, s.mode & 0o7777];
    };
    assert.deepEqual(await own(""), [SHIFT, SHIFT, 0o755]);
    assert.deepEqual(await own("home/app/notes"), [SHIFT + 1000, SHIFT + 1000, 0o644]);
    assert.deepEqual(await own("home/app"), [SHIFT + 1000, SHIFT + 1000, 0o750]);
    assert.deepEqual(await own("usr/bin/su"), [SHIFT, SHIFT, 0o4755]);
    assert.deepEqual((await readdir(join(root, "etc"))).sort(), ["passwd"], "etc/old.conf whited out");
    assert.deepEqual(await readdir(join(root, "var/cache")), ["upper"], "var/cache made opaque");
    assert.equal((await lstat(join(root, "var/cache"))).mode & 0o7777, 0o700);
    assert.equal(await readFile(join(root, "app/run.sh"), "utf8"), "#!/bin/sh\necho hi\n");
  }

  it("imports a docker save archive (legacy layout, an uncompressed and a gzip layer)", async () => {
    const s = await spec();
    const c = await place(await dockerSaveArchive(s, { gzipLayers: [false, true] }));
    const progress: string[] = [];
    const done = await importOciArchive(c.archive, c.root, {
      workDir: c.work,
      uidShift: SHIFT,
      uidRange: RANGE,
      onProgress: (p) => progress.push(`${p.layer}/${p.layers}`),
    });
    assert.equal(done.format, "docker-save");
    assert.deepEqual(done.config, { env: s.env, workingDir: "/app", user: "app:app" });
    assert.equal(done.layers, 2);
    assert.equal(done.reference, "example/app:1.0");
    assert.equal(done.platform, "linux/amd64");
    assert.equal(done.stats.whiteouts, 2);
    assert.equal(done.stats.entries, 15);
    assert.deepEqual(progress, ["0/0", "1/2", "2/2", "2/2"]);
    await checkImported(c.root);
  });

  it("imports an OCI layout (gzip layers, a multi-platform index) and reads it from a stream too", async () => {
    const s = await spec();
    const data = await ociLayoutArchive(s);
    const c = await place(data);
    const done = await importIt(c);
    assert.equal(done.format, "oci-layout");
    assert.deepEqual(done.config, { env: s.env, workingDir: "/app", user: "app:app" });
    assert.equal(done.reference, "docker.io/example/app:2.0");
    assert.equal(done.layers, 2);
    await checkImported(c.root);

    const c2 = await place(gzip(data), "image.tar.gz"); // the whole archive gzipped: fine too
    const read = await readOciArchive(createReadStream(c2.archive), c2.work);
    assert.equal(read.format, "oci-layout");
    assert.deepEqual(
      read.layers.map((l) => l.compression),
      ["gzip", "gzip"],
    );
    assert.deepEqual(
      read.layers.map((l) => l.diffId),
      s.layers.map((l) => `sha256:${sha256(l)}`),
    );
    assert.deepEqual(read.config.env, s.env);
  });

  it("prefers manifest.json when a docker 25+ archive has both it and index.json", async () => {
    const s = await spec();
    const c = await place(await ociLayoutArchive(s, { dockerManifest: true, singleManifest: true }));
    const read = await readOciArchive(c.archive, c.work);
    assert.equal(read.format, "docker-save");
    assert.equal(read.reference, "example/app:25");
    assert.deepEqual(read.config, { env: s.env, workingDir: "/app", user: "app:app" });
  });

  it("reads an image with no Env, WorkingDir or User", async () => {
    const c = await place(await dockerSaveArchive({ layers: [await makeTar([{ name: "f", data: "x" }])] }));
    const done = await importIt(c);
    assert.deepEqual(done.config, { env: [], workingDir: null, user: null });
  });

  it("turns symlinks of the outer archive into files, never symlinks, and ignores those that leave it", async () => {
    const s = await spec();
    const shared = sha256(s.layers[0] as Buffer);
    const extra: TarItem[] = [
      { name: "dup/", type: "directory" },
      { name: "dup/layer.tar", type: "symlink", linkname: `../${sha256(`layer 0 ${shared}`)}/layer.tar` },
      { name: "escape", type: "symlink", linkname: "../../../../etc/passwd" },
      { name: "abs", type: "symlink", linkname: "/etc/passwd" },
      { name: "hard", type: "link", linkname: "repositories" },
    ];
    const c = await place(await dockerSaveArchive(s, { extra }));
    await readOciArchive(c.archive, c.work);
    assert.deepEqual(await symlinksUnder(c.work), []);
    assert.deepEqual(await readFile(join(c.work, "dup/layer.tar")), s.layers[0]);
    assert.equal((await lstat(join(c.work, "escape")).catch(() => undefined)) ?? "absent", "absent");
    assert.equal((await lstat(join(c.work, "abs")).catch(() => undefined)) ?? "absent", "absent");
  });

  it("stops when aborted, with the abort's error", async () => {
    const c = await place(await dockerSaveArchive(await spec()));
    const ac = new AbortController();
    await assert.rejects(
      importOciArchive(c.archive, c.root, {
        workDir: c.work,
        uidShift: SHIFT,
        uidRange: RANGE,
        signal: ac.signal,
        onProgress: (p) => {
          if (p.layer === 2) ac.abort();
        },
      }),
      { name: "AbortError" },
    );
    assert.ok((await readdir(c.root)).includes("etc"), "layer 1 was applied, layer 2 not");
    assert.equal(await lstat(join(c.root, "app")).catch(() => "absent"), "absent");
  });

  describe("large files, read where they are in the archive and hashed while the layers are applied", () => {
    const bigLayer = async (seed: string) =>
      makeTar([
        { name: "big/", type: "directory" },
        { name: `big/${seed}.bin`, data: randomBytes(3 * 1024 * 1024) },
        { name: "big/small", data: seed },
      ]);

    it("imports them; the work directory holds empty stand-ins", async () => {
      const l1 = await bigLayer("one");
      const l2 = await bigLayer("two");
      for (const data of [
        await dockerSaveArchive({ layers: [l1, l2] }, { gzipLayers: [false, true] }),
        await ociLayoutArchive({ layers: [l1, l2] }, { singleManifest: true }),
      ]) {
        const c = await place(data);
        const done = await importIt(c);
        assert.equal(done.layers, 2);
        assert.deepEqual((await readdir(join(c.root, "big"))).sort(), ["one.bin", "small", "two.bin"]);
        assert.equal((await lstat(join(c.root, "big/two.bin"))).size, 3 * 1024 * 1024);
        const work = await readdir(c.work, { recursive: true, withFileTypes: true });
        const sizes = await Promise.all(
          work.filter((e) => e.isFile()).map(async (e) => (await lstat(join(e.parentPath, e.name))).size),
        );
        assert.ok(sizes.length > 0);
        assert.deepEqual(new Set(sizes), new Set([0]), "nothing copied");
      }
    });

    it("a large blob or layer that does not match its digest, used or not, even before another problem", async () => {
      const l1 = await bigLayer("one");
      const flip = (b: Buffer) => {
        const copy = Buffer.from(b);
        const at = copy.length - 100_000;
        copy[at] = (copy[at] ?? 0) ^ 0xff;
        return copy;
      };
      // A gzip layer of the image, corrupt.
      const corruptLayer = await ociLayoutArchive(
        { layers: [l1] },
        {
          singleManifest: true,
          edit: (items) => {
            const layer = items.find((i) => Buffer.isBuffer(i.data) && i.data.length > 1024 * 1024);
            assert.ok(layer && Buffer.isBuffer(layer.data));
            layer.data = flip(layer.data);
          },
        },
      );
      await rejectsWith(importIt(await place(corruptLayer)), /^blob sha256:[0-9a-f]{64} does not match its digest/);
      // A blob no image uses, corrupt; then a layer in zstd (refused when the manifest is read).
      const unused = blob(randomBytes(2 * 1024 * 1024));
      const extra = { ...unused.item, data: flip(unused.item.data as Buffer) };
      for (const zstd of [false, true]) {
        const data = await ociLayoutArchive(
          { layers: [l1] },
          {
            singleManifest: true,
            ...(zstd && { layerMediaType: "application/vnd.oci.image.layer.v1.tar+zstd" }),
            edit: (items) => items.splice(2, 0, extra),
          },
        );
        await rejectsWith(
          importIt(await place(data)),
          new RegExp(`^blob ${unused.digest} does not match its digest \\(its content is sha256:`),
        );
      }
      // An uncompressed docker save layer that is not its diff_id.
      const other = await bigLayer("other");
      const save = await dockerSaveArchive({ layers: [l1] });
      assert.equal(other.length, l1.length);
      const swapped = Buffer.from(save);
      other.copy(swapped, save.indexOf(l1)); // the same archive, another layer.tar of the same size
      await rejectsWith(
        importIt(await place(swapped)),
        /^layer 1 \([0-9a-f]{64}\/layer.tar\) does not match its diff_id in the image config/,
      );
    });

    it("a layer that is a symlink to another one, in the archive", async () => {
      const layer = await bigLayer("one");
      const diff = `sha256:${sha256(layer)}`;
      const config = imageConfig({ layers: [layer, layer] });
      const configName = `${sha256(config)}.json`;
      const data = await makeTar([
        { name: "first/", type: "directory" },
        { name: "first/layer.tar", data: layer },
        { name: "second/", type: "directory" },
        { name: "second/layer.tar", type: "symlink", linkname: "../first/layer.tar" },
        { name: configName, data: config },
        {
          name: "manifest.json",
          data: JSON.stringify([{ Config: configName, Layers: ["first/layer.tar", "second/layer.tar"] }]),
        },
      ]);
      const c = await place(data);
      const done = await importIt(c);
      assert.equal(done.layers, 2);
      assert.equal(diff, JSON.parse(config.toString()).rootfs.diff_ids[1]);
      assert.equal((await lstat(join(c.root, "big/one.bin"))).size, 3 * 1024 * 1024);
    });

    it("an archive that ends inside a large file", async () => {
      const data = await dockerSaveArchive({ layers: [await bigLayer("one")] });
      for (const at of [1024 * 1024 + 3, 2 * 1024 * 1024, 3 * 1024 * 1024 - 512]) {
        await rejectsWith(importIt(await place(data.subarray(0, at))), /the archive is truncated/);
      }
    });
  });

  describe("refuses", () => {
    it("archives without a manifest, garbage, truncated and empty files", async () => {
      const plain = await place(await makeTar([{ name: "hello.txt", data: "hi" }]));
      await rejectsWith(
        readOciArchive(plain.archive, plain.work),
        /archive has no manifest.json or index.json: not a docker save or OCI layout archive/,
      );
      const garbage = await place(randomBytes(20_000));
      await rejectsWith(importIt(garbage), /the archive is not a valid tar archive/);
      const full = await dockerSaveArchive(await spec());
      const truncated = await place(full.subarray(0, Math.floor(full.length / 2)));
      await rejectsWith(importIt(truncated), /truncated|not in the archive|no manifest/);
      await rejectsWith(importIt(await place(Buffer.alloc(0))), /no manifest.json or index.json/);
      await assert.rejects(
        importIt({ ...(await place(Buffer.alloc(0))), archive: join(dir(), "no-such-archive.tar") }),
        (err: NodeJS.ErrnoException) => !(err instanceof ImageArchiveError) && err.code === "ENOENT",
      );
      const gz = gzip(full);
      await rejectsWith(importIt(await place(gz.subarray(0, Math.floor(gz.length / 2)))), /not valid gzip data/);
      assert.deepEqual(await readdir(truncated.root), [], "nothing applied from a broken archive");
    });

    it("entries of the outer archive that leave it", async () => {
      await rejectsWith(
        importIt(await place(await makeTar([{ name: "../x", data: "x" }]))),
        /'..\/x' leaves the archive/,
      );
      await rejectsWith(
        importIt(await place(await makeTar([{ name: "/x", data: "x" }]))),
        /'\/x' is not a relative path/,
      );
      assert.equal(
        await lstat(join(dir(), "x")).then(
          () => "there",
          () => "absent",
        ),
        "absent",
      );
    });

    it("a blob that does not match its digest", async () => {
      const s = await spec();
      const data = await ociLayoutArchive(s, {
        edit: (items) => {
          const layer = items.find((i) => i.name.startsWith("blobs/") && Buffer.isBuffer(i.data) && i.data[0] === 0x1f);
          assert.ok(layer && Buffer.isBuffer(layer.data));
          const copy = Buffer.from(layer.data);
          copy[copy.length - 10] = (copy[copy.length - 10] ?? 0) ^ 0xff;
          layer.data = copy;
        },
      });
      await rejectsWith(importIt(await place(data)), /blob sha256:[0-9a-f]{64} does not match its digest/);
    });

    it("a manifest naming a blob the archive lacks, or with a malformed digest", async () => {
      const s = await spec();
      const missing = await ociLayoutArchive(s, {
        singleManifest: true,
        edit: (items) => {
          const i = items.findIndex(
            (it) => it.name.startsWith("blobs/sha256/") && Buffer.isBuffer(it.data) && it.data[0] === 0x1f,
          );
          items.splice(i, 1);
        },
      });
      await rejectsWith(importIt(await place(missing)), /the archive has no blob sha256:[0-9a-f]{64} \(layer 1\)/);
      const evil = await ociLayoutArchive(s, {
        singleManifest: true,
        edit: (items) => {
          const index = items.find((it) => it.name === "index.json");
          assert.ok(index);
          index.data = JSON.stringify({ schemaVersion: 2, manifests: [{ digest: "sha256:../../../etc/passwd" }] });
        },
      });
      await rejectsWith(importIt(await place(evil)), /invalid digest/);
    });

    it("zstd layers, by media type or by content", async () => {
      const s = await spec();
      const byType = await ociLayoutArchive(s, {
        singleManifest: true,
        layerMediaType: "application/vnd.oci.image.layer.v1.tar+zstd",
      });
      await rejectsWith(importIt(await place(byType)), /layer 1: compression zstd is not supported: use docker save/);
      const zstd = (l: Buffer) => Buffer.concat([Buffer.from([0x28, 0xb5, 0x2f, 0xfd]), l]);
      const byContent = await ociLayoutArchive(s, {
        singleManifest: true,
        layerData: zstd,
        layerMediaType: OCI_LAYER_GZIP,
      });
      await rejectsWith(importIt(await place(byContent)), /compression zstd is not supported/);
    });

    it("a layer that does not match its diff_id", async () => {
      const s = await spec();
      const data = await dockerSaveArchive({ ...s, layers: [s.layers[0] as Buffer] }, { gzipLayers: [true] });
      // The same archive, its gzip layer swapped for another one: the config's diff_id no longer matches.
      const other = await ociLayoutArchive(
        { ...s, layers: [s.layers[1] as Buffer] },
        {
          singleManifest: true,
          edit: (items) => {
            const config = items.find((i) => i.name.startsWith("blobs/") && String(i.data).includes('"rootfs"'));
            assert.ok(config);
            const fake = JSON.parse(String(config.data));
            fake.rootfs.diff_ids = [`sha256:${sha256(s.layers[0] as Buffer)}`];
            const replaced = blob(JSON.stringify(fake));
            Object.assign(config, replaced.item);
            const manifest = items.find((i) => String(i.data).includes('"schemaVersion"'));
            assert.ok(manifest);
            const m = JSON.parse(String(manifest.data));
            m.config.digest = replaced.digest;
            const newManifest = blob(JSON.stringify(m));
            Object.assign(manifest, newManifest.item);
            const index = items.find((i) => i.name === "index.json");
            assert.ok(index);
            const idx = JSON.parse(String(index.data));
            idx.manifests[0].digest = newManifest.digest;
            index.data = JSON.stringify(idx);
          },
        },
      );
      await importIt(await place(data)); // the unchanged one is fine
      const c = await place(other);
      await rejectsWith(importIt(c), /layer 1: the layer's content \(sha256:[0-9a-f]+\) does not match its diff_id/);
    });

    it("an attacking layer, named by its layer number", async () => {
      const s = await spec();
      const bad = await makeTar([{ name: "a/../../b", data: "x" }]);
      const c = await place(await dockerSaveArchive({ ...s, layers: [s.layers[0] as Buffer, bad] }));
      await rejectsWith(importIt(c), /^layer 2: entry 'a\/..\/..\/b' leaves the image/);
      const uid = await makeTar([{ name: "f", data: "x", uid: 70000 }]);
      await rejectsWith(
        importIt(await place(await dockerSaveArchive({ layers: [uid] }))),
        /^layer 1: entry 'f' is owned by uid 70000, outside the 65536 ids a unit maps/,
      );
    });

    it("a windows image, and a root or work directory that is not empty", async () => {
      const win = await dockerSaveArchive({ layers: [], configExtra: { os: "windows" } });
      await rejectsWith(importIt(await place(win)), /the image is for windows/);
      const c = await place(await dockerSaveArchive(await spec()));
      await writeFile(join(c.root, "leftover"), "x");
      await assert.rejects(
        importIt(c),
        (err: Error) => !(err instanceof ImageArchiveError) && /not empty/.test(err.message),
      );
    });
  });
});
