// Session list (spec 2.8), kill stream (spec 4.3, 6.3), re-attach and the end of sessions without clients
// (max_run_after_disconnect), against the real bundled agent.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import type { ExecSession } from "@ums/protocol";
import {
  ExecClient,
  eventually,
  httpJson,
  httpText,
  query,
  type RunningAgent,
  sleep,
  startAgent,
  upgradeRejection,
} from "../testing/harness.js";

async function list(agent: RunningAgent): Promise<ExecSession[]> {
  const r = await httpJson(agent, "GET", "/exec");
  assert.equal(r.status, 200);
  return r.body as ExecSession[];
}

async function find(agent: RunningAgent, id: unknown): Promise<ExecSession | undefined> {
  return (await list(agent)).find((s) => s.id === id);
}

async function kill(agent: RunningAgent, id: unknown, q: string) {
  const chunks: { at: number; text: string }[] = [];
  const r = await httpText(agent, "POST", `/exec/${id}/kill?${q}`, {}, (text) => chunks.push({ at: Date.now(), text }));
  const events = r.text
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { status: r.status, contentType: r.headers["content-type"], events, chunks };
}

describe("agent exec sessions", () => {
  let agent: RunningAgent;
  before(async () => {
    agent = await startAgent();
  });
  after(async () => {
    await agent?.stop();
  });

  test("the session list has the spec fields and a real bytes_per_second", async () => {
    const c = await ExecClient.open(
      agent,
      `/exec?${query({ cmd: ["sh", "-c", "while :; do head -c 32768 /dev/zero; sleep 0.05; done"] })}`,
    );
    const info = await c.waitText("session_info");
    await c.until(() => (c.stream(1).length > 100_000 ? true : undefined), "some output");
    const item = await find(agent, info.session_id);
    assert.ok(item, "the session is listed");
    assert.deepEqual(Object.keys(item).sort(), [
      "bytes_per_second",
      "command",
      "created",
      "id",
      "is_active",
      "last_activity",
      "tty",
      "workdir",
    ]);
    assert.equal(item.command, "sh -c while :; do head -c 32768 /dev/zero; sleep 0.05; done");
    assert.equal(item.is_active, true);
    assert.equal(item.tty, false);
    assert.equal(item.workdir, agent.home);
    assert.ok(!Number.isNaN(Date.parse(item.created)));
    assert.ok(Date.parse(item.last_activity) >= Date.parse(item.created));
    assert.ok(item.bytes_per_second > 0, `bytes_per_second ${item.bytes_per_second}`);

    const health = (await httpJson(agent, "GET", "/health")).body as { sessions: { total: number; attached: number } };
    assert.ok(health.sessions.total >= 1);
    assert.ok(health.sessions.attached >= 1);

    // Without max_run_after_disconnect the session ends when its last client leaves.
    await c.close();
    await eventually(async () => (await find(agent, info.session_id)) === undefined, "the session to end", 5000);
  });

  test("kill: a TERM that is obeyed gives signal, exited, complete", async () => {
    const c = await ExecClient.open(agent, `/exec?${query({ cmd: ["sleep", "30"] })}`);
    const info = await c.waitText("session_info");
    const r = await kill(agent, info.session_id, "signal=SIGTERM&timeout=5");
    assert.equal(r.status, 200);
    assert.equal(r.contentType, "application/x-ndjson");
    assert.deepEqual(
      r.events.map((e) => e.type),
      ["signal", "exited", "complete"],
    );
    const sig = r.events[0] as { signal: string; pid: number; message: string };
    assert.equal(sig.signal, "SIGTERM");
    assert.ok(sig.pid > 0);
    assert.equal(typeof sig.message, "string");
    assert.equal(typeof r.events[1]?.message, "string");
    assert.equal(r.events[2]?.exit_code, 143);
    assert.equal(await c.closed, 4143);
    assert.equal(c.exitFrame(), 143);
  });

  test("kill: an ignored TERM times out, then SIGKILL: signal, timeout, killed, complete", async () => {
    const c = await ExecClient.open(
      agent,
      `/exec?${query({ cmd: ["sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.1; done"] })}`,
    );
    const info = await c.waitText("session_info");
    await c.waitStdout("ready");
    const started = Date.now();
    const r = await kill(agent, info.session_id, "signal=TERM&timeout=1");
    const elapsed = Date.now() - started;
    assert.deepEqual(
      r.events.map((e) => e.type),
      ["signal", "timeout", "killed", "complete"],
    );
    assert.equal(r.events[0]?.signal, "SIGTERM");
    assert.equal(r.events[3]?.exit_code, 137);
    assert.ok(elapsed >= 900 && elapsed < 4000, `took ${elapsed} ms`);
    // events are streamed as they happen: the signal event arrived well before the end
    assert.ok(r.chunks.length >= 2);
    assert.ok((r.chunks[r.chunks.length - 1]?.at ?? 0) - (r.chunks[0]?.at ?? 0) >= 800);
    assert.equal(await c.closed, 4137);
  });

  test("kill: unknown session 404, bad signal or timeout 400", async () => {
    const missing = await httpJson(agent, "POST", "/exec/424242/kill");
    assert.equal(missing.status, 404);
    assert.equal((missing.body as { code: string }).code, "UMS_SESSION_NOT_FOUND");
    assert.equal(typeof (missing.body as { error: string }).error, "string");

    const c = await ExecClient.open(agent, `/exec?${query({ cmd: ["sleep", "30"] })}`);
    const info = await c.waitText("session_info");
    const badSig = await httpJson(agent, "POST", `/exec/${info.session_id}/kill?signal=SIGNOPE`);
    assert.equal(badSig.status, 400);
    assert.equal((badSig.body as { code: string }).code, "UMS_VALIDATION");
    const badTimeout = await httpJson(agent, "POST", `/exec/${info.session_id}/kill?timeout=later`);
    assert.equal(badTimeout.status, 400);
    assert.ok((badTimeout.body as { errors: string[] }).errors[0]?.includes("timeout"));
    await c.close();
  });

  test("re-attach after a disconnect (max_run_after_disconnect) replays earlier output", async () => {
    const owner = await ExecClient.open(
      agent,
      `/exec?${query({
        cmd: ["sh", "-c", 'echo first; echo warn >&2; read x; echo "second $x"; exit 5'],
        stdin: true,
        max_run_after_disconnect: "10s",
      })}`,
    );
    const info = await owner.waitText("session_info");
    await owner.waitStdout("first");
    await owner.until(() => (owner.stream(2).length > 0 ? true : undefined), "stderr");
    await owner.close();
    await sleep(300);
    const item = await find(agent, info.session_id);
    assert.equal(item?.is_active, true, "the session outlives its client");
    const health = (await httpJson(agent, "GET", "/health")).body as { sessions: { total: number; attached: number } };
    assert.ok(health.sessions.total >= 1);

    const again = await ExecClient.open(agent, `/exec/${info.session_id}`);
    const info2 = await again.waitText("session_info");
    assert.equal(info2.session_id, info.session_id);
    assert.equal(info2.is_owner, false);
    assert.equal(info2.command, info.command);
    await again.waitStdout("first");
    await again.until(() => (again.stream(2).length > 0 ? true : undefined), "replayed stderr");
    assert.equal(again.stream(2).toString(), "warn\n", "stderr is replayed on its own stream");
    again.sendStdin("hello\n");
    await again.closed;
    assert.equal(again.stream(1).toString(), "first\nsecond hello\n");
    assert.equal(again.exitFrame(), 5);
    assert.equal(again.closeCode, 4005);
  });

  test("a second client can attach to a live TTY session; both see the output", async () => {
    const owner = await ExecClient.open(
      agent,
      `/exec?${query({ cmd: ["bash", "-c", "echo one; read x; echo got-$x"], tty: true })}`,
    );
    const info = await owner.waitText("session_info");
    await owner.waitRaw("one");
    const viewer = await ExecClient.open(agent, `/exec?id=${info.session_id}`);
    const vinfo = await viewer.waitText("session_info");
    assert.equal(vinfo.tty, true);
    assert.equal(vinfo.is_owner, false);
    await viewer.waitRaw("one");
    viewer.ws.send(Buffer.from("xyz\r"));
    await owner.waitRaw("got-xyz");
    await viewer.waitRaw("got-xyz");
    assert.equal(await owner.closed, 1000);
    assert.equal(await viewer.closed, 1000);
  });

  test("a session ends after max_run_after_disconnect without a re-attach", async () => {
    const c = await ExecClient.open(agent, `/exec?${query({ cmd: ["sleep", "30"], max_run_after_disconnect: "1" })}`);
    const info = await c.waitText("session_info");
    await c.close();
    await sleep(400);
    assert.equal((await find(agent, info.session_id))?.is_active, true);
    await eventually(async () => (await find(agent, info.session_id)) === undefined, "the session to end", 5000);
  });

  test("a session that exits while detached keeps its output and exit for a re-attach", async () => {
    const c = await ExecClient.open(
      agent,
      `/exec?${query({ cmd: ["sh", "-c", "sleep 0.3; echo late; exit 4"], max_run_after_disconnect: "20s" })}`,
    );
    const info = await c.waitText("session_info");
    await c.close();
    await eventually(async () => (await find(agent, info.session_id))?.is_active === false, "the process to exit");
    const again = await ExecClient.open(agent, `/exec/${info.session_id}`);
    await again.closed;
    assert.equal(again.stream(1).toString(), "late\n");
    assert.equal(again.exitFrame(), 4);
    assert.equal(again.closeCode, 4004);
    assert.equal(await find(agent, info.session_id), undefined, "the session is gone once its exit was delivered");
  });

  test("a process that ignores SIGHUP is killed after the grace period", async () => {
    const c = await ExecClient.open(
      agent,
      `/exec?${query({ cmd: ["sh", "-c", "trap '' HUP; echo ready; while :; do sleep 0.1; done"] })}`,
    );
    const info = await c.waitText("session_info");
    await c.waitStdout("ready");
    await c.close();
    await sleep(300);
    assert.equal((await find(agent, info.session_id))?.is_active, true, "still running during the grace");
    // UMS_AGENT_KILL_GRACE is 1s in tests
    await eventually(async () => (await find(agent, info.session_id)) === undefined, "SIGKILL after the grace", 5000);
  });
  test("a kill reaches the whole session: a TTY shell's jobs in groups of their own too (issue #19)", async () => {
    const c = await ExecClient.open(
      agent,
      `/exec?${query({ cmd: ["bash", "--norc", "--noprofile", "-i"], tty: true })}`,
    );
    const info = await c.waitText("session_info");
    c.ws.send(Buffer.from("PS1='$ '\r"));
    // Job control gives each job a process group of its own, which a signal to the shell's misses.
    c.ws.send(Buffer.from("sleep 1000 & echo job-$((6*7))=$!\r"));
    const job = Number(/job-42=(\d+)/.exec(await c.waitRaw("job-42=", 5000).then(() => c.raw()))?.[1]);
    assert.ok(job > 0, c.raw());
    const stat = readFileSync(`/proc/${job}/stat`, "utf8");
    const [pgrp, session] = stat
      .slice(stat.lastIndexOf(")") + 2)
      .split(" ")
      .slice(2, 4)
      .map(Number);
    assert.notEqual(pgrp, session, "the job leads a process group of its own");
    try {
      const r = await kill(agent, info.session_id, "signal=SIGKILL&timeout=5");
      assert.equal(r.status, 200);
      assert.equal(r.events.at(-1)?.type, "complete", JSON.stringify(r.events));
      // Gone, or a zombie its new parent has yet to reap.
      const alive = () => {
        try {
          return !/^\S+ \(.*\) [ZX] /.test(readFileSync(`/proc/${job}/stat`, "utf8"));
        } catch {
          return false;
        }
      };
      await eventually(() => !alive(), "the job to go with its session", 5000);
    } finally {
      try {
        process.kill(job, "SIGKILL");
      } catch {}
    }
  });
});

describe("agent exec sessions: the cap on sessions that outlive their clients", () => {
  let agent: RunningAgent;
  before(async () => {
    agent = await startAgent({ UMS_AGENT_MAX_DETACHABLE: "2" });
  });
  after(async () => {
    await agent?.stop();
  });

  test("a third detachable session is refused with 409 UMS_SESSION_LIMIT; one that ends frees its place", async () => {
    const tty = await ExecClient.open(agent, `/exec?${query({ cmd: ["sleep", "1000"], tty: true })}`);
    const ttyInfo = await tty.waitText("session_info");
    await tty.close();
    const kept = await ExecClient.open(agent, `/exec?${query({ cmd: ["sleep", "1000"], detachable: true })}`);
    await kept.waitText("session_info");
    const refused = await upgradeRejection(agent, `/exec?${query({ cmd: ["sleep", "1"], tty: true })}`);
    assert.equal(refused.status, 409);
    assert.equal((refused.body as { code: string }).code, "UMS_SESSION_LIMIT");
    assert.match((refused.body as { error: string }).error, /outlive their websocket/);
    // A session that ends with its client is not capped.
    const plain = await ExecClient.open(agent, `/exec?${query({ cmd: ["sh", "-c", "exit 3"] })}`);
    assert.equal(await plain.closed, 4003);
    const k = await kill(agent, ttyInfo.session_id, "signal=SIGKILL&timeout=5");
    assert.equal(k.events.at(-1)?.type, "complete");
    assert.equal(await find(agent, ttyInfo.session_id), undefined);
    const next = await ExecClient.open(agent, `/exec?${query({ cmd: ["sleep", "1000"], tty: true })}`);
    await next.waitText("session_info");
    await next.close();
    await kept.close();
  });
});
