// `ums audit` (admin tokens read the audit log) and `ums token create --expires-in`, as a user runs them.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { tempDir, ums, umsOk } from "../testing/ums-cli.js";
import { startUserCli, type UserCli } from "../testing/user-cli.js";

describe("ums audit", () => {
  let cli: UserCli;
  before(async () => {
    cli = await startUserCli();
    await cli.ok(["login", "--url", cli.server.url, "--token", await cli.token("audit-org")]);
  });
  after(async () => {
    await cli?.close();
  });

  it("lists the organization's state-changing calls, filtered, as a table and as JSON", async () => {
    await cli.ok(["create", "watched"]);
    await cli.ok(["delete", "watched", "--yes"]);
    const text = await cli.ok(["audit", "--unit", "watched", "--since", "1h"]);
    assert.match(text, /^AT\s+TOKEN\s+CALL\s+UNIT\s+STATUS\s+MS$/m);
    assert.match(text, /POST \/v1\/units\s+watched\s+201/);
    assert.match(text, /DELETE \/v1\/units\/:name\s+watched\s+204/);
    const events = JSON.parse(await cli.ok(["audit", "--unit", "watched", "--json"]));
    assert.deepEqual(
      events.map((e: { method: string; status: number }) => `${e.method} ${e.status}`),
      ["DELETE 204", "POST 201"],
    );
    const bad = await cli.run(["audit", "--since", "yesterday-ish"]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--since 'yesterday-ish'/);
  });
});

describe("ums token create --expires-in", () => {
  it("sets the expiry; a bad span is a usage error", async (t) => {
    const dir = await tempDir(t);
    await umsOk(["token", "create", "--org", "exp-org", "--expires-in", "30d", "--data-dir", dir]);
    const listed = JSON.parse(await umsOk(["token", "list", "--org", "exp-org", "--json", "--data-dir", dir]));
    const days = (Date.parse(listed.expires_at) - Date.now()) / 86_400_000;
    assert.ok(days > 29.9 && days <= 30, `expires in ${days} days`);
    const bad = await ums(["token", "create", "--org", "exp-org", "--expires-in", "soon", "--data-dir", dir]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--expires-in 'soon'/);
  });
});
