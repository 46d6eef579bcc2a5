// Issue #18: `ums image import|list|info|rm|build FILE`, `ums create --image`, and the SDK's
// `client.images`, against a real server with real units.

import assert from "node:assert/strict";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ConflictError, UmsClient, Unit, ValidationError } from "@ums/sdk";
import { dockerSaveArchive, makeTar, tinyRootfs } from "@ums/server/testing";
import { startUserCli, type UserCli } from "../testing/user-cli.js";

describe("ums image, ums create --image, and the SDK's images", { timeout: 300_000 }, () => {
  let cli: UserCli;
  let client: UmsClient;
  before(async () => {
    cli = await startUserCli();
    const token = await cli.token("img-cli");
    await cli.ok(["login", "--url", cli.server.url, "--token", token]);
    client = new UmsClient({ baseUrl: cli.server.url, token });
  });
  after(async () => {
    await cli?.close();
  });

  it("imports an archive, lists and shows it, starts a unit on it, refuses to delete it in use", async () => {
    const layer = await makeTar([
      ...tinyRootfs({ passwd: ["app:x:1000:1000:app:/home/app:/bin/sh"], group: ["app:x:1000:"] }),
      { name: "home/", type: "directory" },
      { name: "home/app/", type: "directory", uid: 1000, gid: 1000 },
    ]);
    const file = join(cli.home, "tiny.tar");
    await writeFile(file, await dockerSaveArchive({ layers: [layer], user: "app", env: ["HELLO=tiny"] }));
    const imported = await cli.run(["image", "import", file, "--name", "tiny"]);
    assert.equal(imported.code, 0, imported.stderr);
    assert.match(imported.stdout.toString(), /^imported image tiny \(\d+\.\d MiB, user app\)\n$/);
    // Its one layer is applied as the archive arrives (the server's guess of the layers' order).
    assert.match(imported.stderr, /applied 1\/1 layers while the archive arrived/, "progress on stderr");

    const table = (await cli.ok(["image", "list"])).trimEnd().split("\n");
    assert.match(table[0] ?? "", /^NAME\s+KIND\s+SIZE\s+USER\s+CREATED\s+VERSION$/);
    assert.match(table[1] ?? "", /^base\s+base\s/);
    assert.match(table[2] ?? "", /^tiny\s+imported\s+\d+\.\d MiB\s+app\s/);
    const info = JSON.parse(await cli.ok(["image", "info", "tiny", "--json"]));
    assert.deepEqual([info.kind, info.config.user.name, info.config.env], ["imported", "app", ["HELLO=tiny"]]);

    await cli.ok(["create", "on-tiny", "--image", "tiny"]);
    assert.equal(await cli.ok(["exec", "on-tiny", "--", "sh", "-c", "id -un; echo $HELLO"]), "app\ntiny\n");
    const busy = await cli.run(["image", "rm", "tiny"]);
    assert.equal(busy.code, 1);
    assert.match(busy.stderr, /^ums: UMS_IMAGE_IN_USE: /);
    await assert.rejects(client.images.delete("tiny"), ConflictError);
    const missing = await cli.run(["image", "import", join(cli.home, "nope.tar"), "--name", "x"]);
    assert.equal(missing.code, 2, "a usage error");
    const garbage = join(cli.home, "garbage.tar");
    await writeFile(garbage, "not an archive");
    const refused = await cli.run(["image", "import", garbage, "--name", "x"]);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /^ums: UMS_IMAGE_INVALID: /);
    await cli.ok(["delete", "on-tiny", "--yes"]);
    assert.equal(await cli.ok(["image", "rm", "tiny"]), "deleted image tiny\n");
  });

  it("builds a recipe from a file, cached the second time; a failing step is a ValidationError", async () => {
    const recipe = join(cli.home, "recipe.json");
    await writeFile(recipe, JSON.stringify({ name: "r1", steps: ["echo made > /opt/made"], workdir: "/opt" }));
    const built = await cli.run(["image", "build", recipe]);
    assert.equal(built.code, 0, built.stderr);
    assert.match(built.stdout.toString(), /^built image r1 \(/);
    assert.match(built.stderr, /step 1\/1: echo made/);
    assert.match(await cli.ok(["image", "build", recipe]), /^cached image r1 /);
    await cli.ok(["create", "on-r1", "--image", "r1"]);
    assert.equal(await cli.ok(["exec", "on-r1", "--", "sh", "-c", "pwd; cat made"]), "/opt\nmade\n");
    const notJson = join(cli.home, "bad.json");
    await writeFile(notJson, "{name:");
    assert.equal((await cli.run(["image", "build", notJson])).code, 2);
    await assert.rejects(client.images.build({ name: "r2", steps: ["exit 7"] }), (err: unknown) => {
      assert.ok(err instanceof ValidationError);
      assert.match(String((err as Error).message), /step 1 of the recipe failed with exit code 7/);
      return true;
    });
    const names = (await client.images.list()).map((i) => i.name);
    assert.deepEqual(names, ["base", "r1"]);
  });

  it("ums upgrade moves a unit to the newer build of its image; one that changed system files is refused", async () => {
    const recipe = join(cli.home, "up.json");
    const write = (v: string) =>
      writeFile(recipe, JSON.stringify({ name: "up", files: [{ path: "/usr/share/up", content: `${v}\n` }] }));
    await write("1");
    await cli.ok(["image", "build", recipe]);
    await cli.ok(["create", "up-a", "--image", "up"]);
    await cli.ok(["create", "up-b", "--image", "up"]);
    await cli.ok(["exec", "up-b", "--root", "--", "sh", "-c", "echo mine > /usr/share/mine"]);
    assert.match(await cli.ok(["upgrade", "up-a"]), /^up-a is up to date \(up@[0-9a-f-]{12}\)\n$/);
    await write("2");
    await cli.ok(["image", "build", recipe]);
    const newest = (await client.images.get("up")).version;
    assert.equal(await cli.ok(["upgrade", "up-a"]), `upgraded up-a to ${newest}\n`);
    assert.equal(await cli.ok(["exec", "up-a", "--", "cat", "/usr/share/up"]), "2\n");
    const refused = await cli.run(["upgrade", "up-b"]);
    assert.equal(refused.code, 1);
    assert.match(refused.stderr, /^ums: UMS_UPGRADE_REFUSED: .*\/usr\/share\/mine/s);
    const b = await Unit.connect("up-b", { client });
    await assert.rejects(b.upgrade(), ConflictError, "the SDK's error for UMS_UPGRADE_REFUSED");
  });
});
