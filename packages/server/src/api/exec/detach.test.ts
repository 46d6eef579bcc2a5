import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import WebSocket from "ws";
import { startWithUnit, type TestServer } from "../../testing/server.js";

interface Client {
  ws: WebSocket;
  text: () => string;
  messages: { type: string; [k: string]: unknown }[];
  closed: Promise<number>;
  waitFor: (pred: () => boolean, ms?: number) => Promise<void>;
}

interface Listed {
  id: number;
  is_active: boolean;
  tty: boolean;
}

/**
 * A TTY exec session outlives its websocket (spec 4.3, 2.8: `max_run_after_disconnect`, a TTY's
 * default being until it exits): it stays listed, a websocket to /exec/{id} replays its recent output
 * and then streams live, resize works after the attach, a kill ends it; in the forms the public
 * Sprites clients send too (`detachable`, an attach's ignored `cmd`, the Go client's `?id=`).
 */
describe("TTY exec sessions that outlive their websocket", () => {
  let s: TestServer;
  let token: string;
  const open = (path: string) =>
    new Promise<Client>((resolve, reject) => {
      const ws = new WebSocket(`${s.url.replace("http", "ws")}${path}`, {
        headers: { authorization: `Bearer ${token}` },
      });
      const out: Buffer[] = [];
      const messages: Client["messages"] = [];
      ws.on("message", (data, isBinary) => {
        if (isBinary) out.push(data as Buffer);
        else messages.push(JSON.parse(String(data)));
      });
      const closed = new Promise<number>((r) => ws.on("close", (code) => r(code)));
      const text = () => Buffer.concat(out).toString("latin1");
      const waitFor = async (pred: () => boolean, ms = 15_000) => {
        const deadline = Date.now() + ms;
        while (!pred()) {
          if (Date.now() > deadline) throw new Error(`timed out; output so far: ${JSON.stringify(text())}`);
          await new Promise((r) => setTimeout(r, 20));
        }
      };
      ws.once("open", () => resolve({ ws, text, messages, closed, waitFor }));
      ws.once("error", reject);
    });
  const q = (cmd: string[], extra: Record<string, string> = {}) => {
    const p = new URLSearchParams(extra);
    for (const c of cmd) p.append("cmd", c);
    return p.toString();
  };
  /** The session list of either prefix (under /v1/sprites it may be wrapped as {"sessions": [...]}). */
  const list = async (prefix = "/v1/units"): Promise<Listed[]> => {
    const r = await s.api("GET", `${prefix}/term/exec`, { token });
    assert.equal(r.status, 200, r.text);
    return Array.isArray(r.body) ? r.body : r.body.sessions;
  };
  const sessionId = async (c: Client) => {
    await c.waitFor(() => c.messages.some((m) => m.type === "session_info"));
    return c.messages.find((m) => m.type === "session_info")?.session_id as number;
  };
  const disconnect = async (c: Client) => {
    c.ws.close();
    await c.closed;
  };

  before(async () => {
    ({ s, token } = await startWithUnit("detach", "term"));
  });
  after(() => s?.close());

  it("keeps a TTY session after its websocket closes; an attach replays, streams live, resizes; kill ends it", async () => {
    const first = await open(`/v1/units/term/exec?${q(["bash"], { tty: "true", stdin: "true" })}`);
    const id = await sessionId(first);
    first.ws.send("echo mark-$((6*7))\r");
    await first.waitFor(() => first.text().includes("mark-42"));
    await disconnect(first);
    await new Promise((r) => setTimeout(r, 500));
    const listed = (await list()).find((x) => x.id === id);
    assert.ok(listed, "the detached session is listed");
    assert.equal(listed.is_active, true);
    assert.equal(listed.tty, true);
    assert.ok(
      (await list("/v1/sprites")).some((x) => x.id === id),
      "and under /v1/sprites",
    );

    const again = await open(`/v1/units/term/exec/${id}`);
    await again.waitFor(() => again.text().includes("mark-42"));
    const info = again.messages.find((m) => m.type === "session_info");
    assert.equal(info?.is_owner, false);
    assert.equal(info?.tty, true);
    again.ws.send("echo live-$((7*7))\r");
    await again.waitFor(() => again.text().includes("live-49"));
    again.ws.send(JSON.stringify({ type: "resize", cols: 132, rows: 50 }));
    await new Promise((r) => setTimeout(r, 200));
    again.ws.send("stty size\r");
    await again.waitFor(() => again.text().includes("50 132"));
    await disconnect(again);
    assert.ok((await list()).some((x) => x.id === id && x.is_active));

    const kill = await s.api("POST", `/v1/units/term/exec/${id}/kill?signal=SIGKILL&timeout=5`, { token });
    assert.equal(kill.status, 200);
    assert.equal(JSON.parse(kill.text.trim().split("\n").at(-1) ?? "{}").type, "complete", kill.text);
    assert.ok(!(await list()).some((x) => x.id === id), "a killed session leaves the list");
    const gone = await open(`/v1/units/term/exec/${id}`).catch((err: Error) => err);
    assert.ok(gone instanceof Error && /404/.test(gone.message), String(gone));
  });

  it("serves the Sprites clients' forms: detachable, an attach with a cmd, the Go client's ?id=", async () => {
    // What @fly/sprites createSession() sends.
    const made = await open(
      `/v1/sprites/term/exec?${q(["bash"], { path: "bash", stdin: "true", tty: "true", cols: "80", rows: "24", detachable: "true" })}`,
    );
    const id = await sessionId(made);
    made.ws.send("echo js-$((5*5))\r");
    await made.waitFor(() => made.text().includes("js-25"));
    await disconnect(made);
    // attachSession(): `tmux attach -t <id>` as the command, which the server ignores.
    const js = await open(`/v1/sprites/term/exec/${id}?${q(["tmux", "attach", "-t", String(id)], { stdin: "true" })}`);
    await js.waitFor(() => js.text().includes("js-25"));
    await disconnect(js);
    const go = await open(`/v1/sprites/term/exec?id=${id}&stdin=true`);
    await go.waitFor(() => go.text().includes("js-25"));
    go.ws.send("exit\r");
    assert.equal(await go.closed, 1000);
    assert.ok(!(await list()).some((x) => x.id === id), "a session that exited with a client attached leaves the list");
    const bad = await open("/v1/sprites/term/exec?id=x1").catch((err: Error) => err);
    assert.ok(bad instanceof Error && /400/.test(bad.message), String(bad));
  });

  it("ends a non-TTY session with its websocket (unchanged default), and every session when the unit stops", async () => {
    const pipes = await open(`/v1/units/term/exec?${q(["sleep", "1000"])}`);
    const pid = await sessionId(pipes);
    const tty = await open(`/v1/units/term/exec?${q(["sleep", "1001"], { tty: "true" })}`);
    const tid = await sessionId(tty);
    await disconnect(pipes);
    await disconnect(tty);
    const deadline = Date.now() + 10_000;
    while ((await list()).some((x) => x.id === pid) && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 100));
    const now = await list();
    assert.ok(!now.some((x) => x.id === pid), "the non-TTY session ended with its client");
    assert.ok(
      now.some((x) => x.id === tid && x.is_active),
      "the TTY one runs on",
    );

    const org = await s.server.store.orgs.getBySlug("detach");
    const unit = await s.server.store.units.get(org?.id ?? "", "term");
    assert.ok(unit);
    await s.server.runtime.stop(unit.id);
    s.server.lifecycle.suspect(unit.id);
    assert.deepEqual(await list(), [], "a stopped unit has no sessions");
  });
});
