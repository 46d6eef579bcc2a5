// `ums cp|ls|rm`, `ums checkpoint …`, `ums fork`, `ums services`, `ums service …`, `ums url`
// against a real server with real units.

import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdir, readdir, readFile, stat, writeFile } from "node:fs/promises";
import { join, relative } from "node:path";
import { after, before, describe, it } from "node:test";
import { startUserCli, type UserCli } from "../testing/user-cli.js";

/** Every file under `dir` with its bytes and mode, by relative path. */
async function tree(dir: string): Promise<Map<string, { bytes: Buffer; mode: number } | "dir">> {
  const out = new Map<string, { bytes: Buffer; mode: number } | "dir">();
  const walk = async (d: string) => {
    for (const e of await readdir(d, { withFileTypes: true })) {
      const p = join(d, e.name);
      if (e.isDirectory()) {
        out.set(relative(dir, p), "dir");
        await walk(p);
      } else out.set(relative(dir, p), { bytes: await readFile(p), mode: (await stat(p)).mode & 0o777 });
    }
  };
  await walk(dir);
  return out;
}

describe("ums cp, ls, rm, checkpoint, fork, services, url", () => {
  let cli: UserCli;
  before(async () => {
    cli = await startUserCli();
    await cli.ok(["login", "--url", cli.server.url, "--token", await cli.token("files-org")]);
    await cli.ok(["create", "box"]);
  });
  after(async () => {
    await cli?.close();
  });

  it("cp -r round-trips a directory tree byte for byte (modes too); ls and rm", async () => {
    const src = join(cli.home, "src");
    await mkdir(join(src, "sub", "deeper"), { recursive: true });
    await mkdir(join(src, "empty"));
    await writeFile(join(src, "a.txt"), "hello\n");
    await writeFile(join(src, "run.sh"), "#!/bin/sh\necho hi\n", { mode: 0o755 });
    await writeFile(join(src, "sub", "big.bin"), randomBytes(6 * 1024 * 1024 + 17));
    await writeFile(join(src, "sub", "deeper", "nul.bin"), Buffer.from([0, 0xff, 0x80, 0]));
    await writeFile(join(src, "sub", "deeper", "empty-file"), "");

    const up = await cli.run(["cp", "-r", src, "box:/home/unit/copy"]);
    assert.equal(up.code, 0, up.stderr);
    assert.equal(await cli.ok(["exec", "box", "--", "cat", "copy/a.txt"]), "hello\n");
    assert.equal(
      await cli.ok(["exec", "box", "--", "stat", "-c", "%a %s", "copy/run.sh", "copy/sub/big.bin"]),
      `755 18\n644 ${6 * 1024 * 1024 + 17}\n`,
    );

    const back = join(cli.home, "back");
    const down = await cli.run(["cp", "-r", "box:copy", back]);
    assert.equal(down.code, 0, down.stderr);
    const want = await tree(src);
    const got = await tree(back);
    assert.deepEqual([...got.keys()].sort(), [...want.keys()].sort());
    for (const [k, v] of want) assert.deepEqual(got.get(k), v, k);

    // Into an existing directory: the source's name is kept, as cp does; a single file too.
    await cli.ok(["cp", join(src, "a.txt"), "box:/tmp"]);
    assert.equal(await cli.ok(["exec", "box", "--", "cat", "/tmp/a.txt"]), "hello\n");
    await cli.ok(["cp", "box:/tmp/a.txt", back]);
    assert.equal(await readFile(join(back, "a.txt"), "utf8"), "hello\n");
    // A progress bar when asked for, on stderr.
    const bar = await cli.run(["cp", "--progress", join(src, "sub", "big.bin"), "box:/tmp/big.bin"]);
    assert.equal(bar.code, 0, bar.stderr);
    assert.match(bar.stderr, /big\.bin \[.*\] 100% \| 6\/6 MB/);

    const ls = await cli.ok(["ls", "box:copy"]);
    assert.match(ls.split("\n")[0] ?? "", /^MODE\s+SIZE\s+MODIFIED\s+NAME$/);
    assert.match(ls, /^\S+\s+6\s+\S+ \S+\s+a\.txt$/m);
    assert.match(ls, /\s+sub\/$/m);
    const lsJson = JSON.parse(await cli.ok(["ls", "box:copy/sub", "-R", "--json"]));
    assert.deepEqual(
      lsJson.map((e: { path: string }) => e.path),
      [
        "/home/unit/copy/sub/big.bin",
        "/home/unit/copy/sub/deeper",
        "/home/unit/copy/sub/deeper/empty-file",
        "/home/unit/copy/sub/deeper/nul.bin",
      ],
    );

    const notDir = await cli.run(["cp", src, "box:/tmp/x"]);
    assert.equal(notDir.code, 2);
    assert.match(notDir.stderr, /is a directory: pass -r/);
    const both = await cli.run(["cp", "a", "b"]);
    assert.equal(both.code, 2);
    const missing = await cli.run(["cp", "box:/nope", back]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /^ums: ENOENT: /);

    const refused = await cli.run(["rm", "box:copy"]);
    assert.equal(refused.code, 1, refused.stderr);
    assert.equal(await cli.ok(["rm", "-r", "box:copy"]), "removed 9 entries\n");
    assert.equal((await cli.run(["ls", "box:copy"])).code, 1);
  });

  it("checkpoint create/list/restore/delete and fork", async () => {
    await cli.ok(["exec", "box", "--", "sh", "-c", "echo one > state"]);
    const created = await cli.run(["checkpoint", "create", "box", "-m", "first state"]);
    assert.equal(created.code, 0, created.stderr);
    const id = created.stdout.toString().trim();
    assert.match(id, /^v\d+$/);
    await cli.ok(["exec", "box", "--", "sh", "-c", "echo two > state"]);

    const list = JSON.parse(await cli.ok(["checkpoint", "list", "box", "--json"]));
    assert.ok(list.some((c: { id: string; comment: string }) => c.id === id && c.comment === "first state"));
    assert.match(await cli.ok(["checkpoint", "list", "box"]), new RegExp(`^${id}\\s+\\S+\\s+.*first state$`, "m"));

    const restored = await cli.ok(["checkpoint", "restore", "box", id, "-q"]);
    assert.match(restored, new RegExp(`^restored ${id} \\(the state before is v\\d+\\)\\n$`));
    assert.equal(await cli.ok(["exec", "box", "--", "cat", "state"]), "one\n");

    const fork = await cli.ok(["fork", "box", "box-fork"]);
    assert.match(fork, /^created box-fork from box@v\d+ /);
    assert.equal(await cli.ok(["exec", "box-fork", "--", "cat", "state"]), "one\n");
    await cli.ok(["fork", "box", "box-old", "--checkpoint", id]);
    assert.equal(await cli.ok(["exec", "box-old", "--", "cat", "state"]), "one\n");

    const first = list[0].id as string;
    if (first !== id) {
      assert.equal(await cli.ok(["checkpoint", "delete", "box", first]), `deleted checkpoint ${first} of box\n`);
    }
    const gone = await cli.run(["checkpoint", "restore", "box", "v999"]);
    assert.equal(gone.code, 1);
    assert.match(gone.stderr, /^ums: UMS_CHECKPOINT_NOT_FOUND: /);
  });

  it("service put, services, logs, restart, rm; url --public/--private", async () => {
    const put = await cli.ok([
      "service",
      "put",
      "box",
      "ticker",
      "-e",
      "WORD=tick",
      "--",
      "sh",
      "-c",
      'echo "$WORD-start"; echo warn >&2; exec sleep 600',
    ]);
    assert.match(put, /^service ticker: \w+\n$/);
    // The service writes its first lines as it starts; read them back through logs.
    let logs = "";
    for (let i = 0; i < 100 && !logs.includes("tick-start"); i++) {
      logs = (await cli.run(["service", "logs", "box", "ticker"])).stdout.toString();
      if (!logs.includes("tick-start")) await new Promise((r) => setTimeout(r, 200));
    }
    assert.match(logs, /tick-start/);
    const table = await cli.ok(["services", "box"]);
    assert.match(table, /^ticker\s+running\s+\d+\s+-\s+sh -c /m);
    const json = JSON.parse(await cli.ok(["services", "box", "--json"]));
    assert.deepEqual(
      json.map((s: { name: string; cmd: string }) => [s.name, s.cmd]),
      [["ticker", "sh"]],
    );

    const restarted = await cli.run(["service", "restart", "box", "ticker"]);
    assert.equal(restarted.code, 0, restarted.stderr);
    assert.match(restarted.stdout.toString(), /tick-start/);
    assert.equal(await cli.ok(["service", "rm", "box", "ticker"]), "removed service ticker\n");
    const none = await cli.run(["service", "logs", "box", "ticker"]);
    assert.equal(none.code, 1);
    assert.match(none.stderr, /^ums: UMS_SERVICE_NOT_FOUND: /);
    const noCmd = await cli.run(["service", "put", "box", "x"]);
    assert.equal(noCmd.code, 2);

    const url = await cli.ok(["url", "box"]);
    assert.match(url, /^http:\/\/box-\S+\n$/);
    assert.equal(JSON.parse(await cli.ok(["url", "box", "--public", "--json"])).auth, "public");
    assert.equal(JSON.parse(await cli.ok(["info", "box", "--json"])).urlSettings.auth, "public");
    assert.equal(JSON.parse(await cli.ok(["url", "box", "--private", "--json"])).auth, "unit");
  });
});
