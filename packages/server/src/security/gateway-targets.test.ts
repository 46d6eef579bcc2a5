import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import SQLite from "better-sqlite3";
import { testDialects } from "../testing/dialects.js";
import { execHttp } from "../testing/exec-client.js";
import { type FakeInternet, startFakeInternet } from "../testing/fake-internet.js";
import { GATEWAY_CLIENT } from "../testing/gateway-client.js";
import { startTestServer, type TestServer } from "../testing/server.js";

const sqlite = testDialects[0];

/** An HTTP listener on a local address that must never be reached: it counts connections. */
interface Trap {
  readonly server: Server;
  connections: number;
  readonly keys: string[];
}

async function trap(host: string, port: number): Promise<Trap | undefined> {
  const t: Trap = { server: createServer(), connections: 0, keys: [] };
  t.server.on("connection", () => {
    t.connections++;
  });
  t.server.on("request", (req, res) => {
    t.keys.push(String(req.headers.authorization ?? ""));
    res.end("reached the host's own listener\n");
  });
  try {
    await new Promise<void>((resolve, reject) => {
      t.server.once("error", reject);
      t.server.listen(port, host, () => resolve());
    });
  } catch {
    return undefined; // e.g. no IPv6 loopback on this host
  }
  return t;
}

interface GwRes {
  status: number;
  text: string;
}

/**
 * Issue #19 finding 7 (gateway SSRF): a connector's base URL may only ever lead to a global
 * unicast address, whatever form the address takes, checked when it is configured and, above all,
 * when the gateway connects (the address checked is the address connected to). The traps are
 * listeners on the host's own addresses (loopback and its address on the fake internet's link):
 * each must count no connection. Names resolve only through the fake internet's DNS server (the
 * server's DNS upstream), never the host's resolver; the forms that would lead off this host (the
 * metadata address, private ranges) are only configured, never connected to, even by a broken
 * server.
 */
describe("gateway targets: nothing but global unicast, checked at connect time", () => {
  let s: TestServer;
  let fake: FakeInternet;
  let token: string;
  let dir: string;
  let db: SQLite.Database;
  let gw = "";
  let port = 0;
  let publicIp = "";
  const traps: Trap[] = [];
  const key = `gw-target-key-${Date.now()}`;

  const reached = () => traps.reduce((n, t) => n + t.connections, 0);

  /** Creates a custom_api connector through the API. */
  const create = (baseUrl: string) =>
    s.api("POST", "/v1/oauth/connections/api_key", {
      token,
      json: { provider: "custom_api", api_key: key, base_api_url: baseUrl, access_policy: { allow_all: true } },
    });

  /**
   * A connector whose stored base URL is `raw` as is: created with a harmless URL through the API,
   * then its row changed under the server (a row of an older version, or written around the API
   * check): the connect-time check must stand on its own.
   */
  async function stored(raw: string): Promise<string> {
    const r = await create(`http://api.gw.test:${port}/api`);
    assert.equal(r.status, 201, r.text);
    const id = r.body.connection.id as string;
    const n = db
      .prepare("UPDATE connectors SET provider_info = ? WHERE id = ?")
      .run(JSON.stringify({ base_api_url: raw }), id);
    assert.equal(n.changes, 1);
    return id;
  }

  /** Calls the gateway from inside the unit, once per connector. */
  async function call(ids: string[]): Promise<GwRes[]> {
    const reqs = ids.map((id) => ({ path: `/v1/gateway/custom_api/${id}/probe` }));
    const r = await execHttp(s.url, token, "gw", ["/.unit/bin/node", "/tmp/gw.mjs", gw, JSON.stringify(reqs)]);
    assert.equal(r.exitCode, 0, r.stderr.toString());
    return JSON.parse(r.stdout.toString());
  }

  /** Each connector's call is refused with 502 naming the rule, and no trap counted a connection. */
  function assertRefused(cases: [string, string][], res: GwRes[]): void {
    assert.deepEqual(
      res.map((r, i) => [cases[i]?.[0], r.status, r.text.includes("UMS_PROVIDER_FAILED")]),
      cases.map(([label]) => [label, 502, true]),
    );
    for (const [i, r] of res.entries()) assert.match(r.text, /public/, `${cases[i]?.[0]}: ${r.text}`);
    assert.equal(reached(), 0, `a trap was reached, with keys ${traps.flatMap((t) => t.keys).join(", ")}`);
  }

  before(async () => {
    if (!sqlite) throw new Error("no sqlite");
    const lo = await trap("127.0.0.1", 0);
    assert.ok(lo);
    traps.push(lo);
    port = (lo.server.address() as AddressInfo).port;
    const lo6 = await trap("::1", port);
    if (lo6) traps.push(lo6);
    fake = await startFakeInternet({ names: ["api.gw.test"], httpPorts: [port] });
    publicIp = fake.hosts["api.gw.test"] as string;
    const link = await trap(fake.hostLinkIp, port);
    assert.ok(link);
    traps.push(link);
    dir = await mkdtemp(join(tmpdir(), "ums-gw-targets-"));
    const cfg = join(dir, "connectors.json");
    // The fake internet's documentation range stands in for the public internet; nothing else is allowed.
    await writeFile(cfg, JSON.stringify({ allowBaseUrlRanges: ["203.0.113.0/24"] }));
    s = await startTestServer(sqlite, { connectorsConfig: cfg, dnsUpstream: fake.dnsUpstream });
    token = await s.token("acme");
    const u = await s.api("POST", "/v1/units", { token, json: { name: "gw" } });
    assert.equal(u.status, 201, u.text);
    const w = await execHttp(s.url, token, "gw", ["sh", "-c", "cat > /tmp/gw.mjs"], { stdin: GATEWAY_CLIENT });
    assert.equal(w.exitCode, 0);
    const net = JSON.parse(await readFile(join(s.config.dataDir, "run", u.body.id, "network.json"), "utf8"));
    gw = `http://${net.hostIp}:${s.server.gatewayPort}`;
    db = new SQLite(join(s.config.dataDir, "ums.db"));
    db.pragma("busy_timeout = 5000");
  });
  after(async () => {
    db?.close();
    await s?.close();
    await fake?.close();
    for (const t of traps) {
      t.server.closeAllConnections();
      await new Promise((r) => t.server.close(r));
    }
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  /** Literal forms of the host's own addresses (the traps listen there). */
  const local = (): [string, string][] => [
    ["IPv4-mapped IPv6 (dotted)", `http://[::ffff:127.0.0.1]:${port}/api`],
    ["IPv4-mapped IPv6 (hex)", `http://[::ffff:7f00:1]:${port}/api`],
    ["IPv4-mapped IPv6 (full)", `http://[0:0:0:0:0:ffff:7f00:0001]:${port}/api`],
    ["IPv6 loopback", `http://[::1]:${port}/api`],
    ["IPv6 unspecified (this host)", `http://[::]:${port}/api`],
    ["IPv4 unspecified (this host)", `http://0.0.0.0:${port}/api`],
    ["loopback", `http://127.0.0.1:${port}/api`],
    ["loopback, decimal", `http://2130706433:${port}/api`],
    ["loopback, hex", `http://0x7f000001:${port}/api`],
    ["loopback, hex and short", `http://0x7f.1:${port}/api`],
    ["loopback, octal", `http://0177.0.0.1:${port}/api`],
    ["loopback, short", `http://127.1:${port}/api`],
    ["loopback, trailing dot", `http://127.0.0.1.:${port}/api`],
    ["the host's link address, IPv4-mapped", `http://[::ffff:${fake.hostLinkIp}]:${port}/api`],
  ];
  /** Forms that may lead off this host (an IPv6 default route takes the first two): only ever configured. */
  const remote: [string, string][] = [
    ["IPv4-compatible IPv6", "http://[::127.0.0.1]/api"],
    ["NAT64 well-known prefix (RFC 6052)", "http://[64:ff9b::127.0.0.1]/api"],
    ["metadata, IPv4-mapped", "http://[::ffff:169.254.169.254]/latest"],
    ["metadata, IPv4-mapped hex", "http://[::ffff:a9fe:a9fe]/latest"],
    ["metadata, decimal", "http://2852039166/latest"],
    ["private 10/8, IPv4-mapped", "http://[::ffff:10.0.0.1]/"],
    ["private 192.168/16, IPv4-mapped hex", "http://[::ffff:c0a8:101]/"],
    ["private 172.16/12, NAT64", "http://[64:ff9b::172.16.0.1]/"],
    ["shared 100.64/10, IPv4-mapped", "http://[::ffff:100.64.0.1]/"],
    ["6to4 of a private address", "http://[2002:a00:1::1]/"],
    ["unique local IPv6", "http://[fd00::1]/"],
    ["link-local IPv6", "http://[fe80::1]/"],
    ["multicast", "http://[ff02::1]/"],
  ];
  const localNames = (): [string, string][] => [
    ["localhost", `http://localhost:${port}/api`],
    ["LOCALHOST. (trailing dot)", `http://LOCALHOST.:${port}/api`],
    ["localhost.. (two trailing dots)", `http://localhost..:${port}/api`],
    ["a name under localhost", `http://api.localhost:${port}/api`],
    ["a name under localhost, trailing dot", `http://Api.LocalHost.:${port}/api`],
  ];

  it("literal addresses: refused when configured (400 naming the rule)", async () => {
    for (const [label, url] of [...local(), ...remote]) {
      const r = await create(url);
      assert.equal(r.status, 400, `${label} (${url}) was accepted: ${r.text}`);
      assert.match(r.body.errors[0], /^base_api_url: .*public/, label);
    }
    assert.equal(reached(), 0);
  });

  it("literal addresses: refused at connect time when stored anyway (the traps are never reached)", async () => {
    const cases = local();
    const ids: string[] = [];
    for (const [, url] of cases) ids.push(await stored(url));
    assertRefused(cases, await call(ids));
  });

  it("names of this host: refused without a lookup, when configured and at connect time", async () => {
    for (const [label, url] of localNames()) {
      const r = await create(url);
      assert.equal(r.status, 400, `${label} (${url}) was accepted: ${r.text}`);
      assert.match(r.body.errors[0], /^base_api_url: .*localhost/, label);
    }
    const cases = localNames();
    const ids: string[] = [];
    for (const [, url] of cases) ids.push(await stored(url));
    assertRefused(cases, await call(ids));
    const asked = (await fake.seen()).queries.filter((q) => q.name.includes("localhost"));
    assert.deepEqual(asked, [], "no lookup of a localhost name");
  });

  it("names: every DNS answer is checked (loopback, IPv4-mapped, a public and a private answer together)", async () => {
    await fake.setRecords({
      "loopback.gw.test": [["127.0.0.1"]],
      "mapped.gw.test": [["::ffff:127.0.0.1"]],
      "v6.gw.test": [["::1"]],
      "zero.gw.test": [["0.0.0.0"]],
      "link.gw.test": [[fake.hostLinkIp]],
      "mixed.gw.test": [[publicIp, "127.0.0.1"]],
      "mixed6.gw.test": [[publicIp, "::ffff:7f00:1"]],
    });
    const cases: [string, string][] = ["loopback", "mapped", "v6", "zero", "link", "mixed", "mixed6"].map((n) => [
      n,
      `http://${n}.gw.test:${port}/api`,
    ]);
    // Names are taken when configured (they are resolved when used).
    for (const [label, url] of cases) assert.equal((await create(url)).status, 201, label);
    const ids: string[] = [];
    for (const [, url] of cases) ids.push(await stored(url));
    assertRefused(cases, await call(ids));
  });

  it("names: the address checked is the address connected to (DNS rebinding)", async () => {
    // The first lookup answers the public address, every later one loopback.
    await fake.setRecords({ "rebind.gw.test": [[publicIp], ["127.0.0.1"]] });
    const id = await stored(`http://rebind.gw.test:${port}/api`);
    const [first] = await call([id]);
    assert.equal(first?.status, 200, first?.text);
    assert.equal(first?.text, "hello from api.gw.test\n");
    const lookups = (await fake.seen()).queries.filter((q) => q.name === "rebind.gw.test" && q.type === "A");
    assert.equal(lookups.length, 1, "one lookup per connection: no second resolution between check and connect");
    // The next call resolves again and is refused.
    assertRefused([["rebound", `http://rebind.gw.test:${port}/api`]], await call([id]));
  });

  it("a public target through the same path is reached (control)", async () => {
    const r = await create(`http://api.gw.test:${port}/v1/`);
    assert.equal(r.status, 201, r.text);
    const [res] = await call([r.body.connection.id]);
    assert.equal(res?.status, 200, res?.text);
    assert.equal(res?.text, "hello from api.gw.test\n");
    assert.equal(reached(), 0);
  });
});
