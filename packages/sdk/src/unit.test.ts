import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ENVIRONMENT_VERSION } from "@ums/protocol";
import { NotFoundError, organization, UmsClient, Unit } from "./index.js";
import { type LaunchedServer, launchServer } from "./testing/launcher.js";

describe("Unit lifecycle against a real ums server", () => {
  let server: LaunchedServer;
  let client: UmsClient;

  before(async () => {
    server = await launchServer();
    client = new UmsClient({ baseUrl: server.baseUrl, token: await server.token("lifecycle") });
  });
  after(async () => {
    await server?.stop();
  });

  it("create returns a cold unit with the server's fields", async () => {
    const before = Date.now();
    const unit = await Unit.create("alpha", { client });
    assert.equal(unit.name, "alpha");
    assert.match(unit.id, /^unit-[0-9a-f-]{36}$/);
    assert.equal(unit.organization, "lifecycle");
    assert.match(unit.url, /^http:\/\/alpha-[a-z0-9]{8}\.units\.localhost:\d+$/);
    assert.equal(unit.status, "cold");
    assert.ok(unit.createdAt instanceof Date);
    assert.ok(Math.abs(unit.createdAt.getTime() - before) < 60_000, `createdAt ${unit.createdAt.toISOString()}`);
    assert.deepEqual(unit.urlSettings, { auth: "unit" });
    assert.deepEqual(unit.labels, []);
    assert.equal(unit.version, ENVIRONMENT_VERSION);
    assert.equal(unit.environmentVersion, ENVIRONMENT_VERSION);
    assert.equal(unit.lastRunningAt, null);
    assert.equal(unit.lastWarmingAt, null);
  });

  it("create with connection options instead of a client, and with url settings", async () => {
    const unit = await Unit.create("beta", {
      baseUrl: server.baseUrl,
      token: client.config.token,
      timeoutMs: 10_000,
      urlSettings: { auth: "public" },
    });
    assert.deepEqual(unit.urlSettings, { auth: "public" });
    assert.equal(unit.client.baseUrl, server.baseUrl);
  });

  it("connect returns the same unit; refresh reloads changes made elsewhere", async () => {
    const created = await Unit.create("gamma", { client });
    const connected = await Unit.connect("gamma", { client });
    assert.deepEqual(connected.toJSON(), created.toJSON());

    await connected.updateUrlSettings({ auth: "unit", privateAccess: "organization" });
    assert.deepEqual(created.urlSettings, { auth: "unit" }, "a snapshot does not change by itself");
    const same = await created.refresh();
    assert.equal(same, created, "refresh returns the unit itself");
    assert.deepEqual(created.urlSettings, { auth: "unit", privateAccess: "organization" });
    assert.ok(created.updatedAt.getTime() >= created.createdAt.getTime());
  });

  it("updateUrlSettings replaces the settings and updates the unit in place", async () => {
    const unit = await Unit.create("delta", { client });
    await unit.updateUrlSettings({ auth: "public" });
    assert.deepEqual(unit.urlSettings, { auth: "public" });
    assert.deepEqual((await Unit.connect("delta", { client })).urlSettings, { auth: "public" });

    await unit.updateUrlSettings({ privateAccess: "admins" });
    assert.deepEqual(unit.urlSettings, { auth: "unit", privateAccess: "admins" }, "omitted auth becomes 'unit'");
    await unit.updateUrlSettings({ auth: "unit", privateAccess: null });
    assert.deepEqual(unit.urlSettings, { auth: "unit" });
  });

  it("check reports a cold unit as hibernated", async () => {
    const unit = await Unit.create("epsilon", { client });
    const health = await unit.check();
    assert.equal(health.status, "hibernated");
    assert.equal(health.unitName, "epsilon");
    assert.equal(health.unitId, unit.id);
    assert.ok(health.checkedAt instanceof Date && !Number.isNaN(health.checkedAt.getTime()));
    assert.ok(Number.isInteger(health.elapsedMs) && health.elapsedMs >= 0);
  });

  it("upgrade('latest') of a new unit is up_to_date, and so is its explicit version", async () => {
    const unit = await Unit.create("zeta", { client });
    assert.deepEqual(await unit.upgrade("latest"), { name: "zeta", status: "up_to_date" });
    assert.deepEqual(await unit.upgrade(), { name: "zeta", status: "up_to_date" });
    assert.deepEqual(await unit.upgrade(ENVIRONMENT_VERSION), { name: "zeta", status: "up_to_date" });
  });

  it("delete removes the unit: connect, refresh and a second delete throw NotFoundError", async () => {
    const unit = await Unit.create("eta", { client });
    await unit.delete();
    await assert.rejects(Unit.connect("eta", { client }), (err: unknown) => {
      assert.ok(err instanceof NotFoundError, `got ${String(err)}`);
      assert.equal(err.status, 404);
      assert.equal(err.code, "UMS_UNIT_NOT_FOUND");
      assert.match(err.message, /eta/);
      return true;
    });
    await assert.rejects(unit.refresh(), NotFoundError);
    await assert.rejects(unit.delete(), NotFoundError);
    // The name is free again.
    assert.equal((await Unit.create("eta", { client })).name, "eta");
  });

  it("static delete removes a unit by name", async () => {
    await Unit.create("theta", { client });
    await Unit.delete("theta", { client });
    await assert.rejects(Unit.connect("theta", { client }), NotFoundError);
  });

  it("names are sent encoded, so a name with a slash cannot reach another route", async () => {
    await Unit.create("iota", { client });
    // Unencoded, 'iota/check' would be the health check of 'iota'.
    await assert.rejects(Unit.connect("iota/check", { client }), (err: unknown) => {
      assert.ok(err instanceof NotFoundError, `got ${String(err)}`);
      assert.equal(err.code, "UMS_UNIT_NOT_FOUND");
      return true;
    });
  });

  it("organization() describes the token's organization", async () => {
    const org = await organization({ client });
    assert.equal(org.slug, "lifecycle");
    assert.equal(org.unitsEnabled, true);
    assert.deepEqual(org.activeUnits, [], "no unit runs on this server");
    assert.ok(Number.isInteger(org.maxUnits) && org.maxUnits > 0);
    assert.ok(Number.isInteger(org.activeUnitLimit) && org.activeUnitLimit > 0);
  });
});
