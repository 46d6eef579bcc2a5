import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { mintToken } from "../auth/tokens.js";
import { testDialects } from "../testing/dialects.js";
import { openStore } from "./open.js";
import type { Store } from "./store.js";

const limits = { maxUnits: 2, runningLimit: 1, warmLimit: 1 };

/** Issue #14: console sessions in the store, for every dialect. */
for (const dialect of testDialects) {
  describe(`store: console sessions (${dialect.name})`, { skip: dialect.skip }, () => {
    let store: Store;
    let dir: string;
    let drop: () => Promise<void>;
    before(async () => {
      dir = await mkdtemp(join(tmpdir(), "ums-store-console-"));
      const db = await dialect.createDatabase();
      drop = db.drop;
      store = await openStore({ dataDir: dir, databaseUrl: db.databaseUrl });
    });
    after(async () => {
      await store?.close();
      await drop?.();
      await rm(dir, { recursive: true, force: true });
    });

    const t0 = Date.parse("2030-01-01T00:00:00.000Z");
    const iso = (ms: number) => new Date(t0 + ms).toISOString();

    it("finds a session until it expires, with its token and organization; never another's", async () => {
      const org = await store.orgs.ensure("console-a", limits);
      const other = await store.orgs.ensure("console-b", limits);
      const { record: token } = await mintToken(store.tokens, { orgId: org.id, name: "t", role: "member" });
      const s = {
        idHash: "a".repeat(64),
        orgId: org.id,
        tokenId: token.id,
        csrf: "c".repeat(43),
        createdAt: iso(0),
        expiresAt: iso(3_600_000),
      };
      await store.consoleSessions.insert(s);
      const found = await store.consoleSessions.authenticate(s.idHash, iso(1000));
      assert.deepEqual(found?.session, s);
      assert.equal(found?.token.id, token.id);
      assert.equal(found?.token.role, "member");
      assert.equal(found?.org.slug, "console-a");
      assert.equal(await store.consoleSessions.authenticate("b".repeat(64), iso(1000)), undefined);
      assert.equal(await store.consoleSessions.authenticate(s.idHash, iso(3_600_000)), undefined, "expired");
      await assert.rejects(store.consoleSessions.insert(s), "one row per id");
      // A row whose organization is not its token's is never an answer.
      const { record: theirs } = await mintToken(store.tokens, { orgId: other.id, name: "t", role: "admin" });
      await store.consoleSessions.insert({ ...s, idHash: "d".repeat(64), tokenId: theirs.id });
      assert.equal(await store.consoleSessions.authenticate("d".repeat(64), iso(1000)), undefined);
    });

    it("a revoked token's sessions end; sign-out deletes the row; expired rows are removed", async () => {
      const org = await store.orgs.ensure("console-c", limits);
      const { record: token } = await mintToken(store.tokens, { orgId: org.id, name: "t", role: "admin" });
      const base = { orgId: org.id, tokenId: token.id, csrf: "x".repeat(43), createdAt: iso(0) };
      await store.consoleSessions.insert({ ...base, idHash: "1".repeat(64), expiresAt: iso(10_000) });
      await store.consoleSessions.insert({ ...base, idHash: "2".repeat(64), expiresAt: iso(10_000) });
      assert.equal(await store.consoleSessions.delete("1".repeat(64)), true);
      assert.equal(await store.consoleSessions.delete("1".repeat(64)), false);
      assert.equal(await store.consoleSessions.authenticate("1".repeat(64), iso(1)), undefined, "signed out");
      // Expired by the next insert's time: removed then (its id could not be found anyway).
      await store.consoleSessions.insert({
        ...base,
        idHash: "3".repeat(64),
        createdAt: iso(20_000),
        expiresAt: iso(30_000),
      });
      assert.equal(await store.consoleSessions.delete("2".repeat(64)), false, "the expired row was removed");
      assert.ok(await store.consoleSessions.authenticate("3".repeat(64), iso(20_001)));
      assert.equal(await store.tokens.revoke(token.id, iso(20_002)), true);
      assert.equal(await store.consoleSessions.authenticate("3".repeat(64), iso(20_003)), undefined, "revoked");
    });
  });
}
