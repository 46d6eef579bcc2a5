import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { chown, mkdtemp, readdir, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { UID_SHIFT } from "../runtime/image/shift.js";
import { execHttp } from "../testing/exec-client.js";
import { startSqliteServer, type TestServer } from "../testing/server.js";

/**
 * Issue #19, findings 1 and 2 (3 and 4: restart-boundary.test.ts): root in a unit is the attacker, and the host never follows, opens,
 * chowns or connects to a path the unit can write (docs/SECURITY.md, "The boundary rule").
 */
describe("the host-unit boundary (unit root as the attacker)", () => {
  let s: TestServer;
  let tokenA: string;
  let tokenB: string;
  let idA: string;
  let idB: string;
  let canary: string;
  const asRoot = (token: string, script: string) =>
    execHttp(s.url, token, "box", ["sh", "-c", script], { user: "root" });
  const out = async (token: string, script: string) => (await asRoot(token, script)).stdout.toString();

  before(async () => {
    s = await startSqliteServer();
    // Two organizations, each with a unit of the same name.
    tokenA = await s.token("org-a");
    tokenB = await s.token("org-b");
    idA = await s.unit(tokenA, "box");
    idB = await s.unit(tokenB, "box");
    assert.equal(await out(tokenA, "echo A | tee /tmp/whoami > /root/whoami; cat /root/whoami"), "A\n");
    assert.equal(await out(tokenB, "echo B | tee /tmp/whoami > /root/whoami; cat /root/whoami"), "B\n");
    // A host directory owned by the unit's root uid, like the one the finding wrote into.
    canary = await mkdtemp(join(tmpdir(), "ums-canary-"));
    await writeFile(join(canary, "keep"), "host file\n", { mode: 0o640 });
    await chown(canary, UID_SHIFT, UID_SHIFT);
  });
  after(async () => {
    await s?.close();
    if (canary) await rm(canary, { recursive: true, force: true });
  });

  it("finding 1: unit root cannot point the host's connections into another organization's unit", async () => {
    const run = join(s.config.dataDir, "run");
    // Every host path of B's sockets, in this layout and the one before it.
    const targets = [
      s.server.runtime.agentSocket(idB),
      s.server.runtime.hostSocket(idB).path,
      join(run, idB, "sock", "agent.sock"),
    ];
    const attempts = targets.flatMap((t) => [
      `ln -sfn ${t} /.unit/run/agent.sock && echo planted agent.sock`,
      `rm -f /.unit/run/host.sock && echo removed host.sock`,
      `ln -sfn ${t} /.unit/run/host.sock && echo planted host.sock`,
    ]);
    const r = await out(
      tokenA,
      `${attempts.join(" 2>/dev/null; ")} 2>/dev/null; mkdir /.unit/run/x 2>/dev/null && echo mkdir; chmod 777 /.unit/run 2>/dev/null && echo chmod; echo end`,
    );
    // Exec, fs read and fs write through A's token reach A's unit, and nothing of B's.
    assert.equal(await out(tokenA, "cat /root/whoami"), "A\n");
    const read = await s.api("GET", `/v1/units/box/fs/read?path=${encodeURIComponent("/tmp/whoami")}&workingDir=/`, {
      token: tokenA,
    });
    assert.equal(read.status, 200, read.text);
    assert.equal(read.text, "A\n");
    const write = await s.api("PUT", `/v1/units/box/fs/write?path=${encodeURIComponent("/tmp/from-a")}&workingDir=/`, {
      token: tokenA,
      body: "a",
    });
    assert.equal(write.status, 200, write.text);
    assert.equal(await out(tokenA, "cat /tmp/from-a"), "a");
    assert.equal(await out(tokenB, "cat /root/whoami; test -e /tmp/from-a && echo leaked; echo end"), "B\nend\n");
    // The internal API still works from A (its host socket was not replaced) and names A.
    const cps = await out(tokenA, "curl -s --unix-socket /.unit/api.sock http://unit/v1/checkpoints; echo");
    assert.match(cps, /^\[/);
    // Because /.unit/run is read-only to the unit's root, and the agent's socket is not in it at all.
    assert.equal(r, "end\n", "no change to /.unit/run succeeded");
    assert.equal(
      await out(tokenA, "ls -A /.unit/run; test -e /.unit/run/agent.sock && echo agent.sock; echo end"),
      "host.sock\nend\n",
    );
  });

  it("finding 1: even with /.unit/run unmounted (privileged root), the host keeps talking to its own agent", async () => {
    const put = await s.api("POST", "/v1/units/box/policy/privileges", {
      token: tokenA,
      json: { profile: "privileged" },
    });
    assert.equal(put.status, 200, put.text);
    // Privileges apply at the next boot: the attacker kills its agent, and the unit boots again.
    await asRoot(tokenA, "kill -9 $(cat /proc/1/task/1/children)").catch(() => {});
    await waitFor(async () => (await out(tokenA, "cat /root/whoami").catch(() => "")) === "A\n");
    const target = s.server.runtime.agentSocket(idB);
    const r = await out(
      tokenA,
      `umount -l /.unit/run && echo unmounted; mkdir -p /.unit/run; ln -sfn ${target} /.unit/run/agent.sock && echo planted; echo end`,
    );
    assert.match(r, /unmounted\nplanted\nend\n$/, "the unit changes only its own view");
    assert.equal(await out(tokenA, "cat /root/whoami"), "A\n");
    assert.equal(await out(tokenB, "cat /root/whoami"), "B\n");
  });

  it("no process the agent starts holds the agent's listening socket", async () => {
    // An fs call first, so that the agent's file worker runs too; and ums-spawn (up a second after the agent).
    await s.api("GET", `/v1/units/box/fs/list?path=${encodeURIComponent("/")}&workingDir=/`, { token: tokenB });
    await waitFor(async () => (await out(tokenB, "cat /proc/$PPID/comm")) === "ums-spawn\n");
    const script = [
      "agent=$(cat /proc/1/task/1/children | tr ' ' '\\n' | head -1)",
      'sock=$(readlink /proc/$agent/fd/3); echo "agent fd 3: $sock"',
      'for p in /proc/[0-9]*; do [ "$p" = /proc/$agent ] && continue; ls -l $p/fd 2>/dev/null | grep -qF "$sock" && echo "leak: $(tr "\\0" " " < $p/cmdline)"; done',
      "echo end",
    ].join("; ");
    const r = await out(tokenB, script);
    assert.match(r, /^agent fd 3: socket:\[\d+\]\nend\n$/, r);
  });

  it("finding 2: the host writes nothing into the unit's rootfs at boot, even with /etc a link to a host dir", async () => {
    const before = (await readdir(canary)).sort();
    await asRoot(tokenB, `mv /etc /etc.real && /etc.real/../bin/ln -s ${canary} /etc && echo moved`).catch(() => {});
    // Make the unit boot again: its root kills the agent (PID 1 then exits).
    await asRoot(tokenB, "kill -9 $(cat /proc/1/task/1/children)").catch(() => {});
    await waitFor(async () => (await out(tokenB, "cat /root/whoami").catch(() => "")) === "B\n");
    assert.deepEqual((await readdir(canary)).sort(), before, "no file appeared in the host directory");
    const keep = await stat(join(canary, "keep"));
    assert.equal(keep.mode & 0o777, 0o640);
    // Put /etc back; the next boot names the unit in /etc/hostname and /etc/hosts again.
    await asRoot(tokenB, "rm /etc && mv /etc.real /etc");
    await asRoot(tokenB, "kill -9 $(cat /proc/1/task/1/children)").catch(() => {});
    await waitFor(async () => (await out(tokenB, "cat /etc/hostname").catch(() => "")) === "box\n");
    assert.match(await out(tokenB, "cat /etc/hosts"), /127\.0\.1\.1\tbox\n/);
  });

  it("the host-side run directory of a unit is owned by the host and not writable by the unit's uid", async () => {
    const dir = join(s.config.dataDir, "run", idA);
    for (const d of [dir, join(dir, "exposed")]) {
      const st = await stat(d);
      assert.equal(st.uid, 0, `${d} is owned by host root`);
      assert.equal(st.mode & 0o022, 0, `${d} is writable by its owner only`);
    }
    assert.ok(!existsSync(join(dir, "sock")), "no directory owned by the unit's root is left");
    // What the unit's root uid could write to, on the host, below the data dir: nothing at all.
    const writable = execFileSync("find", [
      s.config.dataDir,
      "-xdev",
      "-uid",
      String(UID_SHIFT),
      "-not",
      "-type",
      "l",
      "-not",
      "-type",
      "s",
    ])
      .toString()
      .trim();
    assert.equal(writable, "");
  });
});

async function waitFor(check: () => Promise<boolean>, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error("timed out");
    await new Promise((r) => setTimeout(r, 200));
  }
}
