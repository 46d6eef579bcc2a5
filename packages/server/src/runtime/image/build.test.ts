import assert from "node:assert/strict";
import { lstat, mkdir, mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { createSubvolume, isReadonly, isSubvolume } from "../storage/btrfs.js";
import { mountsBelow } from "../storage/mounts.js";
import { closePool, openPool, type Pool } from "../storage/pool.js";
import { type BuildProgress, buildImage, IMAGE_CONTENT_VERSION, imagePaths, readImageManifest } from "./build.js";
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

describe("building an image in a fresh pool", { skip: root ? false : "needs root" }, () => {
  let dir: string;
  let pool: Pool;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), "ums-image-"));
    pool = await openPool({ dataDir: dir, sizeBytes: 3 * 1024 ** 3 });
  });
  after(async () => {
    if (!dir) return;
    await closePool({ dataDir: dir }).catch((err) => console.error("closePool:", err));
    await rm(dir, { recursive: true, force: true });
  });

  it("replaces the leftover of a crashed build and reports its steps in order", async () => {
    const paths = imagePaths(pool, "fresh");
    await createSubvolume(paths.building);
    await createSubvolume(join(paths.building, "nested"));
    await mkdir(join(paths.building, "etc"));
    await writeFile(join(paths.building, "etc/leftover"), "x");

    const events: BuildProgress[] = [];
    const t0 = performance.now();
    const path = await buildImage({ pool, name: "fresh", variant: "test", onProgress: (e) => events.push(e) });
    const seconds = (performance.now() - t0) / 1000;
    console.log(`# test variant built in ${seconds.toFixed(1)} s`);
    assert.equal(path, paths.path);
    assert.ok(events.some((e) => e.step === "prepare" && /leftover/.test(e.message)));
    assertProgress(events);
    assert.equal(await isReadonly(path), true);
    await assert.rejects(stat(paths.building), { code: "ENOENT" });
    await assert.rejects(stat(join(path, "etc/leftover")), { code: "ENOENT" });
    const manifest = await readImageManifest(pool, "fresh");
    assert.equal(manifest?.name, "fresh");
    assert.equal((await stat(join(path, "home/unit"))).uid, 101000);
  });

  it("returns the cached image at once, and an aborted forced rebuild leaves it intact", async () => {
    const paths = imagePaths(pool, "fresh");
    const before = await readImageManifest(pool, "fresh");
    const t0 = performance.now();
    await buildImage({ pool, name: "fresh", variant: "test" });
    assert.ok(performance.now() - t0 < 1000);

    const ac = new AbortController();
    const aborted = buildImage({
      pool,
      name: "fresh",
      variant: "test",
      force: true,
      signal: ac.signal,
      onProgress: (e) => {
        if (e.step === "bootstrap" && e.message.startsWith("I: running apt-get update")) ac.abort();
      },
    });
    await assert.rejects(aborted);
    await assert.rejects(stat(paths.building), { code: "ENOENT" });
    assert.deepEqual(await mountsBelow(pool.imagesDir), []);
    assert.deepEqual(await readImageManifest(pool, "fresh"), before);
    const t1 = performance.now();
    assert.equal(await buildImage({ pool, name: "fresh", variant: "test" }), paths.path);
    assert.ok(performance.now() - t1 < 1000);
  });
});
