// The CLI contract, through the real launcher bin/ums (testing/ums-cli.ts): every test spawns it as a
// user would, with a data dir of its own, and stops only the processes it started (by PID).

import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { createToken, sqliteBytes, tempDir, ums, umsOk } from "../testing/ums-cli.js";

// Every test has its own data dir (and port), so they run side by side: each `ums` run spends most
// of its time loading modules.
describe("ums token", { concurrency: 4 }, () => {
  it("create prints only the token on one line and stores only its hash in <data-dir>/ums.db", async (t) => {
    const dir = await tempDir(t);
    const r = await ums(["token", "create", "--org", "hash-check-org", "--name", "ci-deploy-key", "--data-dir", dir]);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /^ums_[0-9A-Za-z]{43}\n$/);
    assert.equal(r.stderr, "");
    const token = r.stdout.trim();
    const bytes = await sqliteBytes(dir);
    // The search works: what is stored in clear is found.
    assert.ok(bytes.includes("hash-check-org"));
    assert.ok(bytes.includes("ci-deploy-key"));
    assert.equal(bytes.includes(token), false);
    assert.equal(bytes.includes(token.slice(4)), false);
    assert.equal(bytes.includes(token.slice(4, 24)), false);
  });

  it("create uses ./data under the working directory by default", async (t) => {
    const cwd = await tempDir(t);
    await umsOk(["token", "create", "--org", "demo"], { cwd });
    assert.ok(existsSync(join(cwd, "data", "ums.db")));
  });

  it("create rejects a bad org slug with exit 2 and a message, creating nothing", async (t) => {
    const dir = await tempDir(t);
    for (const slug of ["Bad_Slug", "ends-"]) {
      const r = await ums(["token", "create", "--org", slug, "--data-dir", dir]);
      assert.equal(r.code, 2, `${slug}: ${r.stderr}`);
      assert.equal(r.stdout, "");
      assert.match(r.stderr, /^ums: --org '.*' .+\n$/);
      assert.ok(r.stderr.includes(slug), r.stderr);
    }
    assert.equal(existsSync(join(dir, "ums.db")), false);
  });

  it("list never prints secrets, in text or --json, and filters by --org", async (t) => {
    const dir = await tempDir(t);
    const a = await createToken(dir, "alpha", "--name", "laptop");
    const b = await createToken(dir, "beta", "--name", "ci", "--role", "member");
    assert.notEqual(a, b);

    const text = await umsOk(["token", "list", "--data-dir", dir]);
    const lines = text.trimEnd().split("\n");
    assert.equal(lines.length, 3);
    assert.deepEqual(lines[0]?.split("\t"), ["ID", "ORG", "NAME", "ROLE", "CREATED", "LAST USED", "STATE"]);
    assert.match(text, /\talpha\tlaptop\tadmin\t.*\tactive/);
    assert.match(text, /\tbeta\tci\tmember\t.*\tactive/);

    const json = await umsOk(["token", "list", "--data-dir", dir, "--json"]);
    const rows = json
      .trimEnd()
      .split("\n")
      .map((l) => JSON.parse(l));
    assert.deepEqual(rows.map((r) => [r.org, r.name, r.role, r.revoked_at]).sort(), [
      ["alpha", "laptop", "admin", null],
      ["beta", "ci", "member", null],
    ]);
    for (const r of rows) {
      assert.match(r.id, /^tok_[0-9a-z]{16}$/);
      assert.deepEqual(Object.keys(r).sort(), [
        "created_at",
        "expires_at",
        "id",
        "last_used_at",
        "name",
        "org",
        "revoked_at",
        "role",
      ]);
    }
    for (const out of [text, json]) {
      for (const secret of [a, b]) {
        assert.equal(out.includes(secret), false);
        assert.equal(out.includes(secret.slice(4, 24)), false);
      }
      assert.equal(/ums_[0-9A-Za-z]{10}/.test(out), false);
    }

    const onlyBeta = (await umsOk(["token", "list", "--data-dir", dir, "--org", "beta", "--json"])).trimEnd();
    assert.equal(onlyBeta.split("\n").length, 1);
    assert.equal(JSON.parse(onlyBeta).name, "ci");
  });
});
