import assert from "node:assert/strict";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { run } from "../runtime/exec/host-command.js";
import { testImage } from "../runtime/image/test-image.js";
import { execHttp } from "../testing/exec-client.js";
import { removeServerHostResources } from "../testing/host-cleanup.js";
import { prepareServe, type ServeProcess } from "../testing/serve-process.js";
import { startSqliteServer, type TestServer } from "../testing/server.js";

/**
 * Spec section 8: a unit's recent checkpoints at /.unit/checkpoints are read-only mounts, not only
 * read-only snapshots: root in the unit sees `ro` on every one of them in its mountinfo and cannot
 * write, create, remove or remount them read-write. A checkpoint taken while the unit runs used to
 * appear as a `rw` mount (the host remounted only its own copy read-only).
 */

/** Run as root in the unit: every checkpoint mount with its flags, then the result of each attack. */
const PROBE = [
  'awk \'$5 ~ "^/.unit/checkpoints" { split($6, f, ","); print "mount", $5, f[1] }\' /proc/self/mountinfo',
  "for d in /.unit/checkpoints/v*; do",
  '  echo x > "$d/home/unit/f" 2>/dev/null && echo "wrote $d"',
  '  touch "$d/new" 2>/dev/null && echo "touched $d"',
  '  rm -rf "$d/etc" 2>/dev/null; test -d "$d/etc" || echo "removed $d/etc"',
  '  mount -o remount,rw "$d" 2>/dev/null && echo "remounted $d"',
  '  mount -o remount,bind,rw "$d" 2>/dev/null && echo "bind-remounted $d"',
  '  umount "$d" 2>/dev/null && echo "unmounted $d"',
  "done",
  "mkdir /.unit/checkpoints/x 2>/dev/null && echo mkdir",
  "mount -o remount,rw /.unit/checkpoints 2>/dev/null && echo 'remounted the view'",
  "echo end",
].join("\n");

interface Probe {
  /** Checkpoint id → its mount flag (`ro`/`rw`) as the unit sees it. */
  mounts: Map<string, string>;
  /** Attacks that worked. */
  breaches: string[];
}

function parseProbe(out: string): Probe {
  const lines = out.trim().split("\n");
  assert.equal(lines.at(-1), "end", out);
  const mounts = new Map<string, string>();
  const breaches: string[] = [];
  for (const l of lines.slice(0, -1)) {
    const m = /^mount \/\.unit\/checkpoints(?:\/(\S+))? (\w+)$/.exec(l);
    if (m) {
      mounts.set(m[1] ?? "", m[2] ?? "");
    } else breaches.push(l);
  }
  return { mounts, breaches };
}

/** Asserts that the unit sees exactly `ids` (and the view itself), each a read-only mount it cannot change. */
async function assertReadOnly(probe: () => Promise<string>, ids: string[]): Promise<void> {
  const { mounts, breaches } = parseProbe(await probe());
  assert.deepEqual([...mounts.keys()].sort(), ["", ...ids].sort(), "the view and one mount per checkpoint");
  for (const [id, flag] of mounts) assert.equal(flag, "ro", `/.unit/checkpoints/${id} is mounted ${flag}`);
  assert.deepEqual(breaches, [], "root in the unit changed its checkpoints");
}

describe("checkpoint mounts are read-only in the unit (spec 8)", () => {
  let s: TestServer;
  let token: string;
  const probe = (unit: string) => async () =>
    (await execHttp(s.url, token, unit, ["sh", "-c", PROBE], { user: "root" })).stdout.toString();
  const checkpoint = async (unit: string): Promise<string> => {
    const r = await s.api("POST", `/v1/units/${unit}/checkpoint`, { token, json: {} });
    const last = JSON.parse(r.text.trim().split("\n").at(-1) ?? "{}");
    assert.equal(last.type, "complete", r.text);
    return last.id;
  };
  const wake = async (unit: string) =>
    assert.equal((await execHttp(s.url, token, unit, ["true"])).exitCode, 0, `${unit} runs`);

  before(async () => {
    s = await startSqliteServer();
    token = await s.token("ro-views");
  });
  after(() => s?.close());

  it("taken while cold, while running, after a restore and in a fork", async () => {
    await s.unit(token, "box");
    assert.equal(await checkpoint("box"), "v0", "taken cold: bound at the next boot");
    await wake("box");
    await assertReadOnly(probe("box"), ["v0"]);
    assert.equal(await checkpoint("box"), "v1", "taken while running: bound into the running unit");
    await assertReadOnly(probe("box"), ["v0", "v1"]);

    const restore = await s.api("POST", "/v1/units/box/checkpoints/v0/restore", { token });
    assert.equal(JSON.parse(restore.text.trim().split("\n").at(-1) ?? "{}").type, "complete", restore.text);
    await wake("box");
    await assertReadOnly(probe("box"), ["v0", "v1", "v2"]);

    const fork = await s.api("POST", "/v1/units", {
      token,
      json: { name: "fork", from: { unit: "box", checkpoint: "v1" } },
    });
    assert.equal(fork.status, 201, fork.text);
    await wake("fork");
    const own = await checkpoint("fork");
    await assertReadOnly(probe("fork"), [own]);
  });
});

describe("re-adoption makes read-write checkpoint mounts of an older ums read-only", () => {
  let serve: ServeProcess;
  const probe = async () =>
    (await execHttp(serve.base, serve.token, "kept", ["sh", "-c", PROBE], { user: "root" })).stdout.toString();

  before(async () => {
    serve = await prepareServe({ name: "ro-views", org: "ro-views" });
    await serve.start();
  });
  after(() => serve?.close(["kept"], removeServerHostResources));

  it("binds a read-only mount in place of a writable one when ums starts", async () => {
    assert.equal((await serve.api("POST", "/v1/units", { name: "kept" })).status, 201);
    const id = ((await (await serve.api("GET", "/v1/units/kept")).json()) as { id: string }).id;
    assert.equal((await execHttp(serve.base, serve.token, "kept", ["true"])).exitCode, 0);
    const cp = await serve.api("POST", "/v1/units/kept/checkpoint", {});
    assert.match(await cp.text(), /"complete"/);
    await assertReadOnly(probe, ["v0"]);

    // What ums before this fix did: bind (propagated read-write), then remount the host's copy read-only.
    const target = join(serve.dataDir, "run", id, "checkpoints", "v0");
    const snapshot = join((await testImage()).pool.path, "units", id, "checkpoints", "v0");
    await run("umount", ["-l", target]);
    await run("mount", ["--bind", snapshot, target]);
    await run("mount", ["-o", "remount,bind,ro", target]);
    const legacy = parseProbe(await probe());
    assert.equal(legacy.mounts.get("v0"), "rw", "the unit sees the older ums's bind read-write");

    await serve.stop("SIGKILL");
    await serve.start();
    await assertReadOnly(probe, ["v0"]);
  });
});
