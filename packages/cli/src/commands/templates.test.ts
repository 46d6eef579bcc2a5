// Issue #18: `ums template create|list|info|rm`, `ums create --template`, and the SDK's
// `client.templates` and `Unit.create({ template })`, against a real server (no unit boots).

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ConflictError, NotFoundError, UmsClient, Unit } from "@ums/sdk";
import { startUserCli, type UserCli } from "../testing/user-cli.js";

describe("ums template, ums create --template, and the SDK's templates", () => {
  let cli: UserCli;
  let client: UmsClient;
  before(async () => {
    cli = await startUserCli();
    const token = await cli.token("tpl-cli");
    await cli.ok(["login", "--url", cli.server.url, "--token", token]);
    client = new UmsClient({ baseUrl: cli.server.url, token });
  });
  after(async () => {
    await cli?.close();
  });

  it("publishes, lists, shows, starts units from and deletes templates", async () => {
    await cli.ok(["create", "src"]);
    // No checkpoint named: one is taken.
    assert.equal(
      await cli.ok(["template", "create", "base", "--from", "src", "-d", "our tools"]),
      "created template base from src@v0\n",
    );
    const table = (await cli.ok(["template", "list"])).trimEnd().split("\n");
    assert.match(table[0] ?? "", /^NAME\s+FROM\s+CREATED\s+DESCRIPTION$/);
    assert.match(table[1] ?? "", /^base\s+src@v0\s+\d+s\s+our tools$/);
    assert.equal(table.length, 2);
    const info = JSON.parse(await cli.ok(["template", "info", "base", "--json"]));
    assert.deepEqual(
      [info.name, info.organization, info.source],
      ["base", "tpl-cli", { unit: "src", checkpoint: "v0" }],
    );
    assert.match(info.id, /^tpl-/);
    assert.match(await cli.ok(["template", "info", "base"]), /^from: +src@v0$/m);
    assert.match(await cli.ok(["template", "create", "named", "--from", "src@v0", "--json"]), /"checkpoint": "v0"/);

    assert.match(await cli.ok(["create", "w1", "--template", "base"]), /^created w1 {2}http:\S+\n$/);
    const dup = await cli.run(["template", "create", "base", "--from", "src@v0"]);
    assert.equal(dup.code, 1);
    assert.match(dup.stderr, /^ums: UMS_TEMPLATE_EXISTS: .*base.*\n$/);
    const bad = await cli.run(["template", "create", "x", "--from", "a@b@c"]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /^ums: --from must be UNIT or UNIT@CHECKPOINT/);
    assert.equal((await cli.run(["template", "create", "x"])).code, 2, "--from is required");

    assert.equal(await cli.ok(["template", "rm", "base"]), "deleted template base\n");
    const gone = await cli.run(["template", "info", "base"]);
    assert.equal(gone.code, 1);
    assert.match(gone.stderr, /^ums: UMS_TEMPLATE_NOT_FOUND: .+\n$/);
    const none = await cli.run(["create", "w2", "--template", "base"]);
    assert.equal(none.code, 1);
    assert.match(none.stderr, /^ums: UMS_TEMPLATE_NOT_FOUND: .+\n$/);
    assert.match(await cli.ok(["info", "w1"]), /^name: +w1$/m, "w1 outlives its template");
    await cli.ok(["template", "rm", "named"]);
  });

  it("the SDK: client.templates.create/list/get/delete and Unit.create({ template })", async () => {
    const src = await Unit.create("sdk-src", { client });
    const cp = await src.checkpoints.create({ comment: "for a template" });
    const t = await client.templates.create("sdk-base", { unit: "sdk-src", checkpoint: cp.id, description: "d" });
    assert.deepEqual([t.name, t.description, t.source], ["sdk-base", "d", { unit: "sdk-src", checkpoint: cp.id }]);
    assert.ok(t.createdAt instanceof Date && !Number.isNaN(t.createdAt.getTime()));
    assert.deepEqual(
      (await client.templates.list()).map((x) => x.name),
      ["sdk-base"],
    );
    assert.equal((await client.templates.get("sdk-base")).id, t.id);
    await assert.rejects(
      client.templates.create("sdk-base", { unit: "sdk-src", checkpoint: cp.id }),
      (e) => e instanceof ConflictError && e.code === "UMS_TEMPLATE_EXISTS",
    );
    const u = await Unit.create("sdk-u", { client, template: "sdk-base" });
    assert.equal(u.name, "sdk-u");
    await client.templates.delete("sdk-base");
    await assert.rejects(
      client.templates.get("sdk-base"),
      (e) => e instanceof NotFoundError && e.code === "UMS_TEMPLATE_NOT_FOUND",
    );
    await assert.rejects(Unit.create("sdk-v", { client, template: "sdk-base" }), NotFoundError);
  });
});
