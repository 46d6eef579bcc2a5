// Issue #20 part 6: token expiry, roles on the audit log, and an audit log of every state-changing
// call (who, what, when, outcome) that never holds a secret; on every database.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import WebSocket from "ws";
import { testDialects } from "../../testing/dialects.js";
import { startTestServer, type TestServer } from "../../testing/server.js";

interface Event {
  id: string;
  at: string;
  token_id: string | null;
  method: string;
  route: string;
  unit: string | null;
  status: number;
  code: string | null;
  ms: number;
}

for (const dialect of testDialects) {
  describe(`tokens that expire, and the audit log (${dialect.name})`, { skip: dialect.skip, timeout: 180_000 }, () => {
    let s: TestServer;
    let admin: string;
    let member: string;
    let adminId: string;
    before(async () => {
      s = await startTestServer(dialect);
      admin = await s.token("acme");
      member = await s.token("acme", { role: "member" });
      const list = await s.api("GET", "/v1/organizations/acme/tokens", { token: admin });
      adminId = list.body.tokens.find((t: { role: string }) => t.role === "admin").id;
    });
    after(() => s?.close());

    const audit = async (query = "") => {
      const r = await s.api("GET", `/v1/organizations/acme/audit${query}`, { token: admin });
      assert.equal(r.status, 200, r.text);
      return r.body as { events: Event[]; next_before: string | null };
    };

    it("a token minted with expires_at works until then, then gets 401 UMS_TOKEN_EXPIRED; a past expiry is refused", async () => {
      const soon = new Date(Date.now() + 2_000).toISOString();
      const r = await s.api("POST", "/v1/organizations/acme/tokens", {
        token: admin,
        json: { description: "short", expires_at: soon },
      });
      assert.equal(r.status, 201, r.text);
      assert.equal(r.body.expires_at, soon);
      const short = r.body.token as string;
      assert.equal((await s.api("GET", "/v1/units", { token: short })).status, 200);
      const listed = await s.api("GET", "/v1/organizations/acme/tokens", { token: admin });
      const shown = listed.body.tokens.find((t: { id: string }) => t.id === r.body.id);
      assert.equal(shown.expires_at, soon);
      assert.ok(shown.last_used_at, "last_used_at is set once the token was used");
      await new Promise((res) => setTimeout(res, Date.parse(soon) - Date.now() + 100));
      const late = await s.api("GET", "/v1/units", { token: short });
      assert.equal(late.status, 401);
      assert.equal(late.body.code, "UMS_TOKEN_EXPIRED");
      assert.match(late.body.error, /expired at/);
      for (const bad of ["2020-01-01T00:00:00Z", "tomorrow"]) {
        const refused = await s.api("POST", "/v1/organizations/acme/tokens", {
          token: admin,
          json: { expires_at: bad },
        });
        assert.equal(refused.status, 400, bad);
        assert.equal(refused.body.code, "UMS_VALIDATION");
      }
    });

    it("records who did what to which unit and the outcome, reads not; never a secret", async () => {
      const secret = "sk-live-DO-NOT-LOG-4242";
      assert.equal((await s.api("POST", "/v1/units", { token: member, json: { name: "audited" } })).status, 201);
      // A refused call is recorded with its code.
      assert.equal((await s.api("POST", "/v1/units", { token: member, json: { name: "audited" } })).status, 409);
      // Secrets in a query (exec's env and argv) and in a body (a connector's key) stay out.
      const run = await s.api(
        "POST",
        `/v1/units/audited/exec?cmd=true&env=${encodeURIComponent(`API_KEY=${secret}`)}&cmd=${secret}`,
        { token: member },
      );
      assert.equal(run.status, 200, run.text);
      const key = await s.api("POST", "/v1/oauth/connections/api_key", {
        token: admin,
        json: { provider: "openai", api_key: secret },
      });
      assert.equal(key.status, 201, key.text);
      // A websocket exec session.
      const ws = new WebSocket(`${s.url.replace(/^http/, "ws")}/v1/units/audited/exec?cmd=true`, {
        headers: { authorization: `Bearer ${member}` },
      });
      await new Promise<void>((res, rej) => {
        ws.on("close", () => res());
        ws.on("error", rej);
      });
      await s.api("GET", "/v1/units/audited", { token: member });
      assert.equal((await s.api("DELETE", "/v1/units/audited", { token: member })).status, 204);

      // Writes are awaited after the answer: give the last one a moment.
      let events: Event[] = [];
      for (let i = 0; i < 50; i++) {
        events = (await audit("?unit=audited")).events;
        if (events.some((e) => e.method === "DELETE")) break;
        await new Promise((res) => setTimeout(res, 50));
      }
      const seen = events.map((e) => `${e.method} ${e.route} ${e.status} ${e.code ?? ""}`.trim()).reverse();
      assert.deepEqual(seen, [
        "POST /v1/units 201",
        "POST /v1/units 409 UMS_UNIT_EXISTS",
        "POST /v1/units/:name/exec 200",
        "GET /v1/units/:name/exec 101",
        "DELETE /v1/units/:name 204",
      ]);
      const memberId = events[0]?.token_id;
      assert.ok(memberId && memberId !== adminId);
      assert.ok(events.every((e) => e.unit === "audited" && Date.parse(e.at) > 0));
      const all = await s.api("GET", "/v1/organizations/acme/audit?limit=500", { token: admin });
      assert.doesNotMatch(all.text, new RegExp(secret));
      assert.doesNotMatch(all.text, /ums_[0-9A-Za-z]{43}/, "no token secret");
      // The connector call was recorded, without its body.
      assert.ok(
        all.body.events.some((e: Event) => e.route === "/v1/oauth/connections/api_key" && e.status === 201),
        all.text,
      );
      // Filter by token.
      const byMember = await audit(`?token=${memberId}`);
      assert.ok(byMember.events.length >= 5 && byMember.events.every((e) => e.token_id === memberId));
    });

    it("pages newest first with next_before; since filters by time", async () => {
      const first = await audit("?limit=2");
      assert.equal(first.events.length, 2);
      assert.ok(first.next_before);
      assert.ok((first.events[0]?.id ?? "") > (first.events[1]?.id ?? ""), "newest first");
      const next = await audit(`?limit=2&before=${first.next_before}`);
      assert.ok(next.events.every((e) => e.id < (first.next_before ?? "")));
      const future = await audit(`?since=${encodeURIComponent(new Date(Date.now() + 60_000).toISOString())}`);
      assert.deepEqual(future.events, []);
      assert.equal((await s.api("GET", "/v1/organizations/acme/audit?limit=0", { token: admin })).status, 400);
    });

    it("only the organization's admin tokens read it; another organization's is 404", async () => {
      const r = await s.api("GET", "/v1/organizations/acme/audit", { token: member });
      assert.equal(r.status, 403);
      assert.equal(r.body.code, "UMS_ADMIN_REQUIRED");
      const other = await s.token("other");
      assert.equal((await s.api("GET", "/v1/organizations/acme/audit", { token: other })).status, 404);
      const own = await s.api("GET", "/v1/organizations/other/audit", { token: other });
      assert.equal(own.status, 200);
      assert.ok(
        own.body.events.every((e: Event) => e.unit !== "audited"),
        "acme's events are not other's",
      );
    });
  });
}
