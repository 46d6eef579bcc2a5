// `ums create|list|info|delete|use` and `ums exec` against a real server with real units.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { once } from "node:events";
import { after, before, describe, it } from "node:test";
import { UmsClient, Unit } from "@ums/sdk";
import { startUserCli, UMS, type UserCli } from "../testing/user-cli.js";

describe("ums create, list, info, delete, use, exec", () => {
  let cli: UserCli;
  let client: UmsClient;
  before(async () => {
    cli = await startUserCli();
    const token = await cli.token("units-org");
    await cli.ok(["login", "--url", cli.server.url, "--token", token]);
    client = new UmsClient({ baseUrl: cli.server.url, token });
  });
  after(async () => {
    await cli?.close();
  });

  it("create, list (table, --json, --prefix), info, and the server's refusals as `ums: CODE: message`", async () => {
    assert.match(
      await cli.ok(["create", "web-a", "--label", "team-a", "--label", "fe"]),
      /^created web-a {2}http:\S+\n$/,
    );
    const b = JSON.parse(await cli.ok(["create", "web-b", "--public", "--json"]));
    assert.equal(b.name, "web-b");
    assert.deepEqual(b.urlSettings, { auth: "public" });
    await cli.ok(["create", "db-1"]);

    const table = await cli.ok(["list"]);
    const lines = table.trimEnd().split("\n");
    assert.match(lines[0] ?? "", /^NAME\s+STATUS\s+URL\s+LABELS\s+CREATED$/);
    assert.deepEqual(
      lines.slice(1).map((l) => l.split(/\s+/).slice(0, 2)),
      [
        ["db-1", "cold"],
        ["web-a", "cold"],
        ["web-b", "cold"],
      ],
    );
    assert.match(table, /^web-a\s+cold\s+\S+\s+team-a,fe\s+\d+s$/m);

    const json = JSON.parse(await cli.ok(["list", "--prefix", "web-", "--json"]));
    assert.deepEqual(
      json.map((u: { name: string; labels: string[] }) => [u.name, u.labels]),
      [
        ["web-a", ["team-a", "fe"]],
        ["web-b", []],
      ],
    );
    const info = JSON.parse(await cli.ok(["info", "web-a", "--json"]));
    assert.equal(info.organization, "units-org");
    assert.match(info.id, /^unit-/);
    assert.match(await cli.ok(["info", "web-b"]), /^url access: +public$/m);

    const dup = await cli.run(["create", "web-a"]);
    assert.equal(dup.code, 1);
    assert.match(dup.stderr, /^ums: UMS_UNIT_EXISTS: .*web-a.*\n$/);
    const bad = await cli.run(["create", "Bad_Name"]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /^ums: UMS_VALIDATION: .+\n$/);
    const missing = await cli.run(["info", "nope"]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /^ums: UMS_UNIT_NOT_FOUND: .+\n$/);
    const from = await cli.run(["create", "x", "--from", "web-a"]);
    assert.equal(from.code, 2);
    assert.match(from.stderr, /^ums: --from must be UNIT@CHECKPOINT/);
    assert.equal((await cli.run(["list", "--bogus"])).code, 2);
  });

  it("delete asks for --yes without a terminal, then deletes", async () => {
    await cli.ok(["create", "doomed"]);
    const refused = await cli.run(["delete", "doomed"]);
    assert.equal(refused.code, 2);
    assert.match(refused.stderr, /pass --yes/);
    await Unit.connect("doomed", { client });
    assert.equal(await cli.ok(["delete", "doomed", "--yes"]), "deleted doomed\n");
    const again = await cli.run(["delete", "doomed", "-y"]);
    assert.equal(again.code, 1);
    assert.match(again.stderr, /^ums: UMS_UNIT_NOT_FOUND: /);
  });

  it("exec keeps stdout and stderr apart, exits with the remote code, pipes stdin byte for byte", async () => {
    await cli.ok(["create", "runner"]);
    const r = await cli.run(["exec", "runner", "--", "sh", "-c", "echo out; echo err >&2; exit 7"]);
    assert.equal(r.code, 7, r.stderr);
    assert.equal(r.stdout.toString(), "out\n");
    assert.equal(r.stderr, "err\n");

    // Not UTF-8, and bigger than one frame.
    const bytes = Buffer.concat([randomBytes(300_000), Buffer.from([0xff, 0xfe, 0x00])]);
    const cat = await cli.run(["exec", "runner", "--", "cat"], { stdin: bytes });
    assert.equal(cat.code, 0, cat.stderr);
    assert.ok(cat.stdout.equals(bytes), `${cat.stdout.length} bytes back of ${bytes.length}`);

    // A reader slower than the command: what still waits for the pipe when the command is done
    // arrives all the same (the CLI once exited with it queued, losing the output's tail).
    const slow = spawn(UMS, ["exec", "runner", "--", "head", "-c", "3000000", "/dev/zero"], {
      env: cli.env(),
      stdio: ["ignore", "pipe", "pipe"],
    });
    const kill = setTimeout(() => slow.kill("SIGKILL"), 60_000);
    const closed = once(slow, "close");
    await new Promise((r) => setTimeout(r, 3000)); // not read meanwhile: the pipe fills
    let got = 0;
    slow.stdout.on("data", (d: Buffer) => {
      got += d.length;
    });
    const [slowCode] = await closed;
    clearTimeout(kill);
    assert.equal(slowCode, 0);
    assert.equal(got, 3_000_000, "every byte reaches a slow reader");

    const env = await cli.ok([
      "exec",
      "runner",
      "-e",
      "GREETING=hi there",
      "-w",
      "/tmp",
      "--",
      "sh",
      "-c",
      'echo "$GREETING $(pwd) $(id -un)"',
    ]);
    assert.equal(env, "hi there /tmp unit\n");
    assert.equal(await cli.ok(["exec", "runner", "--root", "--", "id", "-u"]), "0\n");
    // Options of the remote command are its own.
    assert.equal(await cli.ok(["exec", "runner", "--", "ls", "-d", "--", "/tmp"]), "/tmp\n");

    const noDash = await cli.run(["exec", "runner", "true"]);
    assert.equal(noDash.code, 2);
    assert.match(noDash.stderr, /after '--'/);
    const missing = await cli.run(["exec", "ghost", "--", "true"]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /^ums: UMS_UNIT_NOT_FOUND: /);
  });

  it("use sets the default unit of info and exec; a fork with --from starts from the checkpoint's files", async () => {
    await cli.ok(["create", "origin"]);
    const none = await cli.run(["exec", "--", "true"]);
    assert.equal(none.code, 2);
    assert.match(none.stderr, /ums use NAME/);
    assert.equal(await cli.ok(["use", "origin"]), "using origin (context default)\n");
    assert.equal(JSON.parse(await cli.ok(["info", "--json"])).name, "origin");
    assert.equal(JSON.parse(await cli.ok(["whoami", "--json"])).unit, "origin");
    await cli.ok(["exec", "--", "sh", "-c", "echo saved > /home/unit/note"]);

    const cp = await (await Unit.connect("origin", { client })).checkpoints.create();
    await cli.ok(["create", "forked", "--from", `origin@${cp.id}`]);
    assert.equal(await cli.ok(["exec", "forked", "--", "cat", "/home/unit/note"]), "saved\n");

    const unknown = await cli.run(["use", "nope"]);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /^ums: UMS_UNIT_NOT_FOUND: /);
  });
});
