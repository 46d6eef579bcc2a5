// The package sets recipes build on are a cache (recipe-images.ts prunePackageImages): the most
// recently used few and any used within a day stay, as does the one in use; the rest go.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, rm, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { describe, it } from "node:test";
import { prunePackageImages } from "./recipe-images.js";

describe("package sets of recipes", () => {
  it("keeps the in-use, the three most recently used and any used within a day; removes the rest", async () => {
    const pool = await mkdtemp(join(tmpdir(), "ums-pkgs-"));
    try {
      const images = join(pool, "images");
      await mkdir(images);
      const now = Date.now();
      const day = 24 * 3600_000;
      const sets = ["a", "b", "c", "d", "e", "f"].map((c, i) => ({ name: `pkgs-${c.repeat(16)}`, daysAgo: i + 1 }));
      sets.push({ name: `pkgs-${"9".repeat(16)}`, daysAgo: 0.5 });
      for (const s of sets) {
        await mkdir(join(images, s.name));
        await writeFile(join(images, `${s.name}.json`), "{}");
        const t = new Date(now - s.daysAgo * day);
        await utimes(join(images, `${s.name}.json`), t, t);
      }
      await mkdir(join(images, "base"));
      await writeFile(join(images, "base.json"), "{}");
      const inUse = join(images, `pkgs-${"f".repeat(16)}`);
      const removed = await prunePackageImages(pool, inUse, now);
      // Newest first: 9 (half a day), a, b (the three kept), c, d, e go; f is in use.
      assert.deepEqual(removed.sort(), [`pkgs-${"c".repeat(16)}`, `pkgs-${"d".repeat(16)}`, `pkgs-${"e".repeat(16)}`]);
      for (const name of removed) assert.ok(!existsSync(join(images, `${name}.json`)), name);
      assert.ok(existsSync(join(images, "base.json")), "the base image is no package set");
      assert.ok(existsSync(`${inUse}.json`));
    } finally {
      await rm(pool, { recursive: true, force: true });
    }
  });
});
