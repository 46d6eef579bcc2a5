import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import WebSocket from "ws";
import { startWithUnit, type TestServer } from "../../testing/server.js";

interface Collected {
  ws: WebSocket;
  text: () => string;
  messages: unknown[];
  closed: Promise<{ code: number }>;
  waitFor: (pred: () => boolean, ms?: number) => Promise<void>;
}

function collect(ws: WebSocket): Collected {
  const out: Buffer[] = [];
  const messages: unknown[] = [];
  ws.on("message", (data, isBinary) => {
    if (isBinary) out.push(data as Buffer);
    else messages.push(JSON.parse(String(data)));
  });
  const closed = new Promise<{ code: number }>((resolve) => ws.on("close", (code) => resolve({ code })));
  const text = () => Buffer.concat(out).toString("latin1");
  const waitFor = async (pred: () => boolean, ms = 10_000) => {
    const deadline = Date.now() + ms;
    while (!pred()) {
      if (Date.now() > deadline) throw new Error(`timed out; output so far: ${JSON.stringify(text())}`);
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  return { ws, text, messages, closed, waitFor };
}

/** docs/ARCHITECTURE.md section 10: websocket exec, TTY and not, kill, re-attach, port notifications. */
describe("exec over websockets", () => {
  let s: TestServer;
  let token: string;
  const open = (path: string) =>
    new Promise<Collected>((resolve, reject) => {
      const ws = new WebSocket(`${s.url.replace("http", "ws")}${path}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      const c = collect(ws);
      ws.once("open", () => resolve(c));
      ws.once("error", reject);
    });
  const q = (cmd: string[], extra: Record<string, string> = {}) => {
    const p = new URLSearchParams(extra);
    for (const c of cmd) p.append("cmd", c);
    return p.toString();
  };

  before(async () => {
    ({ s, token } = await startWithUnit("ws", "term"));
  });
  after(() => s?.close());

  it("runs a non-TTY session with stream-id frames, stdin and EOF", async () => {
    const c = await open(`/v1/units/term/exec?${q(["sh", "-c", "cat; echo done >&2; exit 5"], { stdin: "true" })}`);
    const frames: Buffer[] = [];
    c.ws.on("message", (d, bin) => bin && frames.push(d as Buffer));
    c.ws.send(Buffer.concat([Buffer.from([0]), Buffer.from("abc")]));
    c.ws.send(Buffer.from([4]));
    await c.closed;
    const info = c.messages.find((m) => (m as { type: string }).type === "session_info") as Record<string, unknown>;
    assert.equal(typeof info.session_id, "number");
    assert.equal(info.tty, false);
    assert.deepEqual(
      frames.filter((f) => f[0] === 1).map((f) => f.subarray(1).toString()),
      ["abc"],
    );
    assert.equal(Buffer.concat(frames.filter((f) => f[0] === 2).map((f) => f.subarray(1))).toString(), "done\n");
    assert.deepEqual([...(frames.at(-1) ?? [])], [3, 5]);
  });

  it("gives a TTY a real terminal whose size follows resize", async () => {
    const c = await open(`/v1/units/term/exec?${q(["bash"], { tty: "true", cols: "100", rows: "30", stdin: "true" })}`);
    c.ws.send("stty size\r");
    await c.waitFor(() => c.text().includes("30 100"));
    c.ws.send(JSON.stringify({ type: "resize", cols: 120, rows: 40 }));
    await new Promise((r) => setTimeout(r, 100));
    c.ws.send("stty size\r");
    await c.waitFor(() => c.text().includes("40 120"));
    c.ws.send("exit 3\r");
    const { code } = await c.closed;
    assert.equal(code, 4003, "a TTY session's close code carries a non-zero exit");
    assert.ok(c.messages.some((m) => JSON.stringify(m) === JSON.stringify({ type: "exit", exit_code: 3 })));
  });

  it("delivers Ctrl-C to the foreground process of a TTY", async () => {
    const c = await open(`/v1/units/term/exec?${q(["bash"], { tty: "true", stdin: "true" })}`);
    // The Ctrl-C must reach a running `sleep`, not a shell still reading its line (a loaded host is slow).
    c.ws.send("echo sleep-$((6*7)); sleep 100\r");
    await c.waitFor(() => c.text().includes("sleep-42"));
    await new Promise((r) => setTimeout(r, 300));
    c.ws.send(Buffer.from([3]));
    await c.waitFor(() => c.text().includes("^C"));
    c.ws.send("echo after-$?\r");
    await c.waitFor(() => c.text().includes("after-130"), 3000);
    c.ws.send("exit\r");
    assert.equal((await c.closed).code, 1000);
  });

  it("lists sessions and kills one, streaming the 6.3 events", async () => {
    const c = await open(
      `/v1/units/term/exec?${q(["sh", "-c", "trap '' TERM; echo trapped; while true; do sleep 0.1; done"], { max_run_after_disconnect: "30s" })}`,
    );
    // The TERM is sent once the shell ignores it (else it may exit before the timeout under load).
    await c.waitFor(() => c.messages.length > 0 && c.text().includes("trapped"), 30_000);
    const id = (c.messages[0] as { session_id: number }).session_id;
    const list = await s.api("GET", "/v1/units/term/exec", { token });
    assert.equal(list.status, 200);
    const mine = list.body.find((x: { id: number }) => x.id === id);
    assert.ok(mine, JSON.stringify(list.body));
    assert.equal(mine.is_active, true);
    assert.equal(mine.tty, false);
    assert.equal(typeof mine.bytes_per_second, "number");
    const kill = await s.api("POST", `/v1/units/term/exec/${id}/kill?signal=TERM&timeout=1`, { token });
    assert.equal(kill.status, 200);
    assert.match(kill.headers.get("content-type") ?? "", /ndjson/);
    const events = kill.text
      .trim()
      .split("\n")
      .map((l) => JSON.parse(l));
    assert.deepEqual(
      events.map((e) => e.type),
      ["signal", "timeout", "killed", "complete"],
    );
    assert.equal(events[0].signal, "SIGTERM");
    assert.equal(typeof events[0].pid, "number");
    assert.equal(events.at(-1).exit_code, 137);
    const missing = await s.api("POST", "/v1/units/term/exec/99999/kill", { token });
    assert.equal(missing.status, 404);
  });

  it("re-attaches to a session that outlived its client and replays its output", async () => {
    const first = await open(
      `/v1/units/term/exec?${q(["sh", "-c", "echo before; sleep 1.5; echo after"], { max_run_after_disconnect: "20s" })}`,
    );
    await first.waitFor(() => first.text().includes("before"));
    const id = (first.messages[0] as { session_id: number }).session_id;
    first.ws.close();
    await first.closed;
    const again = await open(`/v1/units/term/exec/${id}`);
    await again.waitFor(() => again.text().includes("after"));
    assert.ok(again.text().includes("before"), "earlier output is replayed");
    const info = again.messages.find((m) => (m as { type: string }).type === "session_info") as { is_owner: boolean };
    assert.equal(info.is_owner, false);
    await again.closed;
  });

  it("tells the client when a port opens and closes in the unit", async () => {
    const c = await open(
      `/v1/units/term/exec?${q(["sh", "-c", "sleep 1; timeout 3 python3 -m http.server 8765 >/dev/null 2>&1; sleep 2"])}`,
    );
    await c.waitFor(() => c.messages.some((m) => (m as { type: string }).type === "port_opened"), 15_000);
    const opened = c.messages.find((m) => (m as { type: string }).type === "port_opened") as Record<string, unknown>;
    assert.equal(opened.port, 8765);
    assert.equal(typeof opened.pid, "number");
    await c.waitFor(() => c.messages.some((m) => (m as { type: string }).type === "port_closed"), 15_000);
    await c.closed;
  });

  it("refuses a websocket to an unknown unit before upgrading", async () => {
    await assert.rejects(open(`/v1/units/nope/exec?${q(["true"])}`), /404/);
  });
});
