import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  type FakeOAuth,
  fakeBearerApi,
  fakeGithub,
  fakeOAuth,
  writeConnectorsConfig,
} from "../../testing/fake-providers.js";
import { startSqliteServer, type TestServer } from "../../testing/server.js";

/**
 * Issue #14 Deliver 1: an OAuth flow started with the console cookie is that session's; the browser's
 * GET callback is accepted only with it. The provider's redirect carries no SameSite=Strict cookie,
 * so the callback first answers a same-origin relay page that asks again with it.
 */
describe("console sessions and OAuth callbacks", () => {
  let s: TestServer;
  let oauth: FakeOAuth;
  let api: Awaited<ReturnType<typeof fakeBearerApi>>;
  let dir: string;
  let alice: string;
  let bob: string;

  before(async () => {
    oauth = await fakeOAuth();
    api = await fakeBearerApi();
    dir = await mkdtemp(join(tmpdir(), "ums-console-oauth-"));
    const cfg = await writeConnectorsConfig(dir, { providers: { github: fakeGithub(oauth, api) } });
    s = await startSqliteServer({ connectorsConfig: cfg });
    alice = await s.token("alice");
    bob = await s.token("bob");
  });
  after(async () => {
    await s?.close();
    await oauth?.close();
    await api?.close();
    await rm(dir, { recursive: true, force: true });
  });

  async function signIn(token: string): Promise<{ cookie: string; csrf: string }> {
    const r = await s.api("POST", "/v1/console/session", { json: { token } });
    assert.equal(r.status, 200, r.text);
    const m = /^ums_console=([^;]+);/.exec(r.headers.get("set-cookie") ?? "");
    return { cookie: `ums_console=${m?.[1]}`, csrf: r.body.csrf };
  }

  /** Starts a flow as the console does (the cookie), consents at the fake provider: the callback URL it sends the browser to. */
  async function start(cookie: string): Promise<string> {
    const a = await s.api("GET", "/v1/oauth/github/authorize", { headers: { cookie, origin: s.url } });
    assert.equal(a.status, 200, a.text);
    const consent = await fetch(a.body.authorize_url, { redirect: "manual" });
    const back = consent.headers.get("location") ?? "";
    assert.ok(back.startsWith(`${s.url}/v1/oauth/github/callback?`), back);
    return back;
  }

  const get = async (url: string, cookie?: string) => {
    const r = await fetch(url, { redirect: "manual", ...(cookie && { headers: { cookie } }) });
    return { status: r.status, html: await r.text(), headers: r.headers };
  };

  /** The URL the relay page asks again with (its meta refresh and its link). */
  function relayTarget(html: string): string {
    const refresh = /<meta http-equiv="refresh" content="0;url=([^"]+)">/.exec(html)?.[1];
    const link = /<a href="([^"]+)">Continue<\/a>/.exec(html)?.[1];
    assert.ok(refresh && refresh === link, html);
    return s.url + refresh.replace(/&amp;/g, "&");
  }

  const connectors = async (token: string) =>
    (await s.api("GET", "/v1/oauth/connections?provider=github", { token })).body.connections.length;

  it("the session that started the flow completes it, through the relay page", async () => {
    const mine = await signIn(alice);
    const callback = await start(mine.cookie);
    const before = await connectors(alice);
    // The provider's cross-site redirect arrives without the Strict cookie: the relay page.
    const first = await get(callback);
    assert.equal(first.status, 200, first.html);
    assert.match(first.headers.get("content-type") ?? "", /^text\/html/);
    assert.equal(first.headers.get("cache-control"), "no-store");
    assert.equal(first.headers.get("referrer-policy"), "no-referrer");
    assert.doesNotMatch(first.headers.get("content-security-policy") ?? "", /script-src|unsafe-eval/);
    assert.doesNotMatch(first.html, /<script/i);
    const again = relayTarget(first.html);
    assert.equal(new URL(again).origin, s.url, "same origin");
    assert.equal(new URL(again).searchParams.get("relay"), "1");
    assert.equal(await connectors(alice), before, "the relay page completes nothing");
    // The browser asks again, now same-site: with the cookie.
    const done = await get(again, mine.cookie);
    assert.equal(done.status, 200, done.html);
    assert.match(done.html, /Connector ready/);
    assert.match(done.html, /href="\/console\/"/);
    assert.equal(await connectors(alice), before + 1);
    const replay = await get(again, mine.cookie);
    assert.equal(replay.status, 400, "a state completes one flow");
  });

  it("another session's callback is refused, and the flow stays its starter's", async () => {
    const mine = await signIn(alice);
    const sameOrg = await signIn(alice);
    const otherOrg = await signIn(bob);
    const callback = await start(mine.cookie);
    const again = relayTarget((await get(callback)).html);
    const before = await connectors(alice);
    for (const [who, cookie] of [
      ["another session of the organization", sameOrg.cookie],
      ["another organization's session", otherOrg.cookie],
      ["no session at all (after the relay)", undefined],
      ["a forged cookie", `ums_console=${"A".repeat(43)}`],
      ["a malformed cookie", "ums_console=../x"],
    ] as const) {
      const r = await get(again, cookie);
      assert.equal(r.status, 403, `${who}: ${r.html}`);
      assert.match(r.html, /another ums console session/, who);
    }
    // With another session's cookie on the first request, no relay either: refused.
    assert.equal((await get(callback, sameOrg.cookie)).status, 403);
    assert.equal(await connectors(alice), before, "nothing was created");
    assert.equal(await connectors(bob), 0);
    // Refusals did not use the state up: its own session still completes it.
    const done = await get(again, mine.cookie);
    assert.equal(done.status, 200, done.html);
    assert.equal(await connectors(alice), before + 1);
  });

  it("a session signed out (or its token revoked) before the callback cannot complete it", async () => {
    const mine = await signIn(alice);
    const callback = await start(mine.cookie);
    const again = relayTarget((await get(callback)).html);
    const out = await s.api("DELETE", "/v1/console/session", {
      headers: { cookie: mine.cookie, "x-ums-csrf": mine.csrf },
    });
    assert.equal(out.status, 204);
    assert.equal((await get(again, mine.cookie)).status, 403);
  });

  it("flows started with a bearer token keep the plain browser callback", async () => {
    const a = await s.api("GET", "/v1/oauth/github/authorize", { token: alice });
    const consent = await fetch(a.body.authorize_url, { redirect: "manual" });
    const r = await get(consent.headers.get("location") ?? "");
    assert.equal(r.status, 200, r.html);
    assert.match(r.html, /Connector ready/);
    assert.doesNotMatch(r.html, /Back to the console/);
  });

  it("bad callback input is a 400, never a 500", async () => {
    for (const q of ["relay=2", "relay=1", "code=x&state=y&relay=1&relay=1", `code=x&state=${"s".repeat(2000)}`]) {
      const r = await get(`${s.url}/v1/oauth/github/callback?${q}`);
      assert.equal(r.status, 400, `${q}: ${r.html}`);
    }
  });
});
