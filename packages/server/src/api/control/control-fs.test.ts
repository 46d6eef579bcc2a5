import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import { ErrorCode, FS_RESERVED_PATH } from "@ums/protocol";
import { ControlClient } from "../../testing/control-client.js";
import { fsUnit, HOME, UNIT } from "../../testing/fs-unit.js";
import { MAX_FILE_FRAME } from "./fs-ops.js";

// The control websocket's filesystem ops (api/control/fs-ops.ts), sent as the Go client sends them
// (plain op.start, URL-encoded args, the file as one frame), against a real unit: each answer equals
// what the /fs/* route answers for the same request, errors and refused paths included.

describe("control websocket: filesystem ops", () => {
  const u = fsUnit();
  let c: ControlClient;
  const op = (name: string, args: Record<string, string>, file?: Buffer) =>
    c.fs(name, { workingDir: HOME, ...args }, file);
  /** The same answer, its paths under `a` spelled as under `b`. */
  const swap = (v: unknown, a: string, b: string) => JSON.parse(JSON.stringify(v).replaceAll(a, b));

  before(async () => {
    c = await ControlClient.open(`${u.s.url.replace("http", "ws")}/v1/sprites/${UNIT}/control`, u.token);
  });
  after(() => c?.close());

  it("writes (parents made by default, as the Go client expects) and reads back what the routes read", async () => {
    const body = Buffer.from("control bytes \u0000\u00ff end");
    const w = await op("fs.write", { path: "cw/deep/a.bin", mode: "0640" }, body);
    assert.equal(w.end.type, "op.complete");
    const routed = await u.write("rw/deep/a.bin", body, { mkdirParents: true, mode: "0640" });
    assert.deepEqual(w.answer, swap(routed.body, "/rw/", "/cw/"));
    assert.deepEqual(w.answer, { path: `${HOME}/cw/deep/a.bin`, size: body.length, mode: "0640" });
    assert.equal((await u.read("cw/deep/a.bin")).text, body.toString());

    const r = await op("fs.read", { path: "cw/deep/a.bin" });
    assert.deepEqual(r.answer, { path: `${HOME}/cw/deep/a.bin`, size: body.length });
    assert.deepEqual(r.bytes, body);
    assert.equal(r.end.type, "op.complete");
    const part = await op("fs.read", { path: "cw/deep/a.bin", start: "2", end: "9" });
    assert.deepEqual(part.bytes, body.subarray(2, 9));

    const noParents = await op("fs.write", { path: "cw/none/b.txt", mkdirParents: "false" }, Buffer.from("x"));
    const routedNo = await u.write("rw/none/b.txt", "x");
    assert.deepEqual(noParents.answer, swap(routedNo.body, "/rw/", "/cw/"));
    assert.equal(noParents.answer.code, "ENOENT");
    assert.equal(noParents.end.type, "op.error");
    assert.equal(noParents.end.args.status, routedNo.status);
  });

  it("lists (and stats, as the Go client does, by listing a file) exactly as GET /fs/list", async () => {
    await u.write("ls/one.txt", "1", { mkdir: true });
    await u.write("ls/sub/two.txt", "22", { mkdir: true });
    const lists: Record<string, string>[] = [{ path: "ls" }, { path: "ls", recursive: "true" }, { path: "ls/one.txt" }];
    for (const args of lists) {
      const viaControl = await op("fs.list", args);
      const routed = await u.list(args.path as string, args.recursive ? { recursive: true } : {});
      assert.equal(routed.status, 200);
      assert.deepEqual(viaControl.answer, routed.body, JSON.stringify(args));
    }
    const stat = await op("fs.list", { path: "ls/one.txt" });
    assert.equal(stat.answer.entries[0].name, "one.txt");
    assert.equal(stat.answer.entries[0].size, 1);
    // No path: the working directory.
    const home = await c.fs("fs.list", { workingDir: `${HOME}/ls` });
    assert.deepEqual(home.answer, (await u.list("ls")).body);
  });

  it("chmod, chown, copy, rename and delete answer as the routes do", async () => {
    for (const dir of ["c", "r"]) await u.write(`ops-${dir}/f.txt`, "data", { mkdir: true });
    const same = async (name: string, control: Record<string, string>, route: Record<string, unknown>) => {
      const viaControl = await op(name, control);
      const routed = await u.post(name.slice(3), route);
      assert.equal(routed.status, 200, routed.text);
      assert.equal(viaControl.end.type, "op.complete", JSON.stringify(viaControl.answer));
      assert.deepEqual(viaControl.answer, swap(routed.body, "/ops-r", "/ops-c"), name);
      return viaControl.answer;
    };
    const chmod = await same("fs.chmod", { path: "ops-c/f.txt", mode: "0600" }, { path: "ops-r/f.txt", mode: "0600" });
    assert.equal(chmod.affected[0].mode, "0600");
    await same(
      "fs.copy",
      { source: "ops-c/f.txt", dest: "ops-c/g.txt" },
      { source: "ops-r/f.txt", dest: "ops-r/g.txt" },
    );
    await same(
      "fs.rename",
      { source: "ops-c/g.txt", dest: "ops-c/h.txt" },
      { source: "ops-r/g.txt", dest: "ops-r/h.txt" },
    );
    await same(
      "fs.chown",
      { path: "ops-c/f.txt", uid: "0", gid: "0", asRoot: "true" },
      { path: "ops-r/f.txt", uid: 0, gid: 0, asRoot: true },
    );
    await same(
      "fs.copy",
      { source: "ops-c", dest: "ops-c2", recursive: "true", preserveAttrs: "true", asRoot: "true" },
      { source: "ops-r", dest: "ops-r2", recursive: true, preserveAttrs: true, asRoot: true },
    );
    const del = await same(
      "fs.delete",
      { path: "ops-c2", recursive: "true", asRoot: "true" },
      { path: "ops-r2", recursive: true, asRoot: true },
    );
    assert.ok(del.count >= 1);
    assert.equal((await u.list("ops-c2")).status, 404);
  });

  it("refuses bad input as the routes do, naming the field, and goes on", async () => {
    const bad = await op("fs.chmod", { path: "x", mode: "rwx" });
    assert.equal(bad.answer.code, ErrorCode.Validation);
    assert.match(bad.answer.error, /mode: must be an octal permission string/);
    assert.equal(bad.end.type, "op.error");
    assert.equal(bad.end.args.status, 400);
    const rel = await c.fs("fs.list", { path: "x", workingDir: "relative" });
    assert.match(rel.answer.error, /workingDir/);
    const extra = await op("fs.delete", { path: "x", force: "true" });
    assert.match(extra.answer.error, /force: is not a known field/);
    const chown = await op("fs.chown", { path: "x" });
    assert.match(chown.answer.error, /uid: uid or gid is required/);
    const missing = await op("fs.read", { path: "no/such/file" });
    const routed = await u.read("no/such/file");
    assert.deepEqual(missing.answer, routed.body);
    assert.equal(missing.end.args.status, 404);
    assert.equal((await op("fs.list", { path: "." })).end.type, "op.complete");
  });

  it("never leaves the unit nor reaches its /.unit: same refusals as the routes", async () => {
    await u.sh("ln -sfn /.unit/run ~/to-run && ln -sfn /.unit ~/to-unit", "unit");
    const cases: Array<[string, Record<string, string>]> = [
      ["fs.read", { path: "/.unit/run/agent.sock" }],
      ["fs.read", { path: "../../.unit/run/agent.sock" }],
      ["fs.list", { path: "to-run" }],
      ["fs.list", { path: "to-unit/run" }],
      ["fs.delete", { path: "/.unit/logs", recursive: "true", asRoot: "true" }],
      ["fs.chmod", { path: "to-unit", mode: "0777", asRoot: "true" }],
      ["fs.rename", { source: "/.unit/policy", dest: "stolen", asRoot: "true" }],
      ["fs.copy", { source: "to-run/host.sock", dest: "copied", asRoot: "true" }],
    ];
    for (const [name, args] of cases) {
      const viaControl = await op(name, args);
      assert.equal(viaControl.end.type, "op.error", `${name} ${JSON.stringify(args)}`);
      assert.equal(viaControl.answer.code, FS_RESERVED_PATH, `${name} ${JSON.stringify(viaControl.answer)}`);
      assert.equal(viaControl.end.args.status, 403);
      // The route refuses it alike.
      const typed = Object.fromEntries(Object.entries(args).map(([k, v]) => [k, v === "true" ? true : v]));
      const routed =
        name === "fs.read"
          ? await u.read(args.path as string)
          : name === "fs.list"
            ? await u.list(args.path as string)
            : await u.post(name.slice(3), typed);
      assert.deepEqual(viaControl.answer, routed.body, `${name} ${JSON.stringify(args)}`);
    }
    const w = await op("fs.write", { path: "/.unit/run/planted", asRoot: "true" }, Buffer.from("x"));
    assert.equal(w.answer.code, FS_RESERVED_PATH);
    // `..` above the root stays at the root (resolved as /fs/* resolves it): the unit's /etc, not the host's.
    const etc = await op("fs.read", { path: "../../../../../../etc/hostname" });
    assert.deepEqual(etc.bytes, Buffer.from((await u.read("/etc/hostname")).text));
  });

  it("answers a file too large for one frame with op.error, and reads it in ranges", async () => {
    await u.sh(`truncate -s ${MAX_FILE_FRAME + 1} ~/big.bin`);
    const big = await op("fs.read", { path: "big.bin" });
    assert.equal(big.answer.code, ErrorCode.PayloadTooLarge);
    assert.equal(big.end.args.status, 413);
    const tail = await op("fs.read", { path: "big.bin", start: String(MAX_FILE_FRAME - 3) });
    assert.equal(tail.bytes?.length, 4);
  });
});
