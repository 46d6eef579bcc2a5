import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { testImage } from "../../runtime/image/test-image.js";
import { testDialects } from "../../testing/dialects.js";
import { execHttp } from "../../testing/exec-client.js";
import { type FakeInternet, startFakeInternet } from "../../testing/fake-internet.js";
import { freePort } from "../../testing/free-port.js";
import { startTestServer, type TestServer } from "../../testing/server.js";

const sqlite = testDialects[0];
const NAMES = [
  "api.github.com",
  "registry.npmjs.org",
  "example.com",
  "www.example.com",
  "bad.example.com",
  "evil.example",
];

/** A DNS query over TCP (two-byte length prefix) from python3 in the unit: prints name, rcode, answers. */
const TCP_QUERY = [
  "import socket, struct, sys",
  "def q(name):",
  "    m = struct.pack('>HHHHHH', 0x1234, 0x0100, 1, 0, 0, 0)",
  "    m += b''.join(bytes([len(l)]) + l.encode() for l in name.split('.')) + bytes(1) + struct.pack('>HH', 1, 1)",
  "    s = socket.create_connection((sys.argv[1], 53), timeout=3)",
  "    s.sendall(struct.pack('>H', len(m)) + m)",
  "    n = struct.unpack('>H', s.recv(2))[0]",
  "    r = b''",
  "    while len(r) < n: r += s.recv(n - len(r))",
  "    return r[3] & 15, struct.unpack('>H', r[6:8])[0]",
  "for n in sys.argv[2:]: print(n, *q(n))",
].join("\n");

/** A TCP listener on every host address that says `who` and closes (a host service, the gateway). */
function hostListener(port: number, who: string): Promise<Server> {
  const srv = createServer((sock) => sock.end(`${who}\n`));
  return new Promise((resolve) => srv.listen(port, "0.0.0.0", () => resolve(srv)));
}

/**
 * Issue #6 from inside real units, against a fake internet the test creates (nothing leaves the
 * machine): resolver, allow sets, wildcard precedence, raw IPs, private ranges, the host, other
 * units, spoofing, live changes, presets, validation and checkpoints.
 */
describe("network policy", () => {
  let s: TestServer;
  let fi: FakeInternet;
  let token: string;
  let gatewayPort: number;
  let hostPort: number;
  const servers: Server[] = [];
  const sh = async (unit: string, script: string) => {
    const r = await execHttp(s.url, token, unit, ["sh", "-c", script]);
    assert.equal(r.status, 200, r.body.toString());
    return { code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() };
  };
  /** A lookup through the unit's resolver (node's c-ares resolver reads /etc/resolv.conf). */
  const lookup = async (unit: string, name: string, rr = "resolve4") => {
    const js = `require("dns").promises.${rr}(${JSON.stringify(name)}).then((a) => console.log(JSON.stringify(a)), (e) => console.log(JSON.stringify(e.code)))`;
    return JSON.parse((await sh(unit, `/.unit/bin/node -e '${js}'`)).out) as string[] | string;
  };
  /** curl exit code and body; a dropped connection fails after 1 s, a reset one at once. */
  const get = async (unit: string, url: string) => {
    const r = await sh(unit, `curl -sS --connect-timeout 1 -m 5 ${url}`);
    return { code: r.code, body: r.out };
  };
  const setPolicy = async (unit: string, rules: unknown[]) => {
    const r = await s.api("POST", `/v1/units/${unit}/policy/network`, { token, json: { rules } });
    assert.equal(r.status, 200, r.text);
    return r;
  };
  const unitId = async (name: string) => {
    const u = (await s.server.store.units.withStatus(["running", "warm", "cold"])).find((x) => x.name === name);
    assert.ok(u);
    return u.id;
  };
  const link = async (name: string) => {
    const l = s.server.runtime.link(await unitId(name));
    assert.ok(l, `${name} runs`);
    return l;
  };

  /** ums's names for a unit's host resources, from the host end of its link (`u<rid><slot36>`). */
  const hostNames = (hostIp: string) => {
    const dev =
      execFileSync("ip", ["-o", "-4", "addr", "show", "to", `${hostIp}/32`])
        .toString()
        .split(/\s+/)[1] ?? "";
    const m = /^u([0-9a-f]{4})([0-9a-z]+)$/.exec(dev);
    assert.ok(m, `host end of the link: ${dev}`);
    const [rid, slot] = [m[1] ?? "", Number.parseInt(m[2] ?? "", 36)];
    return { dev, rid, slot, ns: `ums${rid}-${slot}`, table: `ums_${rid}` };
  };

  before(async () => {
    if (!sqlite) throw new Error("no sqlite");
    fi = await startFakeInternet({ names: NAMES });
    hostPort = await freePort();
    servers.push(await hostListener(hostPort, "host service"));
    // The real connectors gateway, on an ephemeral port: the one host service units may reach.
    s = await startTestServer(sqlite, { dnsUpstream: fi.dnsUpstream });
    gatewayPort = s.server.gatewayPort;
    token = await s.token("net");
    for (const name of ["a", "b"])
      assert.equal((await s.api("POST", "/v1/units", { token, json: { name } })).status, 201);
  });
  after(async () => {
    await s?.close();
    await fi?.close();
    for (const srv of servers) srv.close();
  });

  it("is open by default: public names resolve and connect, the policy is readable and read-only", async () => {
    assert.deepEqual((await s.api("GET", "/v1/units/a/policy/network", { token })).body, { rules: [] });
    assert.deepEqual(await lookup("a", "example.com"), [fi.hosts["example.com"]]);
    assert.deepEqual(await get("a", "http://example.com/"), { code: 0, body: "hello from example.com\n" });
    assert.equal((await get("a", `http://${fi.hosts["evil.example"]}/`)).code, 0, "raw IPs are reachable when open");
    const l = await link("a");
    const files = await sh("a", "cat /etc/resolv.conf /.unit/policy/network.json; echo x > /.unit/policy/network.json");
    assert.match(files.out, new RegExp(`nameserver ${l.hostIp.replaceAll(".", "\\.")}\\n`));
    assert.match(files.out, /\{"rules":\[\]\}/);
    assert.notEqual(files.code, 0, "the policy file is read-only");
  });

  it("never reaches private ranges, the host's services, the API or another unit; the gateway is reachable", async () => {
    const la = await link("a");
    await sh(
      "b",
      'setsid -f /.unit/bin/node -e \'require("net").createServer((s) => s.end("b\\n")).listen(8000)\' >/dev/null 2>&1 </dev/null',
    );
    const lb = await link("b");
    // The host can reach b's port (it serves b's URL), so b really listens.
    const fromHost = () => {
      try {
        return execFileSync("curl", ["-s", "--http0.9", "-m", "1", `http://${lb.unitIp}:8000/`]).toString();
      } catch {
        return "";
      }
    };
    for (let i = 0; i < 50 && fromHost() !== "b\n"; i++) await new Promise((r) => setTimeout(r, 100));
    assert.equal(fromHost(), "b\n");
    const api = new URL(s.url).port;
    const targets = [
      `${la.hostIp}:${hostPort}`, // a host service on the unit's gateway address
      `${fi.hostLinkIp}:${hostPort}`, // the host's "public" address
      `${la.hostIp}:${api}`, // the ums API port
      `${lb.unitIp}:8000`, // another unit
      `${lb.hostIp}:${gatewayPort}`, // another unit's gateway address
      "169.254.169.254:80",
      "192.168.1.1:80",
      "172.16.0.1:80",
      "100.64.0.1:80",
    ];
    const script = targets
      .map((t) => `(curl -s --connect-timeout 1 http://${t}/ >/dev/null 2>&1; echo "${t} $?") &`)
      .join("\n");
    const out = (await sh("a", `${script}\nwait`)).out;
    for (const t of targets) {
      const code = new RegExp(`^${t.replaceAll(".", "\\.")} (\\d+)$`, "m").exec(out)?.[1];
      // 7: reset, 28: dropped (a listener that answers would give 0 or 1, HTTP/0.9).
      assert.ok(code === "7" || code === "28", `${t} must be unreachable: ${out}`);
    }
    assert.deepEqual(await lookup("a", "ums.internal"), [la.hostIp]);
    // The gateway answers this unit (an unknown gateway path is its 404; a caller it did not take
    // for a unit would get 401).
    const gw = await sh(
      "a",
      `curl -s -m 3 -o /dev/null -w '%{http_code}' http://ums.internal:${gatewayPort}/v1/gateway/`,
    );
    assert.equal(gw.out, "404");
    assert.equal(s.server.runtime.unitOfAddress(la.unitIp), await unitId("a"));
    assert.equal(s.server.runtime.unitOfAddress(`::ffff:${la.unitIp}`), await unitId("a"));
    assert.equal(s.server.runtime.unitOfAddress(la.hostIp), undefined);
    // b's rules go with it, and nothing else of the table.
    const nb = hostNames(lb.hostIp);
    const ruleset = () => execFileSync("nft", ["list", "table", "inet", nb.table]).toString();
    assert.match(ruleset(), new RegExp(`chain unit_${nb.slot} \\{`));
    assert.equal((await s.api("DELETE", "/v1/units/b", { token })).status, 204);
    const after = ruleset();
    for (const gone of [
      `chain unit_${nb.slot} {`,
      `set allow_${nb.slot} {`,
      `set dropped_${nb.slot} {`,
      `"${nb.dev}"`,
    ]) {
      assert.ok(!after.includes(gone), `${gone} must be gone:\n${after}`);
    }
    assert.match(after, new RegExp(`chain unit_${hostNames(la.hostIp).slot} \\{`), "a's rules stay");
  });

  it("enforces rules: allowed names resolve and connect, denied ones are REFUSED, raw IPs dropped", async () => {
    await (await fetch(`http://${fi.dnsIp}:8053/reset`)).text();
    await setPolicy("a", [
      { action: "allow", domain: "api.github.com" },
      { action: "allow", domain: "*.example.com" },
      { action: "deny", domain: "bad.example.com" },
    ]);
    assert.deepEqual(await lookup("a", "api.github.com"), [fi.hosts["api.github.com"]]);
    assert.deepEqual(await lookup("a", "www.example.com"), [fi.hosts["www.example.com"]]);
    assert.equal(await lookup("a", "bad.example.com"), "EREFUSED", "a deny inside an allowed wildcard");
    assert.equal(await lookup("a", "example.com"), "EREFUSED", "*.example.com does not cover example.com");
    assert.equal(await lookup("a", "evil.example"), "EREFUSED");
    assert.equal(await lookup("a", "api.github.com", "resolve6"), "ENODATA", "no IPv6 answers");
    // Over TCP too (RFC 7766): name, rcode, answer count.
    const tcp = await sh("a", `python3 -c "${TCP_QUERY}" ${(await link("a")).hostIp} api.github.com evil.example`);
    assert.equal(tcp.out, "api.github.com 0 1\nevil.example 5 0\n", tcp.err);
    assert.deepEqual(await get("a", "http://api.github.com/"), { code: 0, body: "hello from api.github.com\n" });
    assert.equal((await get("a", "http://www.example.com/")).body, "hello from www.example.com\n");
    // Addresses no allowed lookup produced: reset at once (curl 7), whether a name exists for them or not.
    assert.equal((await get("a", `http://${fi.hosts["evil.example"]}/`)).code, 7);
    assert.equal((await get("a", `http://${fi.rawIp}/`)).code, 7);
    assert.equal((await get("a", `http://${fi.dnsIp}:8053/`)).code, 7, "nor the upstream resolver directly");
    const asked = (await fi.seen()).queries.map((q) => q.name);
    for (const denied of ["bad.example.com", "example.com", "evil.example"]) {
      assert.ok(!asked.includes(denied), `${denied} must not reach the upstream: ${asked}`);
    }
    const log = (await s.api("GET", "/v1/units/a/policy/network/log?limit=50", { token })).body;
    assert.ok(log.denied_lookups >= 3, JSON.stringify(log));
    assert.ok(log.dropped_packets >= 3, JSON.stringify(log));
    const bad = log.decisions.find((d: { name: string }) => d.name === "bad.example.com");
    assert.deepEqual([bad.verdict, bad.rule], ["denied", "rule 2: deny bad.example.com"]);
    const ok = log.decisions.find((d: { name: string; verdict: string }) => d.name === "api.github.com");
    assert.deepEqual(ok.addresses, [fi.hosts["api.github.com"]]);
    assert.ok(Date.parse(ok.time) > 0);
    const drop = (ip: string | undefined) => log.dropped.find((d: { address: string }) => d.address === ip);
    for (const ip of [fi.hosts["evil.example"], fi.rawIp]) {
      assert.ok(drop(ip)?.packets >= 1, `${ip} in ${JSON.stringify(log.dropped)}`);
      assert.ok(Math.abs(Date.parse(drop(ip).last_time) - Date.now()) < 60_000);
    }
    assert.equal((await s.api("GET", "/v1/units/a/policy/network/log?limit=0", { token })).status, 400);
  });

  it("a lone * allows everything and a later equal rule wins", async () => {
    await setPolicy("a", [{ action: "allow", domain: "*" }]);
    assert.equal((await get("a", "http://example.com/")).code, 0);
    await setPolicy("a", [
      { action: "allow", domain: "*" },
      { action: "deny", domain: "*" },
      { action: "allow", domain: "evil.example" },
    ]);
    assert.equal(await lookup("a", "example.com"), "EREFUSED");
    assert.equal((await get("a", "http://evil.example/")).code, 0);
  });

  it("a policy change applies at once and cuts open connections to addresses no longer allowed", async () => {
    await setPolicy("a", [{ action: "allow", domain: "*.example.com" }]);
    const stream = sh("a", "curl -sSN -m 30 http://www.example.com/stream >/dev/null; echo rc=$?");
    for (let i = 0; i < 100 && (await fi.seen()).streams === 0; i++) await new Promise((r) => setTimeout(r, 50));
    assert.equal((await fi.seen()).streams, 1, "the stream is open");
    const changed = Date.now();
    await setPolicy("a", [{ action: "allow", domain: "api.github.com" }]);
    const result = await stream;
    assert.match(result.out, /rc=(56|18|7)/, `curl must fail on the cut: ${JSON.stringify(result)}`);
    assert.ok(Date.now() - changed < 5000, "cut within seconds, not at curl's timeout");
    assert.equal(await lookup("a", "www.example.com"), "EREFUSED");
    const log = (await s.api("GET", "/v1/units/a/policy/network/log", { token })).body;
    const cut = log.dropped.find((d: { address: string }) => d.address === fi.hosts["www.example.com"]);
    assert.deepEqual(cut?.names, ["www.example.com"], "the log names what the dropped address was");
    // Back to allowed: the name's addresses are allowed again at once, from what was seen before.
    await setPolicy("a", [{ action: "allow", domain: "*.example.com" }]);
    assert.equal((await get("a", `http://${fi.hosts["www.example.com"]}/`)).code, 0);
  });

  it("presets: defaults covers GitHub and npm; unknown presets, bad patterns and actions are 400s naming the rule", async () => {
    const body = { rules: [{ include: "defaults" }, { action: "deny", domain: "registry.npmjs.org" }] };
    assert.deepEqual((await setPolicy("a", body.rules)).body, body);
    assert.deepEqual((await s.api("GET", "/v1/units/a/policy/network", { token })).body, body);
    assert.deepEqual(await lookup("a", "api.github.com"), [fi.hosts["api.github.com"]]);
    assert.equal(await lookup("a", "registry.npmjs.org"), "EREFUSED");
    assert.equal(await lookup("a", "example.com"), "EREFUSED");
    assert.equal(
      (await sh("a", "cat /.unit/policy/network.json")).out,
      `${JSON.stringify(body)}\n`,
      "the unit sees the new policy",
    );
    for (const [rules, message] of [
      [[{ include: "nope" }], /rules\[0\].*unknown preset 'nope'/],
      [[{ action: "allow", domain: "a.*.example" }], /rules\[0\].*wildcard/],
      [
        [
          { action: "allow", domain: "x.example" },
          { action: "block", domain: "x.example" },
        ],
        /rules\[1\].*action must be/,
      ],
    ] as const) {
      const r = await s.api("POST", "/v1/units/a/policy/network", { token, json: { rules } });
      assert.equal(r.status, 400, r.text);
      assert.equal(r.body.code, "UMS_NETWORK_POLICY_INVALID");
      assert.match(r.body.errors[0], message);
    }
    const extra = await s.api("POST", "/v1/units/a/policy/network", {
      token,
      json: { rules: [{ domain: "x", port: 1 }] },
    });
    assert.equal(extra.status, 400);
    assert.equal(extra.body.code, "UMS_VALIDATION");
    assert.equal((await s.api("POST", "/v1/units/a/policy/network", { token, json: {} })).status, 400);
    assert.deepEqual((await s.api("GET", "/v1/units/a/policy/network", { token })).body, body, "nothing half-applied");
    assert.equal((await s.api("GET", "/v1/units/nope/policy/network", { token })).status, 404);
  });

  it("drops packets with a spoofed source address", async () => {
    await setPolicy("a", []);
    const l = await link("a");
    const { rid, ns } = hostNames(l.hostIp);
    const spoofed = () =>
      Number(
        /packets (\d+)/.exec(execFileSync("nft", ["list", "counter", "inet", `ums_${rid}`, "spoofed"]).toString())?.[1],
      );
    // As root on the host inside a's (host-owned) namespace: more than the unit itself may do.
    const curl = (from: string) => {
      try {
        execFileSync("ip", [
          "netns",
          "exec",
          ns,
          "curl",
          "-s",
          "--connect-timeout",
          "1",
          "--interface",
          from,
          `http://${fi.rawIp}/`,
        ]);
        return 0;
      } catch (err) {
        return (err as { status: number }).status;
      }
    };
    assert.equal(curl(l.unitIp), 0, "its own address goes out");
    const other = l.unitIp.replace(/\.\d+$/, ".250");
    execFileSync("ip", ["-n", ns, "addr", "add", `${other}/32`, "dev", "eth0"]);
    execFileSync("ip", ["-n", ns, "addr", "add", "203.0.113.250/32", "dev", "eth0"]);
    const before = spoofed();
    assert.notEqual(curl(other), 0, "another unit-subnet address is dropped");
    assert.notEqual(curl("203.0.113.250"), 0, "a public address is dropped");
    assert.ok(spoofed() >= before + 2, "counted as spoofed");
    assert.equal(s.server.runtime.unitOfAddress(other), undefined);
  });

  // Issue #16: a boot makes a unit's link while the unit starts (runtime/runc/boot.ts), and the
  // unit's processes may run by then (the agent's libraries are the unit's). Until the nft
  // transaction that adds the interface to the firewall's sets and map with its chain, nothing may
  // cross: here that moment is made again on a running unit by taking its interface out of them.
  it("a unit's link carries nothing before its firewall rules are in (a boot links a unit while it starts)", async () => {
    assert.equal((await s.api("POST", "/v1/units", { token, json: { name: "early" } })).status, 201);
    await setPolicy("early", []);
    assert.equal((await sh("early", "true")).code, 0);
    const l = await link("early");
    const { dev, table } = hostNames(l.hostIp);
    // From inside the unit, as its processes would.
    const connects = async (target: string) => {
      const { out } = await sh("early", `curl -s --connect-timeout 1 -m 2 -o /dev/null ${target}; echo $?`);
      // 7 (refused) or 28 (dropped): nothing answered; 0 or an HTTP-level failure: something did.
      return !["7", "28"].includes(out.trim());
    };
    assert.equal(await connects(`http://${fi.rawIp}/`), true, "before: the fake internet");
    assert.equal(
      await connects(`http://${l.hostIp}:${gatewayPort}/v1/gateway/`),
      true,
      "before: the connectors gateway",
    );
    for (const element of [
      `egress { "${dev}" }`,
      `sources { "${dev}" . ${l.unitIp} }`,
      `gateways { "${dev}" . ${l.hostIp} }`,
    ])
      execFileSync("nft", ["delete", "element", "inet", table, ...element.split(" ")]);
    assert.equal(await connects(`http://${fi.rawIp}/`), false, "the fake internet");
    assert.equal(
      await connects(`http://${l.hostIp}:${gatewayPort}/v1/gateway/`),
      false,
      "the connectors gateway on the host",
    );
    assert.equal((await s.api("DELETE", "/v1/units/early", { token })).status, 204);
  });

  it("is part of a checkpoint: a restore brings the policy back and enforces it", async () => {
    const kept = [{ action: "allow", domain: "api.github.com" }];
    await setPolicy("a", kept);
    const cp = await s.api("POST", "/v1/units/a/checkpoint", { token, json: { comment: "kept policy" } });
    const id = /checkpoint (v\d+) created/.exec(cp.text)?.[1];
    assert.ok(id, cp.text);
    await setPolicy("a", []);
    assert.deepEqual(await lookup("a", "example.com"), [fi.hosts["example.com"]]);
    const r = await s.api("POST", `/v1/units/a/checkpoints/${id}/restore`, { token });
    assert.match(r.text, /"complete"/);
    assert.deepEqual((await s.api("GET", "/v1/units/a/policy/network", { token })).body, { rules: kept });
    assert.equal(await lookup("a", "example.com"), "EREFUSED");
    assert.equal((await get("a", "http://api.github.com/")).code, 0);
    assert.equal((await sh("a", "cat /.unit/policy/network.json")).out, `${JSON.stringify({ rules: kept })}\n`);
  });

  it("a restore keeps the unit's link but none of the addresses its policy allowed before", async () => {
    const github = fi.hosts["api.github.com"];
    await setPolicy("a", [{ action: "allow", domain: "example.com" }]);
    const cp = await s.api("POST", "/v1/units/a/checkpoint", { token, json: { comment: "example.com only" } });
    const id = /checkpoint (v\d+) created/.exec(cp.text)?.[1];
    assert.ok(id, cp.text);
    await setPolicy("a", [{ action: "allow", domain: "api.github.com" }]);
    // The lookup puts github's address in the unit's allow set.
    assert.deepEqual(await lookup("a", "api.github.com"), [github]);
    assert.equal((await get("a", `http://${github}/`)).code, 0);
    const before = await link("a");
    const r = await s.api("POST", `/v1/units/a/checkpoints/${id}/restore`, { token });
    assert.match(r.text, /"complete"/);
    assert.deepEqual(await link("a"), before, "the restore kept the unit's link");
    assert.notEqual((await get("a", `http://${github}/`)).code, 0, "github's address, allowed only before the restore");
    assert.equal((await get("a", "http://example.com/")).code, 0);
  });

  it("a restore that fails after its stop leaves no link of the unit behind", async () => {
    assert.equal((await s.api("POST", "/v1/units", { token, json: { name: "restore-fails" } })).status, 201);
    await sh("restore-fails", "true");
    const cp = await s.api("POST", "/v1/units/restore-fails/checkpoint", { token, json: {} });
    const id = /checkpoint (v\d+) created/.exec(cp.text)?.[1];
    assert.ok(id, cp.text);
    const { dev, ns } = hostNames((await link("restore-fails")).hostIp);
    // What a crash in the middle of an earlier restore leaves (runtime/runc/restore.ts): this one
    // refuses it once the unit is stopped, at the swap of its files.
    const disk = join((await testImage()).pool.path, "units", await unitId("restore-fails"));
    mkdirSync(join(disk, "rootfs.old"));
    writeFileSync(join(disk, "restore.json"), JSON.stringify({ checkpoint: id, phase: "replacing" }));
    try {
      const r = await s.api("POST", `/v1/units/restore-fails/checkpoints/${id}/restore`, { token });
      assert.doesNotMatch(r.text, /"complete"/);
      assert.match(r.text, /"type":"error"/);
      assert.equal(s.server.runtime.link(await unitId("restore-fails")), undefined);
      assert.throws(() => execFileSync("ip", ["link", "show", dev], { stdio: "ignore" }), `${dev} is gone`);
      assert.equal(existsSync(`/run/netns/${ns}`), false, `${ns} is gone`);
    } finally {
      rmSync(join(disk, "rootfs.old"), { recursive: true, force: true });
      rmSync(join(disk, "restore.json"), { force: true });
    }
    assert.equal((await sh("restore-fails", "echo up")).out, "up\n");
    assert.equal((await s.api("DELETE", "/v1/units/restore-fails", { token })).status, 204);
  });
});
