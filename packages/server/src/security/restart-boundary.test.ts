import assert from "node:assert/strict";
import { chown, mkdtemp, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { UID_SHIFT } from "../runtime/image/shift.js";
import { execHttp } from "../testing/exec-client.js";
import { removeServerHostResources } from "../testing/host-cleanup.js";
import { prepareServe, type ServeProcess } from "../testing/serve-process.js";

/**
 * Issue #19, findings 3 and 4: while `ums serve` restarts, a loop in a running unit keeps swapping
 * /.unit/run/host.sock for a link to a host file (which a start used to chown to the unit's uid and
 * chmod 0600) or for a directory (which made the start fail with EISDIR until fixed by hand).
 */
describe("a unit's root cannot disturb the next start of ums serve", () => {
  let canary: string;
  let serve: ServeProcess;
  /** A shell script run as root in the unit `loop`. */
  const asRoot = (script: string) => execHttp(serve.base, serve.token, "loop", ["sh", "-c", script], { user: "root" });

  before(async () => {
    canary = await mkdtemp(join(tmpdir(), "ums-canary-"));
    await writeFile(join(canary, "victim"), "host file\n", { mode: 0o640 });
    await chown(canary, UID_SHIFT, UID_SHIFT);
    serve = await prepareServe({ name: "restart-boundary", org: "attacker" });
    await serve.start();
  });

  after(async () => {
    if (serve && !serve.running()) await serve.start().catch(() => undefined);
    await serve?.close(["loop"], removeServerHostResources);
    await rm(canary, { recursive: true, force: true });
  });

  it("keeps host files as they were and starts every time", async () => {
    const created = await serve.api("POST", "/v1/units", { name: "loop" });
    assert.equal(created.status, 201);
    const victim = join(canary, "victim");
    const restart = async () => {
      await serve.stop("SIGKILL");
      await serve.start();
    };
    // Finding 4: a directory where the host socket was made the next start fail with EISDIR.
    const dir = await asRoot("rm -f /.unit/run/host.sock 2>/dev/null; mkdir /.unit/run/host.sock 2>/dev/null; echo $?");
    await restart();
    assert.equal(dir.stdout.toString(), "1\n", "mkdir in /.unit/run fails");
    // The attack runs on its own for 60 s at most (bounded), as root in the unit.
    const loop = [
      "end=$(($(date +%s) + 60)); n=0",
      'while [ "$(date +%s)" -lt "$end" ]; do',
      "  rm -r /.unit/run/host.sock 2>/dev/null && n=$((n + 1))",
      `  ln -sfn ${victim} /.unit/run/host.sock 2>/dev/null && n=$((n + 1))`,
      "  rm -f /.unit/run/host.sock 2>/dev/null; mkdir /.unit/run/host.sock 2>/dev/null && n=$((n + 1))",
      "  echo $n > /tmp/swaps",
      "done",
    ].join("\n");
    const started = await asRoot(`setsid sh -c '${loop}' </dev/null >/dev/null 2>&1 & echo started`);
    assert.equal(started.stdout.toString(), "started\n");

    // Finding 3: restarts while the loop runs leave the host file alone.
    for (let round = 0; round < 3; round++) {
      await restart();
      const st = await stat(victim);
      assert.equal(st.uid, 0, "the host file keeps its owner");
      assert.equal(st.mode & 0o777, 0o640, "the host file keeps its mode");
    }
    {
      const api = await asRoot(
        "curl -s --unix-socket /.unit/api.sock http://unit/v1/checkpoints; echo; cat /tmp/swaps",
      );
      const [list, swaps] = api.stdout.toString().split("\n");
      assert.match(list ?? "", /^\[/, "the internal API answers: the host socket is in place");
      assert.equal(swaps, "0", "no swap of /.unit/run/host.sock ever succeeded");
    }
  });
});
