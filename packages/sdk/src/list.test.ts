import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { UmsClient, Unit, ValidationError } from "./index.js";
import { type LaunchedServer, launchServer } from "./testing/launcher.js";

describe("Unit.list and Unit.listPage against a real ums server", () => {
  let server: LaunchedServer;
  let token: string;
  /** Every URL the client fetched, so tests can see how many pages were requested. */
  const fetched: URL[] = [];
  let client: UmsClient;
  const names = ["u1", "u2", "u3", "u4", "u5", "u6", "u7"];

  before(async () => {
    server = await launchServer();
    token = await server.token("paging");
    client = new UmsClient({
      baseUrl: server.baseUrl,
      token,
      fetch: (input, init) => {
        fetched.push(new URL(String(input)));
        return fetch(input, init);
      },
    });
    // Created out of order; the list is in name order.
    for (const name of [...names].reverse()) await Unit.create(name, { client });
    await Unit.create("other", { client });
  });
  after(async () => {
    await server?.stop();
  });

  const listRequests = () => fetched.filter((u) => u.pathname === "/v1/units").length;

  it("list yields every unit exactly once across pages of 3, following continuation tokens", async () => {
    const before = listRequests();
    const seen: string[] = [];
    for await (const unit of Unit.list({ client, prefix: "u", pageSize: 3 })) {
      assert.ok(unit instanceof Unit);
      seen.push(unit.name);
    }
    assert.deepEqual(seen, names);
    assert.equal(listRequests() - before, 3, "7 units in pages of 3 take 3 requests");
    const tokens = fetched.slice(-3).map((u) => u.searchParams.get("continuation_token"));
    assert.equal(tokens[0], null, "the first page has no token");
    assert.ok(tokens[1] && tokens[2] && tokens[1] !== tokens[2], `tokens ${JSON.stringify(tokens)}`);
    assert.ok(fetched.slice(-3).every((u) => u.searchParams.get("max_results") === "3"));
  });

  it("list without a prefix includes every unit of the organization and only those", async () => {
    const seen: string[] = [];
    for await (const unit of Unit.list({ client, pageSize: 2 })) seen.push(unit.name);
    assert.deepEqual(seen, [...names, "other"].sort());
    assert.equal(new Set(seen).size, seen.length, "no unit twice");
  });

  it("list fetches lazily: breaking out after the first unit costs one request", async () => {
    const before = listRequests();
    for await (const unit of Unit.list({ client, prefix: "u", pageSize: 3 })) {
      assert.equal(unit.name, "u1");
      break;
    }
    assert.equal(listRequests() - before, 1);
  });

  it("listPage returns one page with hasMore and nextContinuationToken, and continues from it", async () => {
    const first = await Unit.listPage({ client, prefix: "u", pageSize: 3 });
    assert.deepEqual(
      first.units.map((u) => u.name),
      ["u1", "u2", "u3"],
    );
    assert.equal(first.hasMore, true);
    assert.equal(typeof first.nextContinuationToken, "string");
    assert.equal(first.organization, "paging");
    assert.deepEqual([first.cold, first.warm, first.running], [3, 0, 0]);
    assert.ok(Number.isInteger(first.runningLimit) && Number.isInteger(first.warmLimit));

    const second = await Unit.listPage({
      client,
      prefix: "u",
      pageSize: 3,
      continuationToken: first.nextContinuationToken ?? "",
    });
    assert.deepEqual(
      second.units.map((u) => u.name),
      ["u4", "u5", "u6"],
    );
    const last = await Unit.listPage({
      client,
      prefix: "u",
      pageSize: 3,
      continuationToken: second.nextContinuationToken ?? "",
    });
    assert.deepEqual(
      last.units.map((u) => u.name),
      ["u7"],
    );
    assert.equal(last.hasMore, false);
    assert.equal(last.nextContinuationToken, null);
  });

  it("list can start from a continuation token", async () => {
    const first = await Unit.listPage({ client, prefix: "u", pageSize: 3 });
    const rest: string[] = [];
    for await (const u of Unit.list({
      client,
      prefix: "u",
      pageSize: 3,
      continuationToken: first.nextContinuationToken ?? "",
    })) {
      rest.push(u.name);
    }
    assert.deepEqual(rest, ["u4", "u5", "u6", "u7"]);
  });

  it("units from a list are live: they can be refreshed", async () => {
    const page = await Unit.listPage({ client, prefix: "u7" });
    const [u7] = page.units;
    assert.ok(u7);
    await (await Unit.connect("u7", { client })).updateUrlSettings({ auth: "public" });
    await u7.refresh();
    assert.deepEqual(u7.urlSettings, { auth: "public" });
  });

  it("invalid list options are the server's ValidationError", async () => {
    await assert.rejects(Unit.listPage({ client, pageSize: 0 }), (err: unknown) => {
      assert.ok(err instanceof ValidationError, `got ${String(err)}`);
      assert.ok(
        err.errors.some((e) => e.startsWith("max_results")),
        JSON.stringify(err.errors),
      );
      return true;
    });
    const consume = async () => {
      for await (const _ of Unit.list({ client, continuationToken: "not-a-token" })) {
        // never reached
      }
    };
    await assert.rejects(consume(), (err: unknown) => {
      assert.ok(err instanceof ValidationError, `got ${String(err)}`);
      assert.ok(
        err.errors.some((e) => e.startsWith("continuation_token")),
        JSON.stringify(err.errors),
      );
      return true;
    });
  });
});
