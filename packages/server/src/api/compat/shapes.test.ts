// Issue #12: what the Sprites clients send and read, on both prefixes. /v1/units keeps the spec's
// shapes; /v1/sprites answers in the clients' where they differ (docs/ARCHITECTURE.md section 1,
// "The compatibility prefix"). Bad values answer 400 naming the field and change nothing.
import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { startSqliteServer, type TestServer } from "../../testing/server.js";

const PREFIXES = ["/v1/units", "/v1/sprites"] as const;

describe("the Sprites clients' shapes on /v1/units and /v1/sprites", () => {
  let s: TestServer;
  let token: string;
  let other: string;
  before(async () => {
    s = await startSqliteServer();
    token = await s.token("shapes");
    other = await s.token("shapes-other");
  });
  after(() => s?.close());
  const api = (method: string, path: string, json?: unknown, t = token) =>
    s.api(method, path, { token: t, ...(json !== undefined && { json }) });

  for (const prefix of PREFIXES) {
    const tag = prefix.split("/")[2];

    it(`${prefix}: create with config sets the resources policy and shows config; labels`, async () => {
      const name = `cfg-${tag}`;
      const r = await api("POST", prefix, {
        name,
        config: { ram_mb: 640, cpus: 0.5, storage_gb: 7 },
        labels: ["a", "b"],
        wait_for_capacity: true,
      });
      assert.equal(r.status, 201, r.text);
      assert.deepEqual(r.body.config, { ram_mb: 640, cpus: 0.5, storage_gb: 7 });
      assert.deepEqual(r.body.labels, ["a", "b"]);
      const policy = (await api("GET", `${prefix}/${name}/policy/resources`)).body;
      assert.deepEqual([policy.memory, policy.cpu], [{ limit_mb: 640 }, { cores: 0.5 }]);
      // A later resources POST is what config shows.
      await api("POST", `${prefix}/${name}/policy/resources`, { memory: { limit_mb: 1024 } });
      assert.deepEqual((await api("GET", `${prefix}/${name}`)).body.config, { ram_mb: 1024, cpus: 0.5, storage_gb: 7 });
      const plain = await api("POST", prefix, { name: `plain-${tag}` });
      assert.equal(plain.body.config, undefined, "config is omitted when nothing was set");
    });

    it(`${prefix}: bad config and wait_for_capacity answer 400 naming the field and create nothing`, async () => {
      const cases: [unknown, RegExp][] = [
        [{ ram_mb: 8 }, /^config\.ram_mb: /],
        [{ ram_mb: 1.5 }, /^config\.ram_mb: /],
        [{ cpus: 0 }, /^config\.cpus: /],
        [{ cpus: 1000 }, /^config\.cpus: must be at most/],
        [{ storage_gb: 0 }, /^config\.storage_gb: /],
        [{ storage_gb: "5" }, /^config\.storage_gb: /],
        [{ region: "ams" }, /config.*region/],
      ];
      for (const [config, field] of cases) {
        const r = await api("POST", prefix, { name: `bad-${tag}`, config });
        assert.equal(r.status, 400, `${JSON.stringify(config)}: ${r.text}`);
        assert.equal(r.body.code, "UMS_VALIDATION");
        assert.ok(
          r.body.errors.some((e: string) => field.test(e)),
          `${JSON.stringify(config)}: ${r.text}`,
        );
      }
      const r = await api("POST", prefix, { name: `bad-${tag}`, wait_for_capacity: "yes" });
      assert.equal(r.status, 400);
      assert.match(r.body.errors.join("\n"), /wait_for_capacity/);
      assert.equal((await api("GET", `${prefix}/bad-${tag}`)).status, 404, "no unit was created");
    });

    it(`${prefix}: update replaces labels, clear_labels removes them, both at once is a 400`, async () => {
      const name = `lbl-${tag}`;
      await api("POST", prefix, { name, labels: ["x"] });
      const put = await api("PUT", `${prefix}/${name}`, { labels: ["y", "z"] });
      assert.deepEqual(put.body.labels, ["y", "z"]);
      const both = await api("PUT", `${prefix}/${name}`, { labels: ["q"], clear_labels: true });
      assert.equal(both.status, 400);
      assert.match(both.body.errors[0], /^clear_labels: /);
      assert.deepEqual((await api("GET", `${prefix}/${name}`)).body.labels, ["y", "z"], "unchanged by the 400");
      const cleared = await api("PUT", `${prefix}/${name}`, { clear_labels: true });
      assert.equal(cleared.status, 200);
      assert.equal(cleared.body.labels, undefined);
      assert.equal((await api("PUT", `${prefix}/${name}`, { clear_labels: "yes" })).status, 400);
      assert.equal((await api("PUT", `${prefix}/${name}`, { clear_labels: true }, other)).status, 404);
    });

    it(`${prefix}: the session list of a unit with none`, async () => {
      const name = `ses-${tag}`;
      await api("POST", prefix, { name });
      const r = await api("GET", `${prefix}/${name}/exec`);
      assert.equal(r.status, 200);
      assert.deepEqual(r.body, prefix === "/v1/sprites" ? { sessions: [] } : []);
      assert.equal((await api("GET", `${prefix}/${name}/exec`, undefined, other)).status, 404);
      const kill = await api("POST", `${prefix}/${name}/exec/1/kill?timeout=soon`);
      assert.equal(kill.status, 400);
      assert.match(kill.body.errors[0], /^timeout: /);
      assert.equal((await api("POST", `${prefix}/${name}/exec/1/kill?timeout=10s`)).status, 404, "no such session");
    });

    it(`${prefix}: the health check names the unit as the dialect does`, async () => {
      const name = `chk-${tag}`;
      const id = (await api("POST", prefix, { name })).body.id;
      const r = await api("GET", `${prefix}/${name}/check`);
      assert.equal(r.status, 200);
      const { checked_at, elapsed, ...rest } = r.body;
      assert.ok(!Number.isNaN(Date.parse(checked_at)) && Number.isInteger(elapsed));
      const who = prefix === "/v1/sprites" ? { sprite_name: name, sprite_id: id } : { unit_name: name, unit_id: id };
      assert.deepEqual(rest, { ...who, status: "hibernated", reason: rest.reason });
      assert.equal((await api("GET", `${prefix}/${name}/check`, undefined, other)).status, 404);
    });

    it(`${prefix}: a network policy POST answers ${prefix === "/v1/sprites" ? "204" : "200 with the policy"}`, async () => {
      const name = `net-${tag}`;
      await api("POST", prefix, { name });
      const rules = [{ domain: "example.com", action: "allow" }];
      const r = await api("POST", `${prefix}/${name}/policy/network`, { rules });
      if (prefix === "/v1/sprites") {
        assert.equal(r.status, 204);
        assert.equal(r.text, "");
      } else {
        assert.equal(r.status, 200);
        assert.deepEqual(r.body, { rules });
      }
      assert.deepEqual((await api("GET", `${prefix}/${name}/policy/network`)).body, { rules });
      const bad = await api("POST", `${prefix}/${name}/policy/network`, { rules: [{ domain: "example.com" }] });
      assert.equal(bad.status, 400);
      assert.deepEqual((await api("GET", `${prefix}/${name}/policy/network`)).body, { rules }, "unchanged by the 400");
      assert.equal((await api("POST", `${prefix}/${name}/policy/network`, { rules }, other)).status, 404);
    });
  }
});
