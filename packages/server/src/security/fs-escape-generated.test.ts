import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { isReservedPath } from "@ums/protocol";
import fc from "fast-check";
import WebSocket from "ws";
import {
  ACCESS,
  type Case,
  caseArb,
  judge,
  PLANTED,
  PLANTED_DIRS,
  pathArb,
  touches,
} from "../testing/fs-escape-cases.js";
import {
  type Answer,
  ESCAPE_FS,
  escapeUnit,
  LINKS,
  plantScript,
  queryOf,
  realOf,
  SANDBOX,
} from "../testing/fs-escape-fixture.js";

// Issue 19, finding 5 and the path-escape checks (the suite, its oracles and its unit:
// testing/fs-escape-fixture.ts).
// This file: generated cases across the operations, and watches, judged by the model of the planted tree.

const CASES = Number(process.env.UMS_FS_ESCAPE_CASES ?? 1200);
const SEED = Number(process.env.UMS_FS_ESCAPE_SEED ?? Date.now() % 2 ** 31);

describe("filesystem API: /.unit is refused (finding 5), no path escapes", { timeout: 15 * 60_000 }, () => {
  const u = escapeUnit();
  const { call, sh, hostSnapshot, unitSnapshot, checkAnswer } = u;
  const base = ESCAPE_FS;

  const runCase = async (c: Case): Promise<Answer> => {
    const q = (extra: Record<string, string | boolean>) =>
      queryOf({ path: c.path, workingDir: c.workingDir, asRoot: c.asRoot, ...extra }, c.spelling);
    const j = (extra: object) => ({ workingDir: c.workingDir, asRoot: c.asRoot, ...extra });
    switch (c.op) {
      case "read":
        return call("GET", `${base}/read?${q({})}`);
      case "list":
        // Recursive lists of / walk /proc too (10,000 entries, seconds): one in four.
        return call("GET", `${base}/list?${q({ recursive: c.recursive && c.query })}`);
      case "write":
        return call("PUT", `${base}/write?${q({ mkdir: c.recursive })}`, { body: `fuzz ${c.path}` });
      case "delete":
        return c.query
          ? call("DELETE", `${base}/delete?${q({ recursive: c.recursive })}`)
          : call("DELETE", `${base}/delete`, { json: j({ path: c.path, recursive: c.recursive }) });
      case "chmod":
        return call("POST", `${base}/chmod`, {
          json: j({ path: c.path, mode: c.query ? "0755" : "0640", recursive: c.recursive }),
        });
      case "chown":
        return call("POST", `${base}/chown`, {
          json: j({ path: c.path, uid: c.query ? 0 : 1000, recursive: c.recursive }),
        });
      case "copy":
        return call("POST", `${base}/copy`, { json: j({ source: c.path, dest: c.path2, recursive: c.recursive }) });
      case "rename":
        return call("POST", `${base}/rename`, { json: j({ source: c.path, dest: c.path2 }) });
    }
  };

  it(`path escapes: ${CASES} generated cases across the operations, and watches (seed ${SEED})`, async () => {
    const cases = fc.sample(caseArb, { numRuns: CASES, seed: SEED });
    await sh(plantScript());
    const host0 = hostSnapshot();
    const unit0 = await unitSnapshot();
    const failures: string[] = [];
    const tally: Record<string, number> = {};
    let replants = 0;
    let dirty = false;
    let opMs = 0;
    let replantMs = 0;
    const slowest: { ms: number; label: string }[] = [];
    const started = performance.now();
    for (const [i, c] of cases.entries()) {
      if (dirty) {
        const t = performance.now();
        await sh(plantScript());
        replantMs += performance.now() - t;
        replants++;
        dirty = false;
      }
      const label = `case ${i} ${JSON.stringify(c)}`;
      const first = judge(
        c,
        c.path,
        !["delete", "rename", "copy"].includes(c.op),
        c.op === "copy" ? "read" : ACCESS[c.op],
      );
      const second = ["copy", "rename"].includes(c.op) ? judge(c, c.path2, c.op === "copy", "write") : null;
      const mustFail = first.mustFail || (second?.mustFail ?? false);
      let r: Answer;
      const t0 = performance.now();
      try {
        r = await runCase(c);
        const ms = performance.now() - t0;
        if (ms > (slowest[0]?.ms ?? 0)) slowest.unshift({ ms: Math.round(ms), label });
        opMs += ms;
      } catch (err) {
        failures.push(`${label}: no answer (${(err as Error).message})`);
        continue;
      }
      const kind = r.status < 300 ? "2xx" : r.status === 403 ? "403" : "4xx";
      tally[kind] = (tally[kind] ?? 0) + 1;
      try {
        checkAnswer(label, r);
        if (mustFail)
          assert.ok(r.status >= 400, `${label}: resolves into /.unit, answered ${r.status} ${r.text.slice(0, 200)}`);
        if (c.op === "list" && r.status === 200) {
          for (const e of r.body.entries as { path: string }[]) {
            const real = realOf(e.path, false, LINKS);
            assert.ok(real === "/.unit" || !isReservedPath(real, "read"), `${label}: listed ${e.path}`);
          }
        }
      } catch (err) {
        failures.push((err as Error).message);
      }
      // A delete or rename that took a planted path (or a directory above it) away, or a chmod or chown
      // of one (applied even when a reserved path below refused the rest): plant again.
      if (c.op === "delete" || c.op === "rename") {
        dirty = touches(PLANTED, first.real) || (second !== null && touches(PLANTED, second.real));
      } else if (c.op === "chmod" || c.op === "chown") {
        dirty = PLANTED_DIRS.includes(first.real); // a directory everything hangs from may have lost its x bits
      }
    }

    // Watches: the same paths, subscribed to over one websocket.
    await sh(plantScript());
    const watches = fc.sample(
      fc.record({ path: pathArb, workingDir: caseArb.map((c) => c.workingDir), recursive: fc.boolean() }),
      {
        numRuns: Math.ceil(CASES / 8),
        seed: SEED + 1,
      },
    );
    const ws = new WebSocket(`${u.s.url.replace(/^http/, "ws")}${base}/watch`, {
      headers: { authorization: `Bearer ${u.token}` },
    });
    const replies: { type: string; code?: string; paths?: string[] }[] = [];
    ws.on("message", (d) => {
      const m = JSON.parse(String(d));
      if (m.type !== "ping" && m.type !== "event") replies.push(m);
    });
    await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));
    try {
      /** The next answer of one of `types` (answers come in the order of the messages). */
      const answer = async (types: string[]) => {
        const deadline = Date.now() + 30_000;
        for (;;) {
          const i = replies.findIndex((m) => types.includes(m.type));
          if (i >= 0) return replies.splice(0, i + 1).pop();
          if (Date.now() > deadline) return undefined;
          await new Promise((r) => setTimeout(r, 5));
        }
      };
      for (const [i, w] of watches.entries()) {
        const label = `watch ${i} ${JSON.stringify(w)}`;
        ws.send(JSON.stringify({ type: "subscribe", ...w }));
        const reply = await answer(["subscribed", "error"]);
        if (!reply) {
          failures.push(`${label}: no answer`);
          break;
        }
        const mustFail = judge({ ...w } as Case, w.path, true, "read").mustFail || w.path === "";
        tally[`watch-${reply.type}`] = (tally[`watch-${reply.type}`] ?? 0) + 1;
        if (mustFail && reply.type !== "error")
          failures.push(`${label}: resolves into /.unit, answered ${JSON.stringify(reply)}`);
        if (reply.type === "subscribed") {
          ws.send(JSON.stringify({ type: "unsubscribe", paths: reply.paths }));
          await answer(["unsubscribed"]);
        }
      }
    } finally {
      ws.close();
    }

    process.stderr.write(
      `fs-escape: ${cases.length} cases (${Math.round(opMs)} ms) + ${watches.length} watches in ${Math.round(performance.now() - started)} ms, ` +
        `${replants} replants (${Math.round(replantMs)} ms), ${JSON.stringify(tally)}; slowest ${JSON.stringify(slowest.slice(0, 3))}\n`,
    );
    assert.deepEqual(
      failures.slice(0, 25),
      [],
      `${failures.length} failures (seed ${SEED}); tally ${JSON.stringify(tally)}`,
    );
    // Not vacuous: the cases reached both sides of the rule.
    assert.ok((tally["2xx"] ?? 0) > CASES / 20, JSON.stringify(tally));
    assert.ok((tally["403"] ?? 0) > CASES / 20, JSON.stringify(tally));
    assert.ok((tally["watch-subscribed"] ?? 0) > 0 && (tally["watch-error"] ?? 0) > 0, JSON.stringify(tally));
    assert.deepEqual(hostSnapshot(), host0, "the host side of /.unit/run changed");
    assert.equal(await unitSnapshot(), unit0, "the unit's /.unit changed");
    // The server and the unit's agent still answer.
    await sh(plantScript());
    assert.equal((await call("GET", `${base}/read?path=${SANDBOX}/d/f&workingDir=/`)).text, "inside");
  });
});
