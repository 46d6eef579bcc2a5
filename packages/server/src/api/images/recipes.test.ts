// Issue #18 part 2: an image built from a recipe (files, steps run as root in a unit, env, user,
// workdir) and a unit booted from it; the same recipe is answered from the cache; a failing step or
// a bad recipe leaves nothing (no image, no build unit, no subvolume).
import assert from "node:assert/strict";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { testImage } from "../../runtime/image/test-image.js";
import { isReadonly } from "../../runtime/storage/btrfs.js";
import { imageLeftovers } from "../../testing/image-leftovers.js";
import { startSqliteServer, type TestServer } from "../../testing/server.js";
import { tools } from "../../testing/services.js";

type Event = {
  type: string;
  data?: string;
  image?: Record<string, unknown>;
  cached?: boolean;
  code?: string;
  errors?: string[];
};

describe("image recipes", { timeout: 300_000 }, () => {
  let s: TestServer;
  let token: string;
  let t: ReturnType<typeof tools>;
  let importedDir: string;
  const RECIPE = {
    name: "tools",
    files: [
      { path: "/etc/motd-ums", content: "from the recipe\n" },
      { path: "/opt/app/run.sh", content: "#!/bin/sh\necho run\n", mode: "0755", owner: "1000:1000" },
      // /bin is a link to usr/bin in the image: the file goes where the image's own link leads.
      {
        path: "/bin/ums-recipe-tool",
        content_base64: Buffer.from("#!/bin/sh\necho tool\n").toString("base64"),
        mode: "0755",
      },
    ],
    steps: [
      "useradd --create-home --uid 1500 dev",
      "echo built by a step > /opt/built.txt && chown dev /opt/built.txt",
      "echo step output line",
    ],
    env: { TOOL: "yes", PATH: "/opt/app:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" },
    user: "dev",
    workdir: "/opt",
  };

  const build = (recipe: object) => s.api("POST", "/v1/images/build", { token, json: recipe });
  const events = (text: string) =>
    text
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l) as Event);
  const unitNames = async () =>
    ((await s.api("GET", "/v1/units", { token })).body.sprites as { name: string }[]).map((u) => u.name);
  const leftovers = () => imageLeftovers(importedDir, s.config.dataDir);
  const sh = async (unit: string, script: string) => {
    const r = await t.sh(unit, script);
    assert.equal(r.code, 0, `${unit}: ${script}: ${r.err}`);
    return r.out.trim();
  };

  before(async () => {
    importedDir = join((await testImage()).pool.path, "imported");
    s = await startSqliteServer({ idleWarm: "10m" });
    token = await s.token("recipes");
    t = tools(s, token);
  });
  after(() => s?.close());

  let imageId = "";
  it("builds: files written, steps run as root in a unit (their output is the progress), then read-only", async () => {
    const r = await build(RECIPE);
    assert.equal(r.status, 200, r.text);
    const evs = events(r.text);
    const done = evs.at(-1);
    assert.equal(done?.type, "complete", r.text);
    assert.ok(
      evs.some((e) => e.data === "  step output line"),
      "a step's output is shown",
    );
    assert.ok(evs.some((e) => /step 3\/3/.test(e.data ?? "")));
    const image = done?.image as Record<string, unknown>;
    imageId = String(image.id);
    assert.equal(image.kind, "recipe");
    assert.match(String(image.source), /^recipe:[0-9a-f]{64}$/);
    assert.deepEqual(image.config, {
      env: ["TOOL=yes", "PATH=/opt/app:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
      user: { name: "dev", uid: 1500, gid: 1500, home: "/home/dev" },
      working_dir: "/opt",
    });
    assert.ok(Number(image.bytes) > 1e6, "its size is measured");
    assert.ok(await isReadonly(join(importedDir, imageId)));
    assert.deepEqual(
      (await unitNames()).filter((n) => n.startsWith("image-build-")),
      [],
      "the unit the steps ran in is gone",
    );
    assert.deepEqual(await leftovers(), []);
  });

  it("a unit made from it has the files, the steps' work, the user, workdir and env", async () => {
    const c = await s.api("POST", "/v1/units", { token, json: { name: "from-recipe", image: "tools" } });
    assert.equal(c.status, 201, c.text);
    assert.equal(await sh("from-recipe", "id -un; pwd; echo $TOOL"), "dev\n/opt\nyes");
    assert.equal(await sh("from-recipe", "cat /etc/motd-ums /opt/built.txt"), "from the recipe\nbuilt by a step");
    assert.equal(
      await sh("from-recipe", "stat -c %U:%u:%g:%a /opt/app/run.sh /opt/built.txt"),
      "unit:1000:1000:755\ndev:1500:0:644",
    );
    assert.equal(
      await sh("from-recipe", "run.sh; ums-recipe-tool; readlink -f /bin/ums-recipe-tool"),
      "run\ntool\n/usr/bin/ums-recipe-tool",
    );
  });

  it("the same recipe again is answered from the cache; another recipe under its name is a newer build", async () => {
    const t0 = performance.now();
    const r = await build(RECIPE);
    const done = events(r.text).at(-1);
    assert.equal(done?.type, "complete", r.text);
    assert.equal(done?.cached, true);
    assert.equal(done?.image?.id, imageId);
    assert.ok(performance.now() - t0 < 2000, "no build");
    const other = await build({ ...RECIPE, steps: ["true"], user: "root" });
    const newer = events(other.text).at(-1);
    assert.equal(newer?.type, "complete", other.text);
    assert.notEqual(newer?.image?.id, imageId);
    assert.equal((await s.api("GET", "/v1/images/tools", { token })).body.id, newer?.image?.id);
    // The unit made from the first build keeps it (its user, its files).
    assert.equal(await sh("from-recipe", "id -un"), "dev");
    assert.ok((await readdir(importedDir)).includes(imageId), "the older build is kept while a unit uses it");
    imageId = String(newer?.image?.id);
  });

  it("a failing step stops the build with its output; bad recipes are 400; nothing is left", async () => {
    const r = await build({ name: "broken", steps: ["echo before", "echo the reason >&2; exit 3", "echo never"] });
    const last = events(r.text).at(-1);
    assert.equal(last?.type, "error", r.text);
    assert.equal(last?.code, "UMS_IMAGE_INVALID");
    assert.match(String(last?.errors), /step 2 of the recipe failed with exit code 3/);
    assert.match(String(last?.errors), /the reason/);
    assert.ok(!r.text.includes("never"));
    const unknownUser = await build({ name: "broken", user: "nobody-such" });
    assert.equal(events(unknownUser.text).at(-1)?.code, "UMS_IMAGE_INVALID", unknownUser.text);
    for (const bad of [
      { name: "broken", files: [{ path: "/etc/../../x", content: "x" }] },
      { name: "broken", files: [{ path: "relative", content: "x" }] },
      { name: "broken", files: [{ path: "/a", content: "x", content_base64: "eA==" }] },
      { name: "broken", files: [{ path: "/a", content: "x", owner: "70000" }] },
      { name: "broken", base: "trixie" },
      { name: "broken", packages: ["Not A Package"] },
      { name: "Broken" },
      { name: "base" },
    ]) {
      const res = await build(bad);
      assert.ok(res.status === 400 || res.status === 409, `${JSON.stringify(bad)}: ${res.status} ${res.text}`);
    }
    const names = ((await s.api("GET", "/v1/images", { token })).body.images as { name: string }[]).map((i) => i.name);
    assert.deepEqual(names, ["base", "tools"]);
    assert.deepEqual(
      (await unitNames()).filter((n) => n.startsWith("image-build-")),
      [],
      "no build unit is left",
    );
    assert.deepEqual(await leftovers(), []);
    const dirs = (await readdir(importedDir)).filter((n) => !n.startsWith("."));
    assert.ok(dirs.includes(imageId));
  });
});
