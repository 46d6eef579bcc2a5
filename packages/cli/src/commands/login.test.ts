// `ums login|logout|whoami|context`: contexts in the user's config file, against a real server.

import assert from "node:assert/strict";
import { readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { startUserCli, type UserCli } from "../testing/user-cli.js";

describe("ums login, whoami, context, logout", () => {
  let cli: UserCli;
  before(async () => {
    cli = await startUserCli();
  });
  after(async () => {
    await cli?.close();
  });

  it("a command before any login says how to log in (exit 2)", async () => {
    const r = await cli.run(["whoami"]);
    assert.equal(r.code, 2, r.stderr);
    assert.match(r.stderr, /^ums: not logged in: run 'ums login --url URL --token TOKEN'.*\n$/);
  });

  it("a wrong token is refused with the server's code, and nothing is stored", async () => {
    const r = await cli.run(["login", "--url", cli.server.url, "--token", `ums_${"x".repeat(43)}`]);
    assert.equal(r.code, 1, r.stderr);
    assert.match(r.stderr, /^ums: UMS_UNAUTHORIZED: .+\n$/);
    await assert.rejects(stat(join(cli.home, ".config", "ums", "config.json")), { code: "ENOENT" });
    const bad = await cli.run(["login", "--url", "ftp://x", "--token", "t"]);
    assert.equal(bad.code, 2, bad.stderr);
    assert.match(bad.stderr, /^ums: --url: .*http or https/);
  });

  it("login stores a 0600 context; whoami, a second context, switching, env overrides, logout", async () => {
    const alpha = await cli.token("alpha-org");
    const beta = await cli.token("beta-org");
    const out = await cli.ok(["login", "--url", cli.server.url, "--token", alpha]);
    assert.equal(out, `logged in to ${cli.server.url} as organization alpha-org (context default)\n`);

    const path = join(cli.home, ".config", "ums", "config.json");
    assert.equal((await stat(path)).mode & 0o777, 0o600);
    assert.equal((await stat(join(cli.home, ".config", "ums"))).mode & 0o777, 0o700);
    const file = JSON.parse(await readFile(path, "utf8"));
    assert.deepEqual(file, {
      current: "default",
      contexts: { default: { url: cli.server.url, token: alpha, org: "alpha-org" } },
    });

    const who = JSON.parse(await cli.ok(["whoami", "--json"]));
    assert.equal(who.organization, "alpha-org");
    assert.equal(who.context, "default");
    assert.equal(who.url, cli.server.url);

    // The token read from stdin, into a second named context, which becomes current.
    await cli.ok(["login", "--url", cli.server.url, "--context", "other"], { stdin: `${beta}\n` });
    assert.equal(JSON.parse(await cli.ok(["whoami", "--json"])).organization, "beta-org");
    assert.equal(JSON.parse(await cli.ok(["whoami", "--json", "--context", "default"])).organization, "alpha-org");
    assert.equal(
      JSON.parse(await cli.ok(["whoami", "--json"], { env: { UMS_CONTEXT: "default" } })).organization,
      "alpha-org",
    );
    // UMS_TOKEN overrides the context's token.
    assert.equal(
      JSON.parse(await cli.ok(["whoami", "--json"], { env: { UMS_TOKEN: alpha } })).organization,
      "alpha-org",
    );

    const table = await cli.ok(["context"]);
    const lines = table.trimEnd().split("\n");
    assert.match(lines[0] ?? "", /^CURRENT\s+NAME\s+URL\s+ORGANIZATION\s+UNIT$/);
    assert.match(table, /^\s+default\s+\S+\s+alpha-org\s+-$/m);
    assert.match(table, /^\*\s+other\s+\S+\s+beta-org\s+-$/m);
    assert.ok(!table.includes(alpha) && !table.includes(beta), "context never prints tokens");

    await cli.ok(["context", "default"]);
    assert.equal(JSON.parse(await cli.ok(["whoami", "--json"])).organization, "alpha-org");
    const unknown = await cli.run(["context", "nope"]);
    assert.equal(unknown.code, 2);

    assert.equal(await cli.ok(["logout", "--context", "other"]), "logged out (context other)\n");
    const gone = await cli.run(["whoami", "--context", "other"]);
    assert.equal(gone.code, 2, gone.stderr);
    assert.match(gone.stderr, /context 'other' is not logged in/);
    assert.equal(JSON.parse(await readFile(path, "utf8")).contexts.other, undefined);
    assert.equal((await stat(path)).mode & 0o777, 0o600);
  });
});
