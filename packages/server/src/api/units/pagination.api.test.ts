import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { testDialects } from "../../testing/dialects.js";
import { startTestServer, type TestServer } from "../../testing/server.js";

const TOTAL = 1000;
const nameOf = (i: number) => `u${String(i).padStart(4, "0")}`;

/** Spec 4.1 / section 8: pages cover every unit exactly once, in a stable order. */
for (const dialect of testDialects) {
  describe(`pagination over ${TOTAL} units (${dialect.name})`, { skip: dialect.skip }, () => {
    let s: TestServer;
    let token: string;
    before(async () => {
      s = await startTestServer(dialect);
      token = await s.token("pages", { limits: { maxUnits: 5000 } });
      const order = Array.from({ length: TOTAL }, (_, i) => (i * 7919) % TOTAL); // created out of order
      for (let i = 0; i < order.length; i += 16) {
        const batch = order
          .slice(i, i + 16)
          .map((n) => s.api("POST", "/v1/units", { token, json: { name: nameOf(n) } }));
        for (const r of await Promise.all(batch)) assert.equal(r.status, 201, r.text);
      }
    });
    after(() => s?.close());

    async function pageAll(maxResults: number | undefined, between?: (page: number) => Promise<void>) {
      const names: string[] = [];
      let token_: string | null = null;
      let pages = 0;
      for (;;) {
        const q = new URLSearchParams();
        if (maxResults !== undefined) q.set("max_results", String(maxResults));
        if (token_) q.set("continuation_token", token_);
        const r = await s.api("GET", `/v1/units?${q}`, { token });
        assert.equal(r.status, 200, r.text);
        pages++;
        const got = r.body.sprites.map((u: { name: string }) => u.name);
        assert.ok(got.length <= (maxResults ?? 50), `page of ${got.length} > ${maxResults ?? 50}`);
        assert.equal(r.body.cold, got.length);
        names.push(...got);
        if (!r.body.has_more) {
          assert.equal(r.body.next_continuation_token, null);
          break;
        }
        assert.equal(got.length, maxResults ?? 50, "only the last page may be short");
        assert.equal(typeof r.body.next_continuation_token, "string");
        token_ = r.body.next_continuation_token;
        if (between) await between(pages);
      }
      return { names, pages };
    }

    const expected = Array.from({ length: TOTAL }, (_, i) => nameOf(i));

    for (const size of [1, 50, 500]) {
      it(`returns every unit exactly once, in name order, with max_results=${size}`, async () => {
        const { names, pages } = await pageAll(size);
        assert.deepEqual(names, expected);
        assert.equal(pages, Math.ceil(TOTAL / size));
      });
    }

    it("defaults to pages of 50", async () => {
      const { names, pages } = await pageAll(undefined);
      assert.equal(pages, TOTAL / 50);
      assert.equal(names.length, TOTAL);
    });

    it("stays exact while units are created and deleted between pages", async () => {
      const deleted = new Set<string>();
      const created: string[] = [];
      const { names } = await pageAll(50, async (page) => {
        // Delete one unit behind the cursor and one ahead of it, create one on each side.
        const behind = nameOf((page - 1) * 50 + 3);
        const ahead = nameOf(Math.min(TOTAL - 1, page * 50 + 400));
        for (const n of [behind, ahead]) {
          if (deleted.has(n)) continue;
          const r = await s.api("DELETE", `/v1/units/${n}`, { token });
          assert.equal(r.status, 204);
          deleted.add(n);
        }
        for (const n of [`a-new-${page}`, `z-new-${page}`]) {
          assert.equal((await s.api("POST", "/v1/units", { token, json: { name: n } })).status, 201);
          created.push(n);
        }
      });
      assert.equal(new Set(names).size, names.length, "no unit appears twice");
      assert.deepEqual([...names].sort(), names, "stable name order");
      for (const n of expected) {
        if (!deleted.has(n)) assert.ok(names.includes(n), `${n} existed throughout and must be listed`);
      }
      const aheadDeleted = [...deleted].filter((n) => n > (names[0] ?? ""));
      assert.ok(
        aheadDeleted.some((n) => !names.includes(n)),
        "units deleted ahead of the cursor are not listed",
      );
      assert.ok(
        created.some((n) => n.startsWith("z-new") && names.includes(n)),
        "units created ahead are listed",
      );
      assert.ok(!created.some((n) => n.startsWith("a-new") && names.includes(n)), "units created behind are not");
    });

    it("filters by prefix across pages", async () => {
      const all = await s.api("GET", "/v1/units?prefix=u01&max_results=500", { token });
      const expectedNames = all.body.sprites.map((u: { name: string }) => u.name);
      assert.ok(expectedNames.length >= 90, `${expectedNames.length} units start with u01`);
      assert.ok(expectedNames.every((n: string) => n.startsWith("u01")));
      const names: string[] = [];
      let ct: string | null = null;
      do {
        const q = new URLSearchParams({ prefix: "u01", max_results: "7" });
        if (ct) q.set("continuation_token", ct);
        const r = await s.api("GET", `/v1/units?${q}`, { token });
        names.push(...r.body.sprites.map((u: { name: string }) => u.name));
        ct = r.body.has_more ? r.body.next_continuation_token : null;
      } while (ct);
      assert.deepEqual(names, expectedNames);
    });
  });
}
