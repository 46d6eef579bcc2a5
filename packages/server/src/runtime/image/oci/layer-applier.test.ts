import assert from "node:assert/strict";
import { lstat, mkdir, readdir, readFile, readlink } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import { describe, it } from "node:test";
import { seededRandom } from "../../../soak/rng.js";
import { suiteTempDir } from "../../../testing/temp-dir.js";
import { applyLayerHere } from "./layer-applier.js";
import { makeTar, type TarItem } from "./test-archives.js";

const NAMES = ["a", "b", "c"];
const TARGETS = ["b", "a/b", "b/c", "/", "/a", "/c/a", "..", "../a", "../../b", "."];

/**
 * A random layer over a few names: directories, files, symlinks, hard links (to files it wrote),
 * whiteouts, opaque markers. Entries under a path that was a file are rare (they fail the layer).
 */
function randomLayer(random: () => number, entries: number): TarItem[] {
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)] as T;
  const files: string[] = [];
  const path = (): string => {
    const p = Array.from({ length: 1 + Math.floor(random() * 3) }, () => pick(NAMES)).join("/");
    const underFile = files.some((f) => p.startsWith(`${f}/`));
    return underFile && random() < 0.9 ? path() : p;
  };
  const items: TarItem[] = [];
  for (let i = 0; i < entries; i++) {
    const p = path();
    const r = random();
    if (r < 0.25) items.push({ name: `${p}/`, type: "directory", mode: pick([0o755, 0o700, 0o1777]) });
    else if (r < 0.45) {
      items.push({ name: p, data: `${p} ${i}`, mode: pick([0o644, 0o4755]) });
      files.push(p);
    } else if (r < 0.7) items.push({ name: p, type: "symlink", linkname: pick(TARGETS) });
    else if (r < 0.78 && files.length > 0) items.push({ name: p, type: "link", linkname: pick(files) });
    else if (r < 0.92) {
      const dir = p.split("/").slice(0, -1).join("/");
      items.push({ name: `${dir ? `${dir}/` : ""}.wh.${p.split("/").pop()}`, data: "" });
    } else items.push({ name: `${p}/.wh..wh..opq`, data: "" });
  }
  return items;
}

/** All that is below `root`: type, mode, owner, content or link target, mtime of non-directories. */
async function snapshot(root: string): Promise<string[]> {
  const out: string[] = [];
  const walk = async (dir: string, rel: string) => {
    for (const name of (await readdir(dir)).sort()) {
      const path = join(dir, name);
      const r = rel ? `${rel}/${name}` : name;
      const st = await lstat(path);
      const head = `${r} ${st.mode.toString(8)} ${st.uid}:${st.gid} nlink=${st.isDirectory() ? "-" : st.nlink}`;
      if (st.isDirectory()) {
        out.push(head);
        await walk(path, r);
      } else if (st.isSymbolicLink()) out.push(`${head} -> ${await readlink(path)} ${st.mtimeMs}`);
      else out.push(`${head} ${JSON.stringify(await readFile(path, "utf8"))} ${st.mtimeMs}`);
    }
  };
  await walk(root, "");
  return out;
}

async function applyTo(root: string, tar: Buffer, cacheParents: boolean): Promise<string> {
  try {
    await applyLayerHere(root, Readable.from([tar]), { uidShift: 100000, uidRange: 65536, cacheParents });
    return "ok";
  } catch (err) {
    return `${(err as Error).name}: ${(err as Error).message}`;
  }
}

describe("LayerApplier's parent cache", { skip: process.getuid?.() === 0 ? false : "needs root (chown)" }, () => {
  const dir = suiteTempDir("ums-oci-applier-");

  it("changes nothing: random layers give the same tree and the same errors with it and without it", async () => {
    const random = seededRandom(20261128);
    // The targets' absolute paths, on the host: a layer that got out of its root would write there.
    const hostPaths = ["/a", "/b", "/c"];
    const absent = (
      await Promise.all(
        hostPaths.map((p) =>
          lstat(p).then(
            () => p,
            () => undefined,
          ),
        ),
      )
    ).every((p) => p === undefined);
    let applied = 0;
    let layersInAll = 0;
    for (let n = 0; n < 150; n++) {
      const base = join(dir(), `case${n}`);
      const cached = join(base, "cached");
      const plain = join(base, "plain");
      await mkdir(cached, { recursive: true });
      await mkdir(plain);
      const layers = [randomLayer(random, 10), randomLayer(random, 16), randomLayer(random, 16)];
      for (const [i, items] of layers.entries()) {
        const tar = await makeTar(items);
        const a = await applyTo(cached, tar, true);
        const b = await applyTo(plain, tar, false);
        const what = `case ${n}, layer ${i + 1}: ${JSON.stringify(items.map((x) => [x.name, x.linkname ?? x.type ?? "file"]))}`;
        assert.equal(a, b, what);
        assert.deepEqual(await snapshot(cached), await snapshot(plain), what);
        layersInAll++;
        if (a === "ok") applied++; // a failed layer leaves the roots as they are: the next goes on them
      }
      assert.deepEqual((await readdir(base)).sort(), ["cached", "plain"], "nothing written beside the roots");
      if (absent) {
        for (const p of hostPaths) assert.equal(await lstat(p).catch(() => "absent"), "absent", `${p} on the host`);
      }
    }
    assert.ok(applied > layersInAll / 4, `${applied} of ${layersInAll} layers applied without an error`);
  });
});
