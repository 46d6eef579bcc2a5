import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { FS_RESERVED_PATH } from "@ums/protocol";
import WebSocket from "ws";
import { type Answer, ESCAPE_FS, escapeUnit, OWNED_CANARY, queryOf, SANDBOX } from "../testing/fs-escape-fixture.js";

// Issue 19, finding 5 and the path-escape checks (the suite, its oracles and its unit:
// testing/fs-escape-fixture.ts).
// This file: the hand-written cases, every operation refused on /.unit/run and /.unit however spelled,
// and what /.unit shows read-only (logs, checkpoints, policy).

describe("filesystem API: /.unit is refused (finding 5), no path escapes", { timeout: 15 * 60_000 }, () => {
  const u = escapeUnit();
  const { call, sh, hostSnapshot, unitSnapshot, checkAnswer } = u;
  const base = ESCAPE_FS;

  it("refuses every operation on /.unit/run and /.unit, as the unit user and asRoot, however the path is spelled", async () => {
    const host0 = hostSnapshot();
    const unit0 = await unitSnapshot();
    const reservedPaths = [
      "/.unit/run/agent.sock",
      `/.unit/run/${OWNED_CANARY}`,
      "//.unit/run/agent.sock",
      "/./.unit/run/host.sock",
      "/a/../.unit/run/host.sock",
      "/.unit/run/host.sock/",
      "/.unit/run//host.sock",
      `${SANDBOX}/to-run/host.sock`, // through symlinks planted by unit root
      `${SANDBOX}/chain1/${OWNED_CANARY}`,
      `${SANDBOX}/d/up/host.sock`,
      `/proc/self/root/.unit/run/${OWNED_CANARY}`,
      `${SANDBOX}/to-proc1/run/host.sock`,
    ];
    // The last component a symlink into /.unit: refused where the operation follows it (the others act
    // on the link itself, which is the unit's own).
    const followedLinks = [`${SANDBOX}/to-sock`, `${SANDBOX}/to-canary`, `${SANDBOX}/to-run`, `${SANDBOX}/chain1`];
    const failures: string[] = [];
    const expect403 = async (label: string, p: Promise<Answer>) => {
      const r = await p;
      checkAnswer(label, r);
      // The unit user may not look into /proc/1 (PID 1 is root's): the kernel refuses first.
      const eacces = label.includes("to-proc1") && label.includes("asRoot false") && r.body?.code === "EACCES";
      if (eacces) return;
      if (r.status !== 403 || r.body?.code !== FS_RESERVED_PATH)
        failures.push(`${label}: ${r.status} ${r.text.slice(0, 200)}`);
      else assert.match(r.body.error, /reserved/);
    };
    for (const asRoot of [false, true]) {
      for (const path of followedLinks) {
        const q = queryOf({ path, workingDir: "/", asRoot }, "plain");
        const tag = `${path} (asRoot ${asRoot})`;
        await expect403(`write ${tag}`, call("PUT", `${base}/write?${q}`, { body: "pwned" }));
        await expect403(`read ${tag}`, call("GET", `${base}/read?${q}`));
        await expect403(`list ${tag}`, call("GET", `${base}/list?${q}`));
        await expect403(
          `chmod ${tag}`,
          call("POST", `${base}/chmod`, { json: { path, workingDir: "/", mode: "0777", asRoot } }),
        );
        await expect403(
          `chown ${tag}`,
          call("POST", `${base}/chown`, { json: { path, workingDir: "/", uid: 1000, asRoot } }),
        );
      }
      for (const path of reservedPaths) {
        const q = (extra: Record<string, string | boolean> = {}) =>
          queryOf({ path, workingDir: "/", asRoot, ...extra }, "plain");
        const tag = `${path} (asRoot ${asRoot})`;
        await expect403(`delete ${tag}`, call("DELETE", `${base}/delete`, { json: { path, workingDir: "/", asRoot } }));
        await expect403(`delete (query) ${tag}`, call("DELETE", `${base}/delete?${q()}`));
        await expect403(
          `chmod ${tag}`,
          call("POST", `${base}/chmod`, { json: { path, workingDir: "/", mode: "0777", asRoot } }),
        );
        await expect403(
          `chown ${tag}`,
          call("POST", `${base}/chown`, { json: { path, workingDir: "/", uid: 1000, gid: 1000, asRoot } }),
        );
        await expect403(`write ${tag}`, call("PUT", `${base}/write?${q()}`, { body: "pwned" }));
        await expect403(`read ${tag}`, call("GET", `${base}/read?${q()}`));
        await expect403(`list ${tag}`, call("GET", `${base}/list?${q()}`));
        await expect403(
          `rename from ${tag}`,
          call("POST", `${base}/rename`, { json: { source: path, dest: "/tmp/moved", workingDir: "/", asRoot } }),
        );
        await expect403(
          `copy from ${tag}`,
          call("POST", `${base}/copy`, { json: { source: path, dest: "/tmp/copied", workingDir: "/", asRoot } }),
        );
      }
      const j = (extra: object) => ({ workingDir: "/", asRoot, ...extra });
      await expect403(
        `list /.unit/run`,
        call("GET", `${base}/list?${queryOf({ path: "/.unit/run", workingDir: "/", asRoot }, "plain")}`),
      );
      await expect403(
        `list /.unit`,
        call("GET", `${base}/list?${queryOf({ path: "/.unit", workingDir: "/", asRoot, recursive: true }, "plain")}`),
      );
      await expect403(
        `list %2e-spelled`,
        call("GET", `${base}/list?${queryOf({ path: "/x/../.unit/run", workingDir: "/", asRoot }, "dots")}`),
      );
      await expect403(
        `list relative`,
        call("GET", `${base}/list?${queryOf({ path: "run", workingDir: "/.unit", asRoot }, "plain")}`),
      );
      await expect403(
        `write into /.unit`,
        call("PUT", `${base}/write?${queryOf({ path: "/.unit/new", workingDir: "/", asRoot }, "plain")}`, {
          body: "x",
        }),
      );
      await expect403(
        `write /.unit/policy`,
        call("PUT", `${base}/write?${queryOf({ path: "/.unit/policy/new", workingDir: "/", asRoot }, "plain")}`, {
          body: "x",
        }),
      );
      await expect403(
        `write /.unit/logs`,
        call(
          "PUT",
          `${base}/write?${queryOf({ path: "/.unit/logs/new", workingDir: "/", asRoot, mkdir: true }, "plain")}`,
          { body: "x" },
        ),
      );
      await expect403(
        `write through to-run, mkdir`,
        call(
          "PUT",
          `${base}/write?${queryOf({ path: `${SANDBOX}/to-run/new/x`, workingDir: "/", asRoot, mkdir: true }, "plain")}`,
          { body: "x" },
        ),
      );
      await expect403(`delete /.unit/logs`, call("DELETE", `${base}/delete`, { json: j({ path: "/.unit/logs" }) }));
      await expect403(
        `delete /.unit/run recursive`,
        call("DELETE", `${base}/delete`, { json: j({ path: `${SANDBOX}/to-unit/run`, recursive: true }) }),
      );
      await expect403(
        `chmod -R /.unit`,
        call("POST", `${base}/chmod`, { json: j({ path: "/.unit", mode: "0777", recursive: true }) }),
      );
      await expect403(
        `chmod through to-run`,
        call("POST", `${base}/chmod`, { json: j({ path: `${SANDBOX}/to-run`, mode: "0777" }) }),
      );
      await expect403(
        `chown through to-unit`,
        call("POST", `${base}/chown`, { json: j({ path: `${SANDBOX}/to-unit/run`, uid: 0 }) }),
      );
      await expect403(
        `rename into /.unit/run`,
        call("POST", `${base}/rename`, { json: j({ source: `${SANDBOX}/d/f`, dest: `${SANDBOX}/to-run/f` }) }),
      );
      await expect403(
        `copy into /.unit/run`,
        call("POST", `${base}/copy`, { json: j({ source: `${SANDBOX}/d/f`, dest: `${SANDBOX}/to-run` }) }),
      );
      await expect403(
        `copy over the owned canary`,
        call("POST", `${base}/copy`, { json: j({ source: `${SANDBOX}/d/f`, dest: `/.unit/run/${OWNED_CANARY}` }) }),
      );
      await expect403(
        `copy /.unit/run recursive`,
        call("POST", `${base}/copy`, {
          json: j({ source: `${SANDBOX}/to-unit/run`, dest: "/tmp/tree", recursive: true }),
        }),
      );
    }
    // A dangling link: writing it would create its target, in /.unit/run.
    await sh(`ln -sfn /.unit/run/created-through-a-link ${SANDBOX}/to-run-new`);
    for (const asRoot of [false, true]) {
      await expect403(
        `write through a dangling link (asRoot ${asRoot})`,
        call("PUT", `${base}/write?${queryOf({ path: `${SANDBOX}/to-run-new`, workingDir: "/", asRoot }, "plain")}`, {
          body: "x",
        }),
      );
    }
    assert.deepEqual(failures, []);
    assert.deepEqual(hostSnapshot(), host0, "the host side of /.unit/run changed");
    assert.equal(await unitSnapshot(), unit0, "the unit's /.unit changed");
    // The unit still works through the API.
    assert.equal((await call("GET", `${base}/read?path=${SANDBOX}/d/f&workingDir=/`)).text, "inside");
    await sh("test -S /.unit/run/host.sock");
  });

  it("reads, lists and watches what the spec shows in /.unit read-only: logs, checkpoints, policy", async () => {
    for (const asRoot of [false, true]) {
      const q = (path: string) => queryOf({ path, workingDir: "/", asRoot }, "plain");
      for (const p of [
        "/.unit/logs",
        "/.unit/logs/",
        `${SANDBOX}/to-logs`,
        "/.unit/policy",
        "/.unit/checkpoints",
        `${SANDBOX}/to-cp`,
      ]) {
        const r = await call("GET", `${base}/list?${q(p)}`);
        checkAnswer(`list ${p}`, r);
        assert.equal(r.status, 200, `list ${p} (asRoot ${asRoot}): ${r.text}`);
      }
      const policyFiles = (await call("GET", `${base}/list?${q("/.unit/policy")}`)).body.entries as { path: string }[];
      assert.ok(policyFiles.length > 0, "the unit has policy files");
      const first = policyFiles[0]?.path as string;
      const read = await call("GET", `${base}/read?${q(first)}`);
      assert.equal(read.status, 200, read.text);
      assert.equal(read.text, await sh(`cat ${first}`));
      // … and never writes there, even through a link
      for (const p of [first, `${SANDBOX}/to-policy/${first.split("/").pop()}`]) {
        const w = await call("PUT", `${base}/write?${q(p)}`, { body: "x" });
        checkAnswer(`write ${p}`, w);
        assert.ok(w.status >= 400, `write ${p}: ${w.status}`);
      }
    }
    const ws = new WebSocket(`${u.s.url.replace(/^http/, "ws")}${base}/watch`, {
      headers: { authorization: `Bearer ${u.token}` },
    });
    const replies: Record<string, unknown>[] = [];
    ws.on("message", (d) => {
      const m = JSON.parse(String(d));
      if (m.type !== "ping" && m.type !== "event") replies.push(m);
    });
    await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));
    try {
      const ask = async (path: string) => {
        const n = replies.length;
        ws.send(JSON.stringify({ type: "subscribe", path, workingDir: "/", recursive: true }));
        const deadline = Date.now() + 10_000;
        while (replies.length === n) {
          assert.ok(Date.now() < deadline, `no answer to subscribe ${path}`);
          await new Promise((r) => setTimeout(r, 20));
        }
        return replies[n] as { type: string; code?: string };
      };
      assert.equal((await ask("/.unit/logs")).type, "subscribed");
      assert.equal((await ask("/.unit/policy")).type, "subscribed");
      for (const p of ["/.unit/run", "/.unit", `${SANDBOX}/to-run`, `${SANDBOX}/chain1`, "/.unit/run/host.sock"]) {
        const r = await ask(p);
        assert.deepEqual([r.type, r.code], ["error", FS_RESERVED_PATH], `watch ${p}: ${JSON.stringify(r)}`);
      }
    } finally {
      ws.close();
    }
  });
});
