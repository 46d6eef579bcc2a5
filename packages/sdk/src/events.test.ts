// The SDK's Events (issue #17): list pages, all, follow as an async iterator (stopped by its
// signal), and verifyWebhook.
import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { after, before, describe, it } from "node:test";
import {
  UmsClient as Client,
  type EventInfo,
  Events,
  type UmsClient,
  ValidationError,
  verifyWebhook,
} from "./index.js";
import { type LaunchedServer, launchServer } from "./testing/launcher.js";

describe("Events (SDK)", () => {
  let server: LaunchedServer;
  let client: UmsClient;

  before(async () => {
    server = await launchServer();
    client = new Client({ baseUrl: server.baseUrl, token: await server.token("sdk-events"), timeoutMs: 60_000 });
  });
  after(async () => {
    await server?.stop();
  });

  it("lists, pages and follows the organization's events", async () => {
    const events = new Events({ client });
    for (const name of ["e1", "e2", "e3"]) {
      await client.request("POST", "/v1/units", { body: { name } });
    }
    const page = await events.list({ types: ["unit.created"], maxResults: 2 });
    assert.equal(page.events.length, 2);
    assert.equal(page.hasMore, true);
    assert.ok(page.events[0]?.time instanceof Date);
    assert.match(page.events[0]?.actor ?? "", /^token:/);
    const all: EventInfo[] = [];
    for await (const e of events.all({ types: ["unit.created"], maxResults: 1 })) all.push(e);
    assert.deepEqual(
      all.map((e) => e.unit),
      ["e1", "e2", "e3"],
    );
    // A follow from the first event: the stored rest, then a new one; stopped by its signal.
    const stop = new AbortController();
    const seen: string[] = [];
    const following = (async () => {
      for await (const e of events.follow({ since: all[0]?.id as string, signal: stop.signal })) {
        seen.push(`${e.type} ${e.unit}`);
        if (e.unit === "e4") stop.abort();
      }
    })();
    await client.request("POST", "/v1/units", { body: { name: "e4" } });
    await following;
    assert.deepEqual(seen, ["unit.created e2", "unit.created e3", "unit.created e4"]);
    await assert.rejects(events.list({ since: "bogus" }), ValidationError);
  });

  it("verifyWebhook checks the signature and the timestamp", () => {
    const secret = "whsec_test";
    const body = '{"id":"evt_1"}';
    const ts = String(Math.floor(Date.now() / 1000));
    const signature = `v1=${createHmac("sha256", secret).update(`${ts}.${body}`).digest("hex")}`;
    assert.equal(verifyWebhook({ secret, body, signature, timestamp: ts }), true);
    assert.equal(verifyWebhook({ secret, body: `${body} `, signature, timestamp: ts }), false);
    assert.equal(verifyWebhook({ secret: "other", body, signature, timestamp: ts }), false);
    assert.equal(verifyWebhook({ secret, body, signature, timestamp: String(Number(ts) - 3600) }), false);
    assert.equal(verifyWebhook({ secret, body, signature: undefined, timestamp: ts }), false);
  });
});
