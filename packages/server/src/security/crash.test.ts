// Issue #19 finding 6: any token holder crashed `ums serve` with one request (an empty `cmd`, an
// attach to a session that does not exist): the agent answered the websocket upgrade with an HTTP
// error, the server's agent client aborted the half-open websocket, whose 'error' had no listener.
// Issue #11: a unit that stopped while its resolver waited on a slow upstream crashed it too.
// Each trigger goes to a real `ums serve` process; afterwards it must still run, answer, exec, and
// its log must show no fault caught by the last-resort handler (faults.ts): that handler keeps the
// process alive, so only the log tells a handled error from a crash that was merely survived.
import assert from "node:assert/strict";
import { createSocket, type Socket as UdpSocket } from "node:dgram";
import { after, before, beforeEach, describe, it } from "node:test";
import { decodeQuery, encodeResponse } from "../testing/dns-reply.js";
import { execHttp } from "../testing/exec-client.js";
import { cleanupStoppedServer } from "../testing/host-cleanup.js";
import { prepareServe, type ServeProcess } from "../testing/serve-process.js";
import { upgradeAnswer } from "../testing/ws-upgrade.js";

/** How long the fake upstream sits on a `slow.` name: under the resolver's upstream timeout (2 s). */
const SLOW_MS = 1500;

/**
 * A DNS server on loopback for the units' lookups (`--dns-upstream`): names under `slow.` are
 * answered after SLOW_MS, every other one at once with NXDOMAIN. Nothing leaves the machine.
 */
async function slowUpstream(): Promise<{ address: string; slowQueries: () => number; close: () => void }> {
  const udp: UdpSocket = createSocket("udp4");
  let slow = 0;
  const timers = new Set<NodeJS.Timeout>();
  udp.on("message", (msg, rinfo) => {
    const q = decodeQuery(msg);
    if (!q) return;
    const name = q.questions?.[0]?.name ?? "";
    const isSlow = name.startsWith("slow.");
    if (isSlow) slow++;
    const answer = encodeResponse(
      q,
      q.questions ?? [],
      isSlow ? [{ type: "A", name, ttl: 30, data: "203.0.113.9" }] : [],
      isSlow ? 0 : 3, // rcode 3: NXDOMAIN
    );
    const timer = setTimeout(
      () => {
        timers.delete(timer);
        udp.send(answer, rinfo.port, rinfo.address, () => {});
      },
      isSlow ? SLOW_MS : 0,
    );
    timers.add(timer);
  });
  await new Promise<void>((r) => udp.bind(0, "127.0.0.1", r));
  return {
    address: `127.0.0.1:${udp.address().port}`,
    slowQueries: () => slow,
    close: () => {
      for (const t of timers) clearTimeout(t);
      udp.close();
    },
  };
}

/** A UDP query for `name` to the unit's resolver, sent by python3 in the unit, which exits at once. */
const SEND_QUERY = [
  "import socket, struct, sys",
  "m = struct.pack('>HHHHHH', 0x4242, 0x0100, 1, 0, 0, 0)",
  "m += b''.join(bytes([len(l)]) + l.encode() for l in sys.argv[1].split('.')) + bytes(1) + struct.pack('>HH', 1, 1)",
  "ns = [l.split()[1] for l in open('/etc/resolv.conf') if l.startswith('nameserver')][0]",
  "socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(m, (ns, 53))",
].join("\n");

describe("no request crashes ums serve (issue #19 finding 6, issue #11)", () => {
  let base: string;
  let token: string;
  let server: ServeProcess;
  let log = "";
  /** Where the current test's part of the log begins. */
  let logFrom = 0;
  let upstream: Awaited<ReturnType<typeof slowUpstream>> | undefined;

  /** Starts `ums serve` (again, when a trigger killed it: each trigger is judged on its own). */
  async function serve(): Promise<void> {
    log = "";
    const child = await server.start();
    child.stderr?.on("data", (d) => {
      log += d;
    });
  }

  before(async () => {
    upstream = await slowUpstream();
    server = await prepareServe({
      name: "crash-req",
      org: "crash-req",
      env: { UMS_DNS_UPSTREAM: upstream.address, UMS_IDLE_WARM: "10m" },
    });
    ({ base, token } = server);
    await serve();
    assert.equal((await server.api("POST", "/v1/units", { name: "victim" })).status, 201);
    assert.equal((await execHttp(base, token, "victim", ["true"])).exitCode, 0);
  });

  beforeEach(async () => {
    logFrom = log.length;
    const answers = await fetch(`${base}/healthz`).then(
      (r) => r.ok,
      () => false,
    );
    if (answers && server.running()) return;
    await server.stop("SIGKILL");
    await serve();
    logFrom = 0;
  });

  after(async () => {
    await server?.close([], (dataDir) => cleanupStoppedServer(dataDir));
    upstream?.close();
  });

  /** The server still runs, answers, and runs a command; nothing reached the last-resort handler. */
  async function assertServing(after: string): Promise<void> {
    await new Promise((r) => setTimeout(r, 200)); // a crash is asynchronous: give it its chance
    assert.ok(server.running(), `ums serve exited after ${after}: ${log}`);
    assert.equal((await fetch(`${base}/healthz`)).status, 200, `healthz after ${after}`);
    const r = await execHttp(base, token, "victim", ["echo", "still here"]);
    assert.equal(r.stdout.toString(), "still here\n", `exec after ${after}`);
    assert.doesNotMatch(log.slice(logFrom), /last-resort/, `a fault reached the last-resort handler after ${after}`);
  }

  it("an HTTP exec with an empty cmd answers 400 saying what to fix", async () => {
    const res = await fetch(`${base}/v1/units/victim/exec?cmd=`, {
      method: "POST",
      headers: { authorization: `Bearer ${token}` },
    });
    const body = (await res.json()) as { errors?: string[]; code?: string };
    assert.equal(res.status, 400, JSON.stringify(body));
    assert.equal(body.code, "UMS_VALIDATION");
    assert.match(body.errors?.join("; ") ?? "", /cmd.*(empty|program|command)/i);
    await assertServing("POST exec?cmd=");
  });

  it("a websocket exec with an empty cmd is refused with 400", async () => {
    const ws = `${base.replace("http", "ws")}/v1/units/victim/exec?cmd=&cmd=x`;
    const r = await upgradeAnswer(ws, token);
    assert.equal(r.status, 400, r.body);
    assert.match(r.body, /cmd/);
    await assertServing("a websocket exec with cmd=");
  });

  it("attaching to an exec session that does not exist answers 404", async () => {
    const r = await upgradeAnswer(`${base.replace("http", "ws")}/v1/units/victim/exec/987654`, token);
    assert.equal(r.status, 404, r.body);
    assert.match(r.body, /UMS_SESSION_NOT_FOUND/);
    await assertServing("an attach to session 987654");
  });

  it("a unit stopped while its resolver waits on a slow upstream leaves it serving (issue #11)", async () => {
    const api = server.api;
    assert.equal((await api("POST", "/v1/units", { name: "resolving" })).status, 201);
    const before = upstream?.slowQueries() ?? 0;
    const sent = await execHttp(base, token, "resolving", ["python3", "-c", SEND_QUERY, "slow.example.com"]);
    assert.equal(sent.exitCode, 0, sent.stderr.toString());
    for (let i = 0; i < 200 && (upstream?.slowQueries() ?? 0) === before; i++) {
      await new Promise((r) => setTimeout(r, 10));
    }
    assert.ok((upstream?.slowQueries() ?? 0) > before, "the query reached the slow upstream");
    // The unit goes (its resolver's socket closes first) while the upstream sits on the answer.
    const started = Date.now();
    assert.equal((await api("DELETE", "/v1/units/resolving")).status, 204);
    await new Promise((r) => setTimeout(r, Math.max(0, SLOW_MS + 500 - (Date.now() - started))));
    await assertServing("a unit stopped while its lookup was pending");
  });

  it("a burst of every trigger at once leaves it serving", async () => {
    const ws = base.replace("http", "ws");
    const triggers = Array.from({ length: 8 }, (_, i) => [
      fetch(`${base}/v1/units/victim/exec?cmd=`, { method: "POST", headers: { authorization: `Bearer ${token}` } }),
      upgradeAnswer(`${ws}/v1/units/victim/exec?cmd=`, token),
      upgradeAnswer(`${ws}/v1/units/victim/exec/${900_000 + i}`, token),
    ]).flat();
    const results = await Promise.allSettled(triggers);
    for (const r of results) assert.equal(r.status, "fulfilled", String((r as PromiseRejectedResult).reason));
    await assertServing("a burst of triggers");
  });
});
