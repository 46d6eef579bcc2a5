import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { ErrorCode } from "@ums/protocol";
import {
  B_SESSION_MARK,
  crossOrgSuite,
  EXAMPLES,
  type Example,
  fill,
  ORG_LEVEL,
  type Target,
} from "../testing/cross-org-fixture.js";
import { openWebsocket } from "../testing/unit-app.js";

// Issue 19, "cross-organization access on every route" (the suite, its organizations and B's things:
// testing/cross-org-fixture.ts). This file: every unit route of the OpenAPI document called with A's
// token against B's units, by name and by id. The unit URL, the connectors and the organization-level
// routes: cross-org-access.test.ts.

/** The `/v1/units` route a `/v1/sprites` route repeats (the same path for a `/v1/units` route). */
const twin = (path: string) => path.replace(/^\/v1\/sprites(?=\/|$)/, "/v1/units");

describe("cross-organization access on every route", { timeout: 15 * 60_000 }, () => {
  const x = crossOrgSuite();
  const { call, noLeak, b, id } = x;

  it("every route of the OpenAPI document is exercised here or listed as organization-level", () => {
    assert.ok(x.ops.length > 40, `${x.ops.length} routes`);
    // A /v1/sprites route is exercised with its /v1/units twin's example (api/dialect.ts).
    const missing = x.ops.map(([m, p]) => `${m} ${twin(p)}`).filter((k) => !(k in EXAMPLES) && !ORG_LEVEL.has(k));
    assert.deepEqual(missing, [], "add a cross-organization case (EXAMPLES) or list the route in ORG_LEVEL");
    const stale = [...Object.keys(EXAMPLES), ...ORG_LEVEL].filter((k) => !x.ops.some(([m, p]) => `${m} ${p}` === k));
    assert.deepEqual(stale, [], "cases for routes the document no longer has");
  });

  it("a unit A lacks (B's 'bonly', or B's unit id): 404 on every unit route, websockets too", async () => {
    const failures: string[] = [];
    const targets: Target[] = [
      { name: "bonly", checkpoint: b.checkpoint, session: b.session, service: "bsvc", conn: b.conn },
      { name: id.bOnly as string, checkpoint: b.checkpoint, session: b.session, service: "bsvc", conn: b.conn },
    ];
    for (const t of targets) {
      for (const [m, p] of x.ops) {
        const key = `${m} ${twin(p)}`;
        if (!twin(p).startsWith("/v1/units/{name}")) continue;
        const ex = (EXAMPLES[key] as (t: Target) => Example)(t);
        const path = fill(p, t);
        const label = `A: ${m} ${path}`;
        const r = await call(x.tA, m, path, ex);
        noLeak(label, path + JSON.stringify(ex), r.text);
        // The exec attach refuses a plain GET (it is a websocket) before it looks the unit up: that
        // says nothing of B. (The file watch looks the unit up first.)
        const wsOnly = r.status === 400 && /websocket/.test(r.text) && key === "GET /v1/units/{name}/exec/{id}";
        if (!wsOnly && (r.status !== 404 || (m !== "HEAD" && r.body?.code !== ErrorCode.UnitNotFound))) {
          failures.push(`${label}: ${r.status} ${r.text.slice(0, 200)}`);
        }
        // Websockets: the exec start and attach, the file watch, the control websocket, the proxy, the
        // TCP tunnel, the port watch.
        if (m === "GET" && /\/exec$|\/exec\/\{id\}$|\/fs\/watch$|\/control$|\{\*\}$|\/proxy$|\/ports\/watch$/.test(p)) {
          const q = p.endsWith("/exec") ? "?cmd=true" : "";
          const ws = await openWebsocket(`${x.s.url}${path}${q}`, { authorization: `Bearer ${x.tA}` });
          ws.socket.destroy();
          if (ws.status !== 404) failures.push(`${label} (websocket): ${ws.status}`);
        }
      }
    }
    assert.deepEqual(failures, []);
  });

  it("a unit of the same name is A's own: B's checkpoints, sessions, services, files and app stay out of reach", async () => {
    const t: Target = {
      name: "shared",
      checkpoint: b.sharedCheckpoint,
      session: b.sharedSession,
      service: "bsvc",
      conn: b.conn,
    };
    const failures: string[] = [];
    for (const [m, p] of x.ops) {
      const key = `${m} ${twin(p)}`;
      // A deletes its own unit last (below); B's is untouched either way.
      if (!twin(p).startsWith("/v1/units/{name}") || key === "DELETE /v1/units/{name}") continue;
      const ex = (EXAMPLES[key] as (t: Target) => Example)(t);
      const path = fill(p, t);
      const label = `A: ${m} ${path}`;
      // Checkpoint and session ids count per unit ("v2", 3): A's unit may have its own of the same id.
      const aHas = p.includes("/checkpoints/{id}")
        ? ((await call(x.tA, "GET", "/v1/units/shared/checkpoints")).body as { id: string }[]).some(
            (c) => c.id === t.checkpoint,
          )
        : p.includes("/exec/{id}/kill")
          ? ((await call(x.tA, "GET", "/v1/units/shared/exec")).body as { id: number }[]).some(
              (x) => String(x.id) === t.session,
            )
          : true;
      const r = await call(x.tA, m, path, ex);
      try {
        assert.ok(r.status < 500 || [502, 504].includes(r.status), `${label}: ${r.status} ${r.text.slice(0, 200)}`);
        noLeak(label, path + JSON.stringify(ex), r.text);
        // Things of B named by id are not found in A's unit.
        if (!aHas) assert.equal(r.status, 404, `${label}: ${r.text.slice(0, 200)}`);
        if (key === "GET /v1/units/{name}") assert.equal(r.body.id, id.aShared, label);
        // A's unit runs no app: the proxy never answers from B's.
        if (p.endsWith("{*}")) assert.notEqual(r.status, 200, `${label}: ${r.text.slice(0, 200)}`);
      } catch (err) {
        failures.push((err as Error).message);
      }
    }
    // Attaching to B's session number in A's unit never shows B's session.
    const ws = await openWebsocket(`${x.s.url}/v1/units/shared/exec/${b.sharedSession}`, {
      authorization: `Bearer ${x.tA}`,
    });
    const seen: Buffer[] = [];
    ws.socket.on("data", (d: Buffer) => seen.push(d));
    await new Promise((r) => setTimeout(r, 500));
    ws.socket.destroy();
    assert.ok(!Buffer.concat(seen).toString("latin1").includes(B_SESSION_MARK), "A attached to B's session");
    assert.deepEqual(failures, []);
  });

  it("nothing of B changed, and B still reaches all of it", () => x.bUnchanged());
});
