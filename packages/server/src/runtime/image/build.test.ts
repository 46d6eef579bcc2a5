import assert from "node:assert/strict";
import { lstat, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createSubvolume, isReadonly, isSubvolume, listSubvolumes } from "../storage/btrfs.js";
import { mountsBelow } from "../storage/mounts.js";
import { closePool, openPool, type Pool } from "../storage/pool.js";
import { type BuildProgress, buildImage } from "./build.js";
import { IMAGE_CONTENT_VERSION, imagePaths, readImageManifest } from "./image-store.js";
import { IMAGE_PACKAGES } from "./packages.js";
import { shiftTree, UID_SHIFT } from "./shift.js";
import { type TestImage, testImage } from "./test-image.js";

const root = process.getuid?.() === 0;
const STEP_ORDER = ["prepare", "bootstrap", "configure", "shift", "finalize", "done"];

/** The distinct steps in the order they were first reported. */
function stepsOf(events: BuildProgress[]): string[] {
  const out: string[] = [];
  for (const e of events) if (out.at(-1) !== e.step) out.push(e.step);
  return out;
}

function assertProgress(events: BuildProgress[]) {
  assert.deepEqual(stepsOf(events), STEP_ORDER);
  const percents = events.map((e) => e.percent).filter((p): p is number => p !== undefined);
  assert.deepEqual(
    percents,
    [...percents].sort((a, b) => a - b),
    "percentages never go back",
  );
  assert.equal(percents.at(-1), 100);
  assert.ok(
    events.some((e) => e.step === "bootstrap" && e.message.startsWith("I: ")),
    "mmdebstrap lines are streamed",
  );
}

describe("the shared test image", { skip: root ? false : "needs root" }, () => {
  let image: TestImage;
  const events: BuildProgress[] = [];
  before(async () => {
    image = await testImage({ onProgress: (p) => events.push(p) });
  });

  it("is a read-only subvolume that cannot be written", async () => {
    assert.equal(await isSubvolume(image.path), true);
    assert.equal(await isReadonly(image.path), true);
    await assert.rejects(writeFile(join(image.path, "etc/new"), "x"), { code: "EROFS" });
    assert.deepEqual(
      await readdir(join(image.pool.imagesDir)).then((l) => l.filter((n) => n.includes("building"))),
      [],
    );
  });

  it("is shifted by UID_SHIFT: root is 100000, /home/unit is 101000, nothing is left unshifted", async () => {
    const st = await stat(image.path);
    assert.deepEqual([st.uid, st.gid], [UID_SHIFT, UID_SHIFT]);
    const home = await stat(join(image.path, "home/unit"));
    assert.deepEqual([home.uid, home.gid], [101000, 101000]);
    assert.ok(home.isDirectory());
    const stats = await shiftTree(image.path); // would try (and fail) to chown anything unshifted
    assert.equal(stats.changed, 0);
    assert.ok(stats.entries > 5000, `${stats.entries} entries`);
  });

  it("keeps sudo setuid root (100000) and lets unit use it without a password", async () => {
    const sudo = await stat(join(image.path, "usr/bin/sudo"));
    assert.equal(sudo.uid, 100000);
    assert.ok(sudo.mode & 0o4000, `sudo mode ${sudo.mode.toString(8)}`);
    const sudoers = join(image.path, "etc/sudoers.d/unit");
    assert.equal(await readFile(sudoers, "utf8"), "unit ALL=(ALL) NOPASSWD:ALL\n");
    const st = await stat(sudoers);
    assert.equal(st.mode & 0o7777, 0o440);
    assert.equal(st.uid, 100000);
    const passwd = await readFile(join(image.path, "etc/passwd"), "utf8");
    assert.match(passwd, /^unit:x:1000:1000:[^:]*:\/home\/unit:\/bin\/bash$/m);
    assert.match(await readFile(join(image.path, "etc/group"), "utf8"), /^unit:x:1000:$/m);
  });

  it("ships the placeholders and mount points the runtime fills", async () => {
    assert.equal(await readFile(join(image.path, "etc/hostname"), "utf8"), "unit\n");
    assert.match(await readFile(join(image.path, "etc/hosts"), "utf8"), /^127\.0\.1\.1\tunit$/m);
    const resolv = await lstat(join(image.path, "etc/resolv.conf"));
    assert.ok(resolv.isFile());
    assert.equal(resolv.size, 0);
    const unitDir = await lstat(join(image.path, ".unit"));
    assert.ok(unitDir.isDirectory());
    assert.deepEqual(await readdir(join(image.path, ".unit")), []);
    assert.deepEqual((await readdir(join(image.path, "var/lib/apt/lists"))).sort(), ["partial"]);
    assert.match(await readFile(join(image.path, "etc/apt/sources.list"), "utf8"), /bookworm main/);
  });

  it("has a manifest with packages, uid shift, build time and content version", async () => {
    const m = image.manifest;
    assert.equal(m.variant, "test");
    assert.equal(m.contentVersion, IMAGE_CONTENT_VERSION);
    assert.equal(m.uidShift, 100000);
    assert.equal(m.uidRange, 65536);
    assert.deepEqual(m.packages, [...IMAGE_PACKAGES.test]);
    for (const p of [...IMAGE_PACKAGES.test, "bash", "passwd"]) assert.ok(m.installed[p], `${p} installed`);
    assert.ok(!Number.isNaN(Date.parse(m.builtAt)));
    assert.ok(m.buildSeconds > 0);
    if (events.some((e) => e.step === "bootstrap")) assertProgress(events); // this process built it
  });

  it("a second build without force returns at once from the cache", async () => {
    const seen: BuildProgress[] = [];
    const t0 = performance.now();
    const path = await buildImage({ pool: image.pool, name: "test", variant: "test", onProgress: (p) => seen.push(p) });
    const ms = performance.now() - t0;
    assert.equal(path, image.path);
    assert.ok(ms < 1000, `cached build took ${ms.toFixed(0)} ms`);
    assert.deepEqual(stepsOf(seen), ["cache"]);
  });
});

/** Makes a throwaway pool for one suite; `after` unmounts it and removes it, failed or not. */
function throwawayPool(sizeGiB: number): { pool: () => Pool } {
  let dir: string | undefined;
  let pool: Pool | undefined;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "ums-image-"));
    pool = await openPool({ dataDir: dir, sizeBytes: sizeGiB * 1024 ** 3 });
  });
  after(async () => {
    if (!dir) return;
    await closePool({ dataDir: dir }).catch((err) => console.error("closePool:", err));
    await rm(dir, { recursive: true, force: true });
  });
  return {
    pool: () => {
      if (!pool) throw new Error("pool not open");
      return pool;
    },
  };
}

describe("interrupted builds", { skip: root ? false : "needs root" }, () => {
  const t = throwawayPool(1);

  it("a build removes a crashed build's leftover first, and an aborted build leaves nothing behind", async () => {
    const pool = t.pool();
    const paths = imagePaths(pool, "probe");
    await createSubvolume(paths.building);
    await createSubvolume(join(paths.building, "nested"));
    await mkdir(join(paths.building, "proc"));
    await writeFile(join(paths.building, "leftover"), "x");

    const events: BuildProgress[] = [];
    const ac = new AbortController();
    const build = buildImage({
      pool,
      name: "probe",
      variant: "test",
      signal: ac.signal,
      onProgress: (e) => {
        events.push(e);
        if (e.step === "bootstrap" && e.message.startsWith("I: ")) ac.abort();
      },
    });
    await assert.rejects(build);
    assert.deepEqual(stepsOf(events), ["prepare", "bootstrap"]);
    assert.ok(events.some((e) => e.step === "prepare" && /leftover/.test(e.message)));
    await assert.rejects(stat(paths.building), { code: "ENOENT" });
    await assert.rejects(stat(paths.path), { code: "ENOENT" });
    assert.equal(await readImageManifest(pool, "probe"), undefined);
    assert.deepEqual(await mountsBelow(pool.imagesDir), []);
    assert.deepEqual(await listSubvolumes(pool.path), []);
  });
});

describe("an aborted forced rebuild of the shared image", { skip: root ? false : "needs root" }, () => {
  it("leaves the cached image as it was", async () => {
    const image = await testImage();
    const paths = imagePaths(image.pool, "test");
    const ac = new AbortController();
    const aborted = buildImage({
      pool: image.pool,
      name: "test",
      variant: "test",
      force: true,
      signal: ac.signal,
      onProgress: (e) => {
        if (e.step === "bootstrap" && e.message.startsWith("I: ")) ac.abort();
      },
    });
    await assert.rejects(aborted);
    await assert.rejects(stat(paths.building), { code: "ENOENT" });
    assert.deepEqual(await mountsBelow(image.pool.imagesDir), []);
    assert.deepEqual(await readImageManifest(image.pool, "test"), image.manifest);
    const t0 = performance.now();
    assert.equal(await buildImage({ pool: image.pool, name: "test", variant: "test" }), image.path);
    assert.ok(performance.now() - t0 < 1000);
  });
});

// A complete build takes about a minute (more on a busy host) and downloads from the mirror, so it
// runs on request; the shared image above is checked on every run and built on a fresh machine.
const FULL_BUILD = process.env.UMS_TEST_IMAGE_BUILD === "1";

describe("a complete build into a throwaway pool", {
  skip: !root ? "needs root" : FULL_BUILD ? false : "set UMS_TEST_IMAGE_BUILD=1 to run a complete build",
}, () => {
  const t = throwawayPool(3);

  it("reports its steps in order and ends with a read-only, shifted image", async () => {
    const pool = t.pool();
    const events: BuildProgress[] = [];
    const t0 = performance.now();
    const path = await buildImage({ pool, name: "fresh", variant: "test", onProgress: (e) => events.push(e) });
    console.log(`# test variant built in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
    assertProgress(events);
    assert.equal(await isReadonly(path), true);
    assert.equal((await stat(join(path, "home/unit"))).uid, 101000);
    assert.equal((await readImageManifest(pool, "fresh"))?.name, "fresh");
    await assert.rejects(stat(imagePaths(pool, "fresh").building), { code: "ENOENT" });

    const t1 = performance.now();
    const seen: BuildProgress[] = [];
    assert.equal(await buildImage({ pool, name: "fresh", variant: "test", onProgress: (e) => seen.push(e) }), path);
    assert.ok(performance.now() - t1 < 1000);
    assert.deepEqual(stepsOf(seen), ["cache"]);
  });
});
