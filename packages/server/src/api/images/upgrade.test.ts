// Issue #18: a newer build of an image (a changed recipe under the name), and `upgrade` moving a
// unit to it only where that loses nothing of the unit's (runtime/runc/upgrade.ts has the rule):
// a unit that changed no system file gets the newer build's system files and keeps its own; one
// that installed something in /usr/local, or made /var/lib a link to the host's root (the attack),
// is refused with the paths and left as it was; the older build goes once no unit uses it.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { testImage } from "../../runtime/image/test-image.js";
import { startSqliteServer, type TestServer } from "../../testing/server.js";
import { tools } from "../../testing/services.js";

describe("upgrading a unit to a newer build of its image", { timeout: 300_000 }, () => {
  let s: TestServer;
  let token: string;
  let t: ReturnType<typeof tools>;
  let importedDir: string;
  const V1 = {
    name: "app",
    files: [
      { path: "/usr/share/app/version", content: "1\n" },
      { path: "/etc/app.conf", content: "one\n" },
    ],
  };
  const V2 = {
    name: "app",
    files: [
      { path: "/usr/share/app/version", content: "2\n" },
      { path: "/etc/app.conf", content: "two\n" },
      { path: "/usr/share/app/new", content: "new\n" },
    ],
  };
  let id1 = "";
  let id2 = "";
  let version2 = "";

  const build = async (recipe: object) => {
    const r = await s.api("POST", "/v1/images/build", { token, json: recipe });
    const done = JSON.parse(r.text.trim().split("\n").at(-1) ?? "{}") as {
      type: string;
      image?: Record<string, string>;
    };
    assert.equal(done.type, "complete", r.text);
    return done.image as Record<string, string>;
  };
  const upgrade = (unit: string, version = "latest") =>
    s.api("POST", `/v1/sprites/${unit}/upgrade`, { token, json: { version } });
  const sh = async (unit: string, script: string) => {
    const r = await t.sh(unit, script, "root");
    assert.equal(r.code, 0, `${unit}: ${script}: ${r.err}`);
    return r.out.trim();
  };
  const unitImage = async (unit: string) => String((await s.api("GET", `/v1/sprites/${unit}`, { token })).body.image);

  before(async () => {
    importedDir = join((await testImage()).pool.path, "imported");
    s = await startSqliteServer({ idleWarm: "10m" });
    token = await s.token("upgrades");
    t = tools(s, token);
  });
  after(() => s?.close());

  it("a changed recipe under the name is its newer build; the older one stays while units use it", async () => {
    id1 = (await build(V1)).id ?? "";
    for (const name of ["keeper", "tinkerer", "linker"]) {
      const c = await s.api("POST", "/v1/units", { token, json: { name, image: "app" } });
      assert.equal(c.status, 201, c.text);
    }
    await sh(
      "keeper",
      "echo data > /root/data && mkdir -p /srv/work && echo w > /srv/work/f && cat /usr/share/app/version",
    );
    await sh("tinkerer", "mkdir -p /usr/local/bin && echo tool > /usr/local/bin/tool");
    // The attack: /var/lib (on the way to the package database, a system tree) made a link to /.
    await sh("linker", "mv /var/lib /var/lib.orig && ln -s / /var/lib");
    const b2 = await build(V2);
    id2 = b2.id ?? "";
    version2 = b2.version ?? "";
    assert.notEqual(id2, id1, "a new build, not the cached one");
    assert.equal((await s.api("GET", "/v1/images/app", { token })).body.id, id2, "the name is the newer build's");
    const names = ((await s.api("GET", "/v1/images", { token })).body.images as { name: string }[]).map((i) => i.name);
    assert.deepEqual(names, ["base", "app"], "one image of the name is listed");
    const dirs = await readdir(importedDir);
    assert.ok(dirs.includes(id1) && dirs.includes(id2), "the older build is kept: units use it");
    assert.equal(await unitImage("keeper"), `app@${id1.slice(4, 16)}`, "units stay on their build");
  });

  it("moves a unit that changed no system file: the newer build's system files, its own kept, its state saved first", async () => {
    const r = await upgrade("keeper");
    assert.equal(r.status, 200, r.text);
    assert.equal(r.body.status, "upgraded");
    assert.equal(
      await sh("keeper", "cat /usr/share/app/version /etc/app.conf /usr/share/app/new /root/data /srv/work/f"),
      "2\ntwo\nnew\ndata\nw",
    );
    assert.equal(await unitImage("keeper"), version2);
    const cps = await s.api("GET", "/v1/sprites/keeper/checkpoints?includeAuto=true", { token });
    assert.ok(
      (cps.body as { comment: string }[]).some((c) => c.comment === `automatic backup before upgrading to ${version2}`),
      cps.text,
    );
    const again = await upgrade("keeper", version2);
    assert.equal(again.status, 200, again.text);
    assert.equal(again.body.status, "up_to_date");
    const wrong = await upgrade("keeper", "app@000000000000");
    assert.equal(wrong.status, 400, wrong.text);
    assert.match(String(wrong.body.errors), /not the newest build of image 'app'/);
  });

  it("refuses a unit that changed system files, naming them, and leaves it as it was", async () => {
    const r = await upgrade("tinkerer");
    assert.equal(r.status, 409, r.text);
    assert.equal(r.body.code, "UMS_UPGRADE_REFUSED");
    assert.match(String(r.body.errors), /\/usr\/local\/bin\/tool/);
    assert.equal(await sh("tinkerer", "cat /usr/share/app/version /usr/local/bin/tool"), "1\ntool");
    assert.equal(await unitImage("tinkerer"), `app@${id1.slice(4, 16)}`);
  });

  it("attack: a unit that made /var/lib a link to the root is refused; the host is not written", async () => {
    const r = await upgrade("linker");
    assert.equal(r.status, 409, r.text);
    assert.match(String(r.body.errors), /\/var\/lib/);
    assert.ok(!existsSync("/dpkg"), "nothing was made through the link on the host");
    assert.equal(await sh("linker", "readlink /var/lib; cat /usr/share/app/version"), "/\n1");
  });

  it("the older build goes once no unit uses it", async () => {
    for (const name of ["tinkerer", "linker"]) {
      const d = await s.api("DELETE", `/v1/sprites/${name}`, { token });
      assert.ok(d.status === 204 || d.status === 200, d.text);
    }
    const dirs = await readdir(importedDir);
    assert.ok(!dirs.includes(id1), "the superseded build's files are gone");
    assert.ok(dirs.includes(id2));
    assert.equal((await s.api("GET", "/v1/images/app", { token })).body.id, id2);
  });
});
