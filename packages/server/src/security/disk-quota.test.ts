// Issue #20 part 4: a unit's disk is limited (resources `disk.limit_mb`, the create's
// `config.storage_gb`), live, by a btrfs quota group of its own (simple quotas: what the unit wrote,
// its image not counted). A unit that fills it gets EDQUOT (507 through the files API) and nothing
// else is affected; what its checkpoints keep counts (deleting such a file frees nothing); files
// can still be deleted; a restore keeps the limit, a fork has its own.
import assert from "node:assert/strict";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { DEFAULT_UNIT_DISK_MB } from "../config.js";
import { run } from "../runtime/exec/host-command.js";
import { testImage } from "../runtime/image/test-image.js";
import { listQgroups } from "../runtime/storage/btrfs.js";
import { execHttp } from "../testing/exec-client.js";
import { startSqliteServer, type TestServer } from "../testing/server.js";

const MiB = 1024 * 1024;

describe("disk quotas of units", { timeout: 300_000 }, () => {
  let s: TestServer;
  let token: string;
  let unitsDir: string;
  const ids = new Map<string, string>();

  before(async () => {
    s = await startSqliteServer();
    token = await s.token("disk");
    unitsDir = join((await testImage()).pool.path, "units");
    for (const name of ["full", "other"]) ids.set(name, await s.unit(token, name));
  });
  after(() => s?.close());

  const sh = async (unit: string, script: string) => {
    const r = await execHttp(s.url, token, unit, ["sh", "-c", script], { user: "root" });
    return { code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() };
  };
  /** The unit's quota group as the host counts it: bytes charged to it and its limit. */
  const qgroup = async (unitId: string) => {
    const pool = join(unitsDir, "..");
    await run("btrfs", ["filesystem", "sync", pool]);
    const group = (await readFile(join(unitsDir, unitId, "qgroup"), "utf8")).trim();
    const found = (await listQgroups(pool)).find((g) => g.id === group);
    assert.ok(found, `quota group ${group} of ${unitId}`);
    return found;
  };
  /** What `df` in the unit says of its root filesystem, in bytes. */
  const df = async (unit: string, path = "/") => {
    const r = await sh(unit, `sync; df -B1 --output=size,used,avail ${path} | tail -n 1`);
    assert.equal(r.code, 0, r.out + r.err);
    const [size, used, avail] = r.out.trim().split(/\s+/).map(Number);
    return { size: size as number, used: used as number, avail: avail as number };
  };
  const setDisk = (unit: string, mb: number) =>
    s.api("POST", `/v1/units/${unit}/policy/resources`, { token, json: { disk: { limit_mb: mb } } });
  /** Writes random (incompressible) data to `path` until the disk refuses; the bytes that made it. */
  const fill = async (unit: string, path: string, maxMb = 2000) => {
    const r = await sh(
      unit,
      `dd if=/dev/urandom of=${path} bs=1M count=${maxMb} 2>&1; echo "rc=$?"; sync; stat -c %s ${path}`,
    );
    const lines = r.out.trim().split("\n");
    return {
      bytes: Number(lines.at(-1)),
      refused: /rc=[1-9]/.test(r.out) && /Disk quota exceeded/.test(r.out),
      out: r.out,
    };
  };

  it("shows the default disk size and takes a new one; the unit fills it to within 5 %, then gets EDQUOT", async () => {
    const before = await s.api("GET", "/v1/units/full/policy/resources", { token });
    assert.equal(before.status, 200);
    assert.equal(before.body.disk.limit_mb, DEFAULT_UNIT_DISK_MB, "the server's default disk size");
    const set = await setDisk("full", 400);
    assert.equal(set.status, 200, set.text);
    assert.equal(set.body.disk.limit_mb, 400);

    assert.equal((await sh("full", "true")).code, 0);
    const id = ids.get("full") as string;
    const base = await qgroup(id);
    assert.equal(base.limit, 400 * MiB, "the limit is the unit's quota group's");
    assert.ok(base.referenced < 50 * MiB, `its image's files are not charged to it: ${base.referenced}`);
    // `df` in the unit shows its disk: the limit as its size, what it wrote as used.
    const empty = await df("full");
    console.log(`df in the unit: size ${empty.size} B for a limit of ${400 * MiB} B`);
    assert.ok(Math.abs(empty.size / (400 * MiB) - 1) <= 0.05, `df's size is the limit: ${JSON.stringify(empty)}`);
    assert.ok(empty.used < 50 * MiB && empty.avail > 350 * MiB, JSON.stringify(empty));
    assert.equal((await df("full", "/dev/shm")).size, 64 * 1024 * 1024, "other filesystems keep their own figures");
    // statfs(2) as well as statvfs(3): `stat -f`, and node (libuv) in the unit.
    const statf = await sh(
      "full",
      `stat -f -c '%b %S' /; /.unit/bin/node -e 'const s = require("fs").statfsSync("/"); console.log(s.blocks, s.bsize)'`,
    );
    for (const line of statf.out.trim().split("\n")) {
      const [blocks, blockSize] = line.split(" ").map(Number);
      assert.equal((blocks as number) * (blockSize as number), empty.size, `agrees with df: ${statf.out}`);
    }
    assert.equal(statf.out.trim().split("\n").length, 2, statf.out + statf.err);
    const f = await fill("full", "/root/fill");
    assert.ok(f.refused, `dd was refused with EDQUOT: ${f.out}`);
    const measured = base.referenced + f.bytes;
    const ratio = measured / (400 * MiB);
    console.log(
      `disk limit 400 MiB; measured in the unit ${(measured / MiB).toFixed(1)} MiB (files written at boot ${(base.referenced / MiB).toFixed(1)} MiB + written ${(f.bytes / MiB).toFixed(1)} MiB): ${(ratio * 100).toFixed(1)} %`,
    );
    assert.ok(Math.abs(ratio - 1) <= 0.05, `within 5 % of the limit: ${ratio}`);
    const full = await df("full");
    assert.ok(full.avail < 20 * MiB, `df of a full unit shows (almost) nothing left: ${JSON.stringify(full)}`);
    assert.ok(Math.abs(full.used / (400 * MiB) - 1) <= 0.05, `and its disk used: ${JSON.stringify(full)}`);

    // Through the files API: 507 with the errno.
    const w = await s.api("PUT", `/v1/units/full/fs/write?path=${encodeURIComponent("/home/unit/more")}&workingDir=/`, {
      token,
      body: new Uint8Array(4 * MiB).map((_, i) => (i * 7919) % 251),
    });
    assert.equal(w.status, 507, w.text);
    assert.equal(w.body.code, "EDQUOT");
    assert.match(w.body.error, /disk quota exceeded/);
  });

  it("leaves every other unit its own disk, and the server its API", async () => {
    const r = await sh("other", "dd if=/dev/urandom of=/root/mine bs=1M count=50 2>&1 && sync && echo ok");
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /ok/);
    assert.equal((await s.api("GET", "/v1/units/other", { token })).status, 200);
  });

  it("a full unit can still delete files, and a larger limit applies at once, live", async () => {
    const grown = await setDisk("full", 460);
    assert.equal(grown.status, 200);
    assert.equal((await qgroup(ids.get("full") as string)).limit, 460 * MiB);
    assert.ok(Math.abs((await df("full")).size / (460 * MiB) - 1) <= 0.01, "df shows the new size at once");
    const more = await sh("full", "dd if=/dev/urandom of=/root/more bs=1M count=40 2>&1 && echo ok");
    assert.equal(more.code, 0, `40 MiB more fit: ${more.out}`);
    const rm = await sh("full", "rm /root/fill /root/more && sync && echo gone");
    assert.equal(rm.code, 0, rm.out);
  });

  it("checkpoints do not make room: after one, the unit still fills only its limit", async () => {
    const first = await fill("full", "/root/a", 200);
    assert.equal(first.refused, false, first.out);
    const cp = await s.api("POST", "/v1/units/full/checkpoint", { token, json: { comment: "full of a" } });
    assert.equal(cp.status, 200);
    assert.equal((await sh("full", "rm /root/a && sync")).code, 0);
    const id = ids.get("full") as string;
    const base = await qgroup(id);
    const again = await fill("full", "/root/b");
    assert.ok(again.refused, again.out);
    const ratio = (base.referenced + again.bytes) / (460 * MiB);
    assert.ok(base.referenced >= 200 * MiB, `the 200 MiB the checkpoint keeps still count: ${base.referenced}`);
    assert.ok(Math.abs(ratio - 1) <= 0.05, `still the limit with a checkpoint holding 200 MiB: ${ratio}`);
    assert.equal((await sh("full", "rm /root/b && sync")).code, 0);
  });

  it("a restore and a fork keep the disk limit; storage_gb at create is the unit's disk.limit_mb", async () => {
    const list = await s.api("GET", "/v1/units/full/checkpoints", { token });
    const cp = list.body.find((c: { comment?: string }) => c.comment === "full of a") ?? list.body[0];
    assert.ok(cp, list.text);
    const restored = await s.api("POST", `/v1/units/full/checkpoints/${cp.id}/restore`, { token });
    assert.equal(restored.status, 200, restored.text);
    assert.equal((await sh("full", "true")).code, 0);
    assert.equal((await qgroup(ids.get("full") as string)).limit, 460 * MiB, "the restored unit's limit");

    const forked = await s.api("POST", "/v1/units", {
      token,
      json: { name: "forked", from: { unit: "full", checkpoint: cp.id }, config: { storage_gb: 1 } },
    });
    assert.equal(forked.status, 201, forked.text);
    assert.equal(forked.body.config.storage_gb, 1);
    assert.equal((await s.api("GET", "/v1/units/forked/policy/resources", { token })).body.disk.limit_mb, 1024);
    assert.equal((await sh("forked", "true")).code, 0);
    assert.equal((await qgroup(forked.body.id)).limit, 1024 * MiB);
    assert.ok(Math.abs((await df("forked")).size / (1024 * MiB) - 1) <= 0.01, "a fork's df shows its own disk");

    const sized = await s.api("POST", "/v1/units", { token, json: { name: "sized", config: { storage_gb: 3 } } });
    assert.equal(sized.status, 201, sized.text);
    assert.equal(sized.body.config.storage_gb, 3);
    assert.equal((await sh("sized", "true")).code, 0);
    assert.equal((await qgroup(sized.body.id)).limit, 3 * 1024 * MiB);
  });

  it("refuses a disk size below 128 MiB with a 400 naming the field", async () => {
    const r = await setDisk("other", 10);
    assert.equal(r.status, 400);
    assert.match(r.text, /disk/);
  });
});
