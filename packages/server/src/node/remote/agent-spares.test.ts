import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { setTimeout as sleep } from "node:timers/promises";
import { AgentSpares, SPARE_MS } from "./agent-spares.js";

// The node endpoint's spare agent connections (agent-spares.ts), against Unix listeners standing in
// for units' agents: what a wake takes is an open connection to that unit's agent, or nothing.

describe("AgentSpares", () => {
  const dir = mkdtempSync(join(tmpdir(), "ums-spares-"));
  const servers: Server[] = [];
  after(() => {
    for (const s of servers) s.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A listener at `name`: the connections it accepted, each answering "<name>" to a line. */
  async function agent(name: string): Promise<{ path: string; accepted: Socket[]; server: Server }> {
    const accepted: Socket[] = [];
    const server = createServer((s) => {
      accepted.push(s);
      s.on("error", () => {});
      s.on("data", () => s.write(name));
    });
    servers.push(server);
    const path = join(dir, `${name}.sock`);
    await new Promise<void>((resolve) => server.listen(path, resolve));
    return { path, accepted, server };
  }
  const until = async (cond: () => boolean, what: string) => {
    for (let i = 0; i < 200 && !cond(); i++) await sleep(10);
    assert.ok(cond(), what);
  };
  const ask = (s: Socket) =>
    new Promise<string>((resolve) => {
      s.once("data", (d) => resolve(String(d)));
      s.write("?\n");
    });

  it("gives a unit's next wake a connection to that unit's agent, once", async () => {
    const spares = new AgentSpares();
    const a = await agent("a");
    const b = await agent("b");
    assert.equal(spares.take("unit-a"), undefined, "none before a refill");
    spares.refill("unit-a", a.path);
    spares.refill("unit-a", a.path); // one per unit
    spares.refill("unit-b", b.path);
    await until(() => spares.size === 2, "both spares open");
    assert.equal(a.accepted.length, 1);
    const sa = spares.take("unit-a");
    assert.ok(sa);
    assert.equal(await ask(sa), "a", "unit-a's spare reaches unit-a's agent");
    assert.equal(spares.take("unit-a"), undefined, "taken once");
    const sb = spares.take("unit-b");
    assert.ok(sb);
    assert.equal(await ask(sb), "b");
    sa.destroy();
    sb.destroy();
    spares.close();
  });

  it("drops a spare whose agent went away, and one that waited SPARE_MS", async () => {
    const spares = new AgentSpares();
    const a = await agent("gone");
    spares.refill("unit-gone", a.path);
    await until(() => a.accepted.length === 1 && spares.size === 1, "the spare is open");
    // The unit stopped: its agent's end of the connection closes.
    for (const s of a.accepted) s.destroy();
    await until(() => spares.size === 0, "the closed spare is dropped");
    assert.equal(spares.take("unit-gone"), undefined);

    const c = await agent("late");
    spares.refill("unit-late", c.path);
    await until(() => spares.size === 1, "the spare is open");
    const closed = new Promise((resolve) => c.accepted[0]?.once("close", resolve));
    await sleep(SPARE_MS + 100);
    assert.equal(spares.size, 0);
    assert.equal(spares.take("unit-late"), undefined, "a spare is not kept past SPARE_MS");
    await closed; // and its connection was closed, not left open
    spares.close();
  });

  it("opens nothing where no agent listens, and nothing once closed", async () => {
    const spares = new AgentSpares();
    spares.refill("unit-none", join(dir, "none.sock"));
    await sleep(50);
    assert.equal(spares.size, 0);
    assert.equal(spares.take("unit-none"), undefined);
    const a = await agent("after-close");
    spares.refill("unit-open", a.path);
    await until(() => spares.size === 1, "the spare is open");
    spares.close();
    assert.equal(spares.size, 0);
    await until(() => a.accepted[0]?.destroyed === true || a.accepted[0]?.readableEnded === true, "closed with it");
    spares.refill("unit-open", a.path);
    await sleep(50);
    assert.equal(a.accepted.length, 1, "no connection after close()");
  });
});
