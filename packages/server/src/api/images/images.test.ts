// Issue #18 part 3: an OCI image imported from an archive the test builds itself (two layers, a
// whiteout, an opaque directory, a file owned by a non-root user, Env/WorkingDir/User set), each of
// those checked inside a unit made from it; bad archives answered 400 with nothing left; an image
// in use is not deleted; another organization neither sees nor uses it; a layer's symlink cannot
// lead the import out of the image.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { readdir, readFile } from "node:fs/promises";
import { request } from "node:http";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { dockerSaveArchive, makeTar, ociLayoutArchive } from "../../runtime/image/oci/test-archives.js";
import { testImage } from "../../runtime/image/test-image.js";
import { isReadonly } from "../../runtime/storage/btrfs.js";
import { imageLeftovers } from "../../testing/image-leftovers.js";
import { assertMadeOnItsNodeAlone } from "../../testing/made-on-node.js";
import { startSqliteServer, type TestServer } from "../../testing/server.js";
import { tools } from "../../testing/services.js";
import { tinyRootfs } from "../../testing/tiny-rootfs.js";

describe("images", { timeout: 300_000 }, () => {
  let s: TestServer;
  let token: string;
  let other: string;
  let t: ReturnType<typeof tools>;
  let importedDir: string;
  const pwned = `ums-image-escape-${process.pid}-${Date.now()}`;

  const importArchive = (name: string, body: Uint8Array, tok = token) =>
    s.api("POST", `/v1/images?name=${name}`, { token: tok, body, headers: { "content-type": "application/x-tar" } });
  /** The NDJSON events of an import's answer. */
  const events = (text: string) =>
    text
      .trim()
      .split("\n")
      .map(
        (l) =>
          JSON.parse(l) as {
            type: string;
            data?: string;
            image?: Record<string, unknown>;
            code?: string;
            errors?: string[];
          },
      );
  const leftovers = () => imageLeftovers(importedDir, s.config.dataDir);
  const sh = async (unit: string, script: string) => {
    const r = await t.sh(unit, script);
    assert.equal(r.code, 0, `${unit}: ${script}: ${r.err}`);
    return r.out.trim();
  };

  async function appArchive(format: "docker-save" | "oci-layout", order?: number[]): Promise<Buffer> {
    const layer1 = await makeTar([
      ...tinyRootfs({ passwd: ["app:x:1000:1000:app:/home/app:/bin/sh"], group: ["app:x:1000:"] }),
      { name: "home/", type: "directory" },
      { name: "home/app/", type: "directory", uid: 1000, gid: 1000, mode: 0o750 },
      { name: "opt/", type: "directory" },
      { name: "opt/old/", type: "directory" },
      { name: "opt/old/keep.txt", data: "kept\n" },
      { name: "opt/old/gone.txt", data: "whited out\n" },
      { name: "opt/opq/", type: "directory" },
      { name: "opt/opq/lower.txt", data: "hidden by the opaque dir\n" },
    ]);
    const layer2 = await makeTar([
      { name: "opt/old/.wh.gone.txt", data: "" },
      { name: "opt/opq/", type: "directory" },
      { name: "opt/opq/upper.txt", data: "from layer 2\n" },
      { name: "opt/opq/.wh..wh..opq", data: "" },
      { name: "srv/", type: "directory", uid: 1000, gid: 1000 },
      { name: "srv/owned.txt", data: "mine\n", uid: 1000, gid: 1000, mode: 0o640 },
      { name: "usr/local/", type: "directory" },
      { name: "usr/local/bin/", type: "directory" },
      { name: "usr/local/bin/setuid-tool", data: "#!/bin/sh\n", mode: 0o4755 },
      // The attack: a link to / and an entry through it; it must land inside the image.
      { name: "evil", type: "symlink", linkname: "/" },
      { name: `evil/tmp/${pwned}`, data: "inside\n" },
    ]);
    const spec = {
      layers: [layer1, layer2],
      env: ["GREETING=hello from the image", "PATH=/usr/local/bin:/usr/bin:/bin"],
      workingDir: "/srv",
      user: "app",
    };
    return format === "docker-save" ? dockerSaveArchive(spec, order ? { order } : {}) : ociLayoutArchive(spec);
  }

  before(async () => {
    importedDir = join((await testImage()).pool.path, "imported");
    s = await startSqliteServer({ idleWarm: "10m" });
    token = await s.token("img");
    other = await s.token("img-other");
    t = tools(s, token);
  });
  after(() => s?.close());

  it("imports a docker save archive: NDJSON progress, then the image with its config", async () => {
    const r = await importArchive("app", await appArchive("docker-save"));
    assert.equal(r.status, 200, r.text);
    assert.match(r.headers.get("content-type") ?? "", /application\/x-ndjson/);
    const evs = events(r.text);
    // Its layers come in order: the first (at least) is applied while the archive arrives.
    assert.ok(
      evs.some((e) => e.type === "info" && /applied [12]\/2 layers while the archive arrived/.test(e.data ?? "")),
      r.text,
    );
    assert.ok(
      evs.some((e) => e.type === "info" && /imported 2 layers/.test(e.data ?? "")),
      r.text,
    );
    const done = evs.at(-1);
    assert.equal(done?.type, "complete", r.text);
    const image = done?.image as Record<string, unknown>;
    assert.match(String(image.id), /^img-/);
    assert.equal(image.kind, "imported");
    assert.equal(image.source, "docker-save");
    assert.equal(image.organization, "img");
    assert.deepEqual(image.config, {
      env: ["GREETING=hello from the image", "PATH=/usr/local/bin:/usr/bin:/bin"],
      user: { name: "app", uid: 1000, gid: 1000, home: "/home/app" },
      working_dir: "/srv",
    });
    assert.ok(await isReadonly(join(importedDir, String(image.id))), "the image is a read-only subvolume");
    assert.ok(!existsSync(`/tmp/${pwned}`), "the layer's link to / did not lead the import onto the host");
    assert.deepEqual(await leftovers(), [], "no upload or work dir is left");

    const list = await s.api("GET", "/v1/images", { token });
    assert.deepEqual(
      (list.body.images as { name: string; kind: string }[]).map((i) => [i.name, i.kind]),
      [
        ["base", "base"],
        ["app", "imported"],
      ],
    );
    assert.deepEqual((await s.api("GET", "/v1/images/app", { token })).body, image);
    const theirs = await s.api("GET", "/v1/images", { token: other });
    assert.deepEqual(
      (theirs.body.images as { name: string }[]).map((i) => i.name),
      ["base"],
      "another organization does not see it",
    );
    assert.equal((await s.api("GET", "/v1/images/app", { token: other })).status, 404);
    assert.equal((await s.api("DELETE", "/v1/images/app", { token: other })).status, 404, "nor delete it");
    const same = await importArchive("app", Buffer.from("x"), other);
    assert.equal(same.status, 400, "its names are its own: 'app' is free there (and this is no archive)");
  });

  it("a unit made from it runs as its user, in its working dir, with its env and its layers' files", async () => {
    const c = await s.api("POST", "/v1/units", { token, json: { name: "on-app", image: "app" } });
    assert.equal(c.status, 201, c.text);
    assert.equal(c.body.environment_version, "v0.1.0-rc1", "the spec's shape");
    const plain = await s.api("POST", "/v1/units", { token, json: { name: "plain" } });
    assert.equal(plain.body.image, "base");
    assert.match(c.body.image, /^app@[0-9a-f-]{12}$/, "the image it was made from");
    const image = (await s.api("GET", "/v1/images/app", { token })).body;
    assert.equal(c.body.image, image.version);
    assert.equal(await sh("on-app", "id -u; id -g"), "1000\n1000");
    assert.equal(await sh("on-app", "pwd"), "/srv");
    assert.equal(await sh("on-app", 'echo "$GREETING"'), "hello from the image");
    assert.equal(await sh("on-app", "echo $HOME"), "/home/app");
    assert.equal(await sh("on-app", "cat /opt/old/keep.txt"), "kept");
    assert.equal(await sh("on-app", "ls /opt/old"), "keep.txt", "the whiteout removed gone.txt");
    assert.equal(await sh("on-app", "ls /opt/opq"), "upper.txt", "the opaque dir hid layer 1's files");
    assert.equal(await sh("on-app", "stat -c %u:%g:%a /srv/owned.txt"), "1000:1000:640");
    assert.equal(await sh("on-app", "stat -c %a /usr/local/bin/setuid-tool"), "4755");
    assert.equal(await sh("on-app", `cat /tmp/${pwned}`), "inside", "the entry through the link is in the image");
    const root = await t.sh("on-app", "id -u", "root");
    assert.equal(root.out.trim(), "0", "root is still there when asked for");
    assert.equal(await sh("on-app", "touch /srv/new && stat -c %u /srv/new"), "1000", "the unit writes its own files");
  });

  it("names the node that made it, and units made from it go to that node alone (issue #15)", () =>
    assertMadeOnItsNodeAlone(s, token, "img", { image: "app" }));

  it("an OCI layout archive (gzip layers, an index) imports the same", async () => {
    const r = await importArchive("app-oci", await appArchive("oci-layout"));
    assert.equal(r.status, 200, r.text);
    const done = events(r.text).at(-1);
    assert.equal(done?.type, "complete", r.text);
    assert.equal(done?.image?.source, "oci-layout");
    const c = await s.api("POST", "/v1/units", { token, json: { name: "on-oci", image: "app-oci" } });
    assert.equal(c.status, 201, c.text);
    assert.equal(await sh("on-oci", "id -un; pwd; ls /opt/opq"), "app\n/srv\nupper.txt");
  });

  it("layer files in another order than the manifest's: the guess is undone, the image the same", async () => {
    // Layer 2 (with the link to / and an entry through it) comes first: the server applies it as it
    // arrives, finds it is not the first layer, and starts again in the manifest's order.
    const r = await importArchive("app-reversed", await appArchive("docker-save", [1, 0]));
    assert.equal(r.status, 200, r.text);
    const evs = events(r.text);
    assert.equal(evs.at(-1)?.type, "complete", r.text);
    assert.ok(!evs.some((e) => /while the archive arrived/.test(String(e.data))), r.text);
    const root = join(importedDir, String((evs.at(-1)?.image as { id?: string } | undefined)?.id));
    assert.deepEqual(await readdir(join(root, "opt/old")), ["keep.txt"], "layer 2's whiteout after layer 1");
    assert.deepEqual(await readdir(join(root, "opt/opq")), ["upper.txt"], "layer 2's opaque dir after layer 1");
    assert.equal(await readFile(join(root, "tmp", pwned), "utf8"), "inside\n");
    assert.ok(!existsSync(`/tmp/${pwned}`), "neither the guess nor the import followed the link onto the host");
    assert.ok(await isReadonly(root));
    assert.deepEqual(await leftovers(), [], "no upload or work dir is left");
    assert.equal((await s.api("DELETE", "/v1/images/app-reversed", { token })).status, 204);
  });

  it("bad archives and names are refused with nothing left; a taken name is 409", async () => {
    const garbage = await importArchive("junk", Buffer.from("this is not a tar archive at all".repeat(100)));
    assert.equal(garbage.status, 400, garbage.text);
    assert.equal(garbage.body.code, "UMS_IMAGE_INVALID");
    const empty = await importArchive("junk", await makeTar([{ name: "hello.txt", data: "hi" }]));
    assert.equal(empty.status, 400, empty.text);
    assert.match(String(empty.body.errors), /manifest\.json|index\.json/);
    // A well-formed archive whose image lacks what the agent needs: refused once its layers are read.
    const bare = await importArchive(
      "junk",
      await dockerSaveArchive({ layers: [await makeTar([{ name: "x", data: "x" }])] }),
    );
    const last = bare.status === 200 ? events(bare.text).at(-1) : bare.body;
    assert.equal(last?.code, "UMS_IMAGE_INVALID", bare.text);
    assert.match(String(last?.errors), /glibc/);
    const through = await importArchive(
      "junk",
      await dockerSaveArchive({ layers: [await makeTar([{ name: "../x", data: "x" }])] }),
    );
    const esc = through.status === 200 ? events(through.text).at(-1) : through.body;
    assert.equal(esc?.code, "UMS_IMAGE_INVALID", through.text);
    assert.match(String(esc?.errors), /leaves the image/);
    assert.equal((await importArchive("Bad_Name", Buffer.from("x"))).status, 400);
    assert.equal((await importArchive("base", Buffer.from("x"))).status, 409, "the host's base image's name");
    assert.equal((await importArchive("app", Buffer.from("x"))).status, 409, "a taken name");
    const names = ((await s.api("GET", "/v1/images", { token })).body.images as { name: string }[]).map((i) => i.name);
    assert.ok(!names.includes("junk"), "nothing half-made is listed");
    assert.deepEqual(await leftovers(), [], "no upload or work dir is left");
    const unknown = await s.api("POST", "/v1/units", { token, json: { name: "nope", image: "missing" } });
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.code, "UMS_IMAGE_NOT_FOUND");
    const theirs = await s.api("POST", "/v1/units", { token: other, json: { name: "nope", image: "app" } });
    assert.equal(theirs.status, 404, "another organization cannot use it");
    const both = await s.api("POST", "/v1/units", { token, json: { name: "nope", image: "app", template: "x" } });
    assert.equal(both.status, 400);
  });

  it("a client that leaves in the middle of its upload leaves nothing behind", async () => {
    const archive = await appArchive("docker-save");
    const url = new URL(`/v1/images?name=halfway`, s.url);
    await new Promise<void>((resolve) => {
      const req = request(url, {
        method: "POST",
        headers: { authorization: `Bearer ${token}`, "content-type": "application/x-tar" },
      });
      req.on("error", () => resolve());
      req.write(archive.subarray(0, archive.length >> 1), () => setTimeout(() => req.destroy(), 300));
      req.on("close", () => resolve());
    });
    assert.deepEqual(await leftovers(), [], "the upload and the draft went");
    const names = ((await s.api("GET", "/v1/images", { token })).body.images as { name: string }[]).map((i) => i.name);
    assert.ok(!names.includes("halfway"));
    const again = await importArchive("halfway", archive);
    assert.equal(events(again.text).at(-1)?.type, "complete", "the name is free: nothing half-made holds it");
    assert.equal((await s.api("DELETE", "/v1/images/halfway", { token })).status, 204);
  });

  it("an image is deleted only once no unit made from it (or forked from one) is left", async () => {
    const cp = await s.api("POST", "/v1/units/on-oci/checkpoint", { token, json: {} });
    assert.match(cp.text, /"type":"complete"/);
    const fork = await s.api("POST", "/v1/units", {
      token,
      json: { name: "oci-fork", from: { unit: "on-oci", checkpoint: "v0" } },
    });
    assert.equal(fork.status, 201, fork.text);
    assert.equal(await sh("oci-fork", "id -un; pwd"), "app\n/srv", "a fork keeps its image's config");
    assert.equal(fork.body.image, (await s.api("GET", "/v1/units/on-oci", { token })).body.image, "and its image");
    const busy = await s.api("DELETE", "/v1/images/app-oci", { token });
    assert.equal(busy.status, 409, busy.text);
    assert.equal(busy.body.code, "UMS_IMAGE_IN_USE");
    for (const u of ["on-oci", "oci-fork"])
      assert.equal((await s.api("DELETE", `/v1/units/${u}`, { token })).status, 204);
    const id = (await s.api("GET", "/v1/images/app-oci", { token })).body.id as string;
    assert.equal((await s.api("DELETE", "/v1/images/app-oci", { token })).status, 204);
    assert.equal((await s.api("GET", "/v1/images/app-oci", { token })).status, 404);
    assert.ok(!existsSync(join(importedDir, id)), "its subvolume is gone");
    assert.equal((await s.api("DELETE", "/v1/images/base", { token })).status, 400, "the base image is the host's");
    const up = await s.api("POST", "/v1/units/on-app/upgrade", { token, json: { version: "latest" } });
    assert.equal(up.status, 200, up.text);
    assert.equal(up.body.status, "up_to_date", "its image has no newer build (upgrade.test.ts moves one)");
  });

  it("the name again: 409 unless replace=true, which makes the archive the image's newer build", async () => {
    const archive = await appArchive("oci-layout");
    const first = events((await importArchive("app-v", archive)).text).at(-1);
    assert.equal(first?.type, "complete");
    const c = await s.api("POST", "/v1/units", { token, json: { name: "on-v1", image: "app-v" } });
    assert.equal(c.status, 201, c.text);
    assert.equal((await importArchive("app-v", archive)).status, 409);
    const again = await s.api("POST", "/v1/images?name=app-v&replace=true", {
      token,
      body: archive,
      headers: { "content-type": "application/x-tar" },
    });
    const newer = events(again.text).at(-1);
    assert.equal(newer?.type, "complete", again.text);
    assert.notEqual(newer?.image?.id, first?.image?.id);
    assert.equal((await s.api("GET", "/v1/images/app-v", { token })).body.id, newer?.image?.id);
    assert.ok((await readdir(importedDir)).includes(String(first?.image?.id)), "the unit's build is kept");
    assert.equal((await s.api("DELETE", "/v1/units/on-v1", { token })).status, 204);
    assert.ok(!(await readdir(importedDir)).includes(String(first?.image?.id)), "then removed with its last unit");
    assert.equal((await s.api("DELETE", "/v1/images/app-v", { token })).status, 204);
  });
});
