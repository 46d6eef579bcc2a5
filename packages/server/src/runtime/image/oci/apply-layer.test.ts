import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { chmod, lstat, mkdir, readdir, readFile, readlink, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { Readable } from "node:stream";
import { describe, it } from "node:test";
import { suiteTempDir } from "../../../testing/temp-dir.js";
import { type ApplyStats, applyLayer } from "./apply-layer.js";
import { ImageArchiveError } from "./errors.js";
import { gzip, makeTar, sha256, type TarItem } from "./test-archives.js";

const SHIFT = 100000;
const RANGE = 65536;
const opts = { uidShift: SHIFT, uidRange: RANGE };

async function apply(
  root: string,
  items: TarItem[] | Buffer,
  extra: { expectDiffId?: string } = {},
): Promise<ApplyStats> {
  const data = Buffer.isBuffer(items) ? items : await makeTar(items);
  return applyLayer(root, Readable.from([data]), { ...opts, ...extra });
}

const exists = (path: string) =>
  lstat(path).then(
    () => true,
    () => false,
  );

/** Rejects with an ImageArchiveError whose message matches `re`. */
async function rejectsWith(p: Promise<unknown>, re: RegExp): Promise<void> {
  await assert.rejects(p, (err: Error) => {
    assert.ok(err instanceof ImageArchiveError, `not an ImageArchiveError: ${err.stack}`);
    assert.match(err.message, re);
    return true;
  });
}

function hasPython(): boolean {
  try {
    execFileSync("python3", ["-c", "import os; os.getxattr"], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}

describe("applyLayer", { skip: process.getuid?.() === 0 ? false : "needs root (chown)" }, () => {
  const dir = suiteTempDir("ums-oci-layer-");
  let n = 0;
  async function freshRoot(): Promise<string> {
    const root = join(dir(), `root${n++}`);
    await mkdir(root);
    return root;
  }
  /** A directory beside the roots: "outside", where no layer may write. */
  async function outside(): Promise<string> {
    const o = join(dir(), `outside${n++}`);
    await mkdir(o);
    await writeFile(join(o, "victim"), "precious");
    await chmod(o, 0o750);
    return o;
  }

  it("writes files, directories, symlinks, hard links and FIFOs with shifted owners, modes and mtimes", async () => {
    const root = await freshRoot();
    const mtime = new Date(1_600_000_000_000);
    const long = `${"d".repeat(120)}/${"f".repeat(150)}-é`;
    const stats = await apply(root, [
      { name: "./", type: "directory", mode: 0o755 },
      { name: "home/", type: "directory", mode: 0o755 },
      { name: "home/user/", type: "directory", mode: 0o700, uid: 1000, gid: 1000 },
      { name: "home/user/.profile", data: "export A=1\n", mode: 0o640, uid: 1000, gid: 1000, mtime },
      { name: "usr/bin/sudo", data: "#!/bin/sh\n", mode: 0o4755 },
      { name: "usr/bin/wall", data: "w", mode: 0o2755, gid: 5 },
      { name: "tmp/", type: "directory", mode: 0o1777 },
      { name: "usr/bin/sudoedit", type: "symlink", linkname: "/usr/bin/sudo", uid: 1000, gid: 1000 },
      { name: "usr/bin/hard", type: "link", linkname: "usr/bin/sudo" },
      { name: "run/initctl", type: "fifo", mode: 0o600 },
      { name: "dev/null", type: "character-device", devmajor: 1, devminor: 3 },
      { name: "dev/sda", type: "block-device", devmajor: 8, devminor: 0 },
      { name: "with-xattr", data: "x", pax: { "SCHILY.xattr.user.comment": "hi" } },
      { name: long, data: "long name" },
      // Modes the umask would take bits from at creation, or few: set exactly all the same.
      { name: "srv/shared", data: "s", mode: 0o666 },
      { name: "srv/group-only", data: "n", mode: 0o070 },
      { name: "srv/tool", data: "t", mode: 0o755 },
    ]);
    const st = (p: string) => lstat(join(root, p));
    const own = async (p: string) => {
      const s = await st(p);
      return [s.uid, s.gid, s.mode & 0o7777];
    };
    assert.deepEqual(await own(""), [SHIFT, SHIFT, 0o755]);
    assert.deepEqual(await own("home/user"), [SHIFT + 1000, SHIFT + 1000, 0o700]);
    assert.deepEqual(await own("home/user/.profile"), [SHIFT + 1000, SHIFT + 1000, 0o640]);
    assert.equal(await readFile(join(root, "home/user/.profile"), "utf8"), "export A=1\n");
    assert.equal((await st("home/user/.profile")).mtimeMs, mtime.getTime());
    assert.deepEqual(await own("usr/bin/sudo"), [SHIFT, SHIFT, 0o4755], "setuid survives the chown");
    assert.deepEqual(await own("usr/bin/wall"), [SHIFT, SHIFT + 5, 0o2755], "setgid too");
    assert.deepEqual(await own("tmp"), [SHIFT, SHIFT, 0o1777], "and the sticky bit");
    assert.deepEqual(await own("usr/bin"), [SHIFT, SHIFT, 0o755], "implicit parents are root's, 0755");
    assert.equal((await st("usr/bin")).mtimeMs > mtime.getTime(), true);
    assert.equal((await st("home")).mtimeMs, 1_700_000_000_000, "directory mtimes set after their content");
    assert.equal(await readlink(join(root, "usr/bin/sudoedit")), "/usr/bin/sudo");
    assert.deepEqual((await own("usr/bin/sudoedit")).slice(0, 2), [SHIFT + 1000, SHIFT + 1000]);
    assert.equal((await st("usr/bin/hard")).ino, (await st("usr/bin/sudo")).ino);
    assert.equal((await st("usr/bin/sudo")).nlink, 2);
    assert.ok((await st("run/initctl")).isFIFO());
    assert.deepEqual(await own("run/initctl"), [SHIFT, SHIFT, 0o600]);
    assert.equal(await exists(join(root, "dev/null")), false);
    assert.equal(await readFile(join(root, long), "utf8"), "long name");
    assert.deepEqual(await own("srv/shared"), [SHIFT, SHIFT, 0o666]);
    assert.deepEqual(await own("srv/group-only"), [SHIFT, SHIFT, 0o070]);
    assert.deepEqual(await own("srv/tool"), [SHIFT, SHIFT, 0o755]);
    assert.equal(stats.entries, 15);
    assert.equal(stats.whiteouts, 0);
    assert.equal(stats.bytes, "export A=1\n".length + "#!/bin/sh\n".length + 1 + 1 + "long name".length + 3);
    assert.deepEqual(
      stats.skipped.map((s) => [s.path, s.reason.split(" ")[0]]),
      [
        ["dev/null", "character-device"],
        ["dev/sda", "block-device"],
        ["with-xattr", "xattr"],
      ],
    );
    assert.equal(stats.skippedTotal, 3);
  });

  it("keeps file capabilities as namespaced (v3) ones rooted at the shift", async () => {
    const root = await freshRoot();
    // v2: magic 0x02000001 (effective), permitted = cap_net_raw (bit 13); all bytes < 0x80
    const v2 = Buffer.from("0100000200200000000000000000000000000000", "hex");
    const stats = await apply(root, [
      {
        name: "bin/ping",
        data: "elf",
        mode: 0o755,
        pax: { "SCHILY.xattr.security.capability": v2.toString("latin1") },
      },
    ]);
    if (!hasPython()) {
      assert.match(stats.skipped[0]?.reason ?? "", /security.capability not kept/);
      return;
    }
    assert.deepEqual(stats.skipped, []);
    const hex = execFileSync("python3", [
      "-c",
      "import os,sys; print(os.getxattr(sys.argv[1], 'security.capability', follow_symlinks=False).hex())",
      join(root, "bin/ping"),
    ])
      .toString()
      .trim();
    // v3: magic 0x03000001, permitted/inheritable as they were, rootid 100000 (0x000186a0), little-endian
    assert.equal(hex, `01000003${"00200000"}${"00000000".repeat(3)}a0860100`);
    assert.deepEqual(
      [(await lstat(join(root, "bin/ping"))).uid, (await lstat(join(root, "bin/ping"))).mode & 0o7777],
      [SHIFT, 0o755],
    );
  });

  it("applies whiteouts and opaque directories over a lower layer, keeping what the upper layer adds", async () => {
    const root = await freshRoot();
    await apply(root, [
      { name: "etc/", type: "directory" },
      { name: "etc/gone", data: "lower" },
      { name: "etc/kept", data: "lower" },
      { name: "etc/dir/", type: "directory" },
      { name: "etc/dir/deep", data: "lower" },
      { name: "opq/", type: "directory", mode: 0o755 },
      { name: "opq/lower-file", data: "lower" },
      { name: "opq/sub/", type: "directory" },
      { name: "opq/sub/lower-deep", data: "lower" },
      { name: "opq/kept-sub/", type: "directory" },
      { name: "opq/kept-sub/lower", data: "lower" },
      { name: "other/x", data: "lower" },
    ]);
    const stats = await apply(root, [
      { name: "etc/.wh.gone", data: "" },
      { name: "etc/.wh.dir", data: "" },
      { name: "etc/.wh.never-was", data: "" },
      { name: "opq/", type: "directory", mode: 0o750 },
      { name: "opq/before-marker", data: "upper" },
      { name: "opq/kept-sub/upper", data: "upper" },
      { name: "opq/.wh..wh..opq", data: "" },
      { name: "opq/after-marker", data: "upper" },
      { name: "opq/sub/upper-deep", data: "upper" },
    ]);
    assert.equal(stats.whiteouts, 4);
    assert.deepEqual((await readdir(join(root, "etc"))).sort(), ["kept"]);
    assert.deepEqual((await readdir(join(root, "opq"))).sort(), ["after-marker", "before-marker", "kept-sub", "sub"]);
    assert.deepEqual(await readdir(join(root, "opq/sub")), ["upper-deep"]);
    assert.deepEqual(await readdir(join(root, "opq/kept-sub")), ["upper"]);
    assert.equal((await lstat(join(root, "opq"))).mode & 0o7777, 0o750);
    assert.equal(await readFile(join(root, "other/x"), "utf8"), "lower");
    assert.equal(await exists(join(root, "etc/.wh.gone")), false, "whiteouts are not created");
    assert.equal(await exists(join(root, "opq/.wh..wh..opq")), false);
  });

  it("replaces what is there: a directory stays a directory, anything else is replaced", async () => {
    const root = await freshRoot();
    await apply(root, [
      { name: "d/", type: "directory", mode: 0o700 },
      { name: "d/inside", data: "x" },
      { name: "f", data: "file" },
      { name: "l", type: "symlink", linkname: "d" },
      { name: "todir", data: "was a file" },
    ]);
    await apply(root, [
      { name: "d/", type: "directory", mode: 0o711, uid: 7 },
      { name: "f", type: "symlink", linkname: "elsewhere" },
      { name: "l/", type: "directory", mode: 0o755 },
      { name: "todir/", type: "directory" },
      { name: "d", data: "now a file" },
    ]);
    assert.equal(await readFile(join(root, "d"), "utf8"), "now a file");
    assert.equal(await readlink(join(root, "f")), "elsewhere");
    assert.ok((await lstat(join(root, "l"))).isDirectory(), "a symlink replaced by a real directory");
    assert.ok((await lstat(join(root, "todir"))).isDirectory());
    const root2 = await freshRoot();
    await apply(root2, [
      { name: "d/", type: "directory", mode: 0o700 },
      { name: "d/inside", data: "x" },
    ]);
    await apply(root2, [{ name: "d/", type: "directory", mode: 0o711, uid: 7 }]);
    const st = await lstat(join(root2, "d"));
    assert.deepEqual([st.uid, st.mode & 0o7777], [SHIFT + 7, 0o711]);
    assert.equal(await readFile(join(root2, "d/inside"), "utf8"), "x", "an existing directory is kept");
  });

  describe("attacks", () => {
    it("a symlink to / does not lead out of the root", async () => {
      const root = await freshRoot();
      const marker = `pwned-${randomBytes(6).toString("hex")}`;
      await apply(root, [
        { name: "evil", type: "symlink", linkname: "/" },
        { name: `evil/tmp/${marker}`, data: "owned", mode: 0o4777 },
      ]);
      assert.equal(await readFile(join(root, "tmp", marker), "utf8"), "owned");
      assert.equal(await exists(join("/tmp", marker)), false);
    });

    it("a symlink climbing with '..' does not either", async () => {
      const root = await freshRoot();
      const marker = `pwned-${randomBytes(6).toString("hex")}`;
      await apply(root, [
        { name: "a/b/up", type: "symlink", linkname: "../../../../../../../.." },
        { name: `a/b/up/tmp/${marker}`, data: "owned" },
        { name: "up2", type: "symlink", linkname: "../../../.." },
        { name: `up2/tmp/${marker}-2/`, type: "directory" },
      ]);
      assert.equal(await readFile(join(root, "tmp", marker), "utf8"), "owned");
      assert.ok((await lstat(join(root, "tmp", `${marker}-2`))).isDirectory());
      assert.equal(await exists(join("/tmp", marker)), false);
      assert.equal(await exists(join("/tmp", `${marker}-2`)), false);
    });

    it("a symlink to an absolute host path is resolved in the root: writes, chmods, whiteouts stay inside", async () => {
      const root = await freshRoot();
      const out = await outside();
      const before = await stat(out);
      await apply(root, [
        { name: "o", type: "symlink", linkname: out },
        { name: "o/victim", data: "overwritten", mode: 0o777 },
        { name: "o/", type: "directory", mode: 0o777 }, // replaces the link "o", nothing at its target
      ]);
      assert.equal(await readFile(join(root, out, "victim"), "utf8"), "overwritten", "written inside the root");
      assert.ok((await lstat(join(root, "o"))).isDirectory());
      await apply(root, [
        { name: "p", type: "symlink", linkname: out },
        { name: "p/.wh.victim", data: "" },
        { name: "p/.wh..wh..opq", data: "" },
        { name: "up", type: "symlink", linkname: `../../../../../../../..${out}` },
        { name: "up/.wh.victim", data: "" },
      ]);
      assert.equal(await readFile(join(out, "victim"), "utf8"), "precious");
      const after = await stat(out);
      assert.deepEqual([after.mode, after.uid, after.mtimeMs], [before.mode, before.uid, before.mtimeMs]);
      assert.equal(await exists(join(root, out, "victim")), false, "whited out inside the root");
    });

    it("replacing a symlink never writes through it", async () => {
      const root = await freshRoot();
      const out = await outside();
      await apply(root, [
        { name: "f", type: "symlink", linkname: join(out, "victim") },
        { name: "f", data: "replaced", mode: 0o4777 },
        { name: "g", type: "symlink", linkname: join(out, "victim") },
        { name: "g", type: "link", linkname: "f" },
      ]);
      assert.equal(await readFile(join(out, "victim"), "utf8"), "precious");
      assert.equal((await lstat(join(out, "victim"))).mode & 0o7777, 0o644);
      assert.equal(await readFile(join(root, "f"), "utf8"), "replaced");
    });

    it("a hard link to the host's /etc/passwd, directly or through a symlink, is refused", async () => {
      const root = await freshRoot();
      const passwd = await lstat("/etc/passwd");
      await rejectsWith(apply(root, [{ name: "pw", type: "link", linkname: "/etc/passwd" }]), /not in the image/);
      await rejectsWith(
        apply(root, [
          { name: "evil", type: "symlink", linkname: "/" },
          { name: "pw", type: "link", linkname: "evil/etc/passwd" },
        ]),
        /entry 'pw' is a hard link to 'evil\/etc\/passwd', which is not in the image/,
      );
      await rejectsWith(
        apply(root, [
          { name: "up", type: "symlink", linkname: "../../../../../../etc" },
          { name: "pw", type: "link", linkname: "up/passwd" },
        ]),
        /not in the image/,
      );
      await rejectsWith(
        apply(root, [{ name: "pw", type: "link", linkname: "../../../../etc/passwd" }]),
        /leaves the image/,
      );
      // With the image's own /etc/passwd, the link is to that one.
      await apply(root, [
        { name: "etc/passwd", data: "root:x:0:0::/root:/bin/sh\n" },
        { name: "pw2", type: "link", linkname: "evil/etc/passwd" },
      ]);
      assert.equal((await lstat(join(root, "pw2"))).ino, (await lstat(join(root, "etc/passwd"))).ino);
      const after = await lstat("/etc/passwd");
      assert.deepEqual([after.nlink, after.ino, after.mtimeMs], [passwd.nlink, passwd.ino, passwd.mtimeMs]);
      assert.equal(await exists(join(root, "pw")), false);
      await rejectsWith(apply(root, [{ name: "x", type: "link", linkname: "etc" }]), /which is a directory/);
    });

    it("refuses '..' in names, ids outside the range, whiteouts of '..' and symlink loops", async () => {
      const root = await freshRoot();
      await rejectsWith(apply(root, [{ name: "../x", data: "x" }]), /entry '..\/x' leaves the image/);
      await rejectsWith(apply(root, [{ name: "a/../../b", data: "x" }]), /entry 'a\/..\/..\/b' leaves the image/);
      await rejectsWith(apply(root, [{ name: "big", data: "x", uid: 70000 }]), /entry 'big' is owned by uid 70000/);
      await rejectsWith(apply(root, [{ name: "big/", type: "directory", gid: 65536 }]), /gid 65536/);
      await rejectsWith(apply(root, [{ name: "dir/.wh...", data: "" }]), /whiteout of '..'/);
      await rejectsWith(
        apply(root, [
          { name: "loop", type: "symlink", linkname: "loop" },
          { name: "loop/x", data: "x" },
        ]),
        /too many levels of symbolic links/,
      );
      assert.equal(await exists(join(root, "big")), false);
      assert.equal(await exists(join(dir(), "x")), false);
      assert.equal(await exists(join(dir(), "b")), false);
    });

    it("strips a leading / from names", async () => {
      const root = await freshRoot();
      await apply(root, [{ name: "/abs/file", data: "x" }]);
      assert.equal(await readFile(join(root, "abs/file"), "utf8"), "x");
    });
  });

  describe("replacing what a path went through (parent directories resolved once per layer)", () => {
    it("a directory replaced by a symlink to /, after a whiteout or at once: later entries follow the symlink", async () => {
      const root = await freshRoot();
      const marker = `pwned-${randomBytes(6).toString("hex")}`;
      await apply(root, [
        { name: "a/", type: "directory" },
        { name: "a/x", data: "in a" },
        { name: ".wh.a", data: "" },
        { name: "a", type: "symlink", linkname: "/" },
        { name: "a/y", data: "y" },
        { name: `a/tmp/${marker}`, data: "owned" },
        { name: "b/", type: "directory" },
        { name: "b/x", data: "in b" },
        { name: "b", type: "symlink", linkname: "/tmp" }, // replaces the directory b itself
        { name: `b/${marker}-2`, data: "owned" },
      ]);
      assert.equal(await readlink(join(root, "a")), "/");
      assert.equal(await readFile(join(root, "y"), "utf8"), "y", "a/y is the root's /y");
      assert.equal(await readFile(join(root, "tmp", marker), "utf8"), "owned");
      assert.equal(await readFile(join(root, "tmp", `${marker}-2`), "utf8"), "owned");
      assert.equal(await readlink(join(root, "b")), "/tmp");
      assert.equal(await exists(join("/y")), false);
      assert.equal(await exists(join("/tmp", marker)), false);
      assert.equal(await exists(join("/tmp", `${marker}-2`)), false);
    });

    it("a directory replaced by a symlink to a host directory: nothing is written there", async () => {
      const root = await freshRoot();
      const out = await outside();
      const before = await stat(out);
      await apply(root, [
        { name: "d/", type: "directory" },
        { name: "d/sub/", type: "directory" },
        { name: "d/sub/x", data: "x" },
        { name: "d", type: "symlink", linkname: out },
        { name: "d/victim", data: "overwritten", mode: 0o4777 },
        { name: "d/sub/y", data: "y" },
        { name: "d/.wh.victim", data: "" },
        { name: "d/new/", type: "directory", mode: 0o777 },
      ]);
      assert.equal(await readFile(join(out, "victim"), "utf8"), "precious");
      assert.deepEqual(await readdir(out), ["victim"]);
      const after = await stat(out);
      assert.deepEqual([after.mode, after.uid, after.mtimeMs], [before.mode, before.uid, before.mtimeMs]);
      assert.equal(await exists(join(root, out, "victim")), false, "written inside the root, then whited out");
      assert.equal(await readFile(join(root, out, "sub/y"), "utf8"), "y");
      assert.ok((await lstat(join(root, out, "new"))).isDirectory());
    });

    it("a directory replaced by a file, then made again; a file where a directory was is not a directory", async () => {
      const root = await freshRoot();
      await apply(root, [
        { name: "d/", type: "directory", mode: 0o700 },
        { name: "d/x", data: "x" },
        { name: "d", data: "a file now" },
        { name: "d/", type: "directory", mode: 0o750 },
        { name: "d/y", data: "y" },
      ]);
      assert.deepEqual(await readdir(join(root, "d")), ["y"]);
      assert.equal((await lstat(join(root, "d"))).mode & 0o7777, 0o750);
      const root2 = await freshRoot();
      await rejectsWith(
        apply(root2, [
          { name: "d/", type: "directory" },
          { name: "d/x", data: "x" },
          { name: "d", data: "a file now" },
          { name: "d/y", data: "y" },
        ]),
        /entry 'd\/y': 'd' is not a directory/,
      );
    });

    it("symlinks replaced: by another symlink, by a directory; a symlink on the way whited out", async () => {
      const root = await freshRoot();
      await apply(root, [
        { name: "one/", type: "directory" },
        { name: "two/", type: "directory" },
        { name: "l", type: "symlink", linkname: "one" },
        { name: "l/a", data: "a" },
        { name: "l", type: "symlink", linkname: "/two" },
        { name: "l/b", data: "b" },
        { name: "l/", type: "directory" },
        { name: "l/c", data: "c" },
        { name: "up/", type: "directory" },
        { name: "up/s", type: "symlink", linkname: "../one" },
        { name: "up/s/d", data: "d" },
        { name: "up/.wh.s", data: "" },
        { name: "up/s/e", data: "e" },
      ]);
      assert.deepEqual((await readdir(join(root, "one"))).sort(), ["a", "d"]);
      assert.deepEqual(await readdir(join(root, "two")), ["b"]);
      assert.deepEqual(await readdir(join(root, "l")), ["c"]);
      assert.ok((await lstat(join(root, "up/s"))).isDirectory(), "made again as a directory");
      assert.deepEqual(await readdir(join(root, "up/s")), ["e"]);
    });

    it("an opaque directory's pruning and a whiteout of a directory on the way", async () => {
      const root = await freshRoot();
      await apply(root, [
        { name: "o/old/", type: "directory" },
        { name: "o/old/f", data: "lower" },
        { name: "p/q/", type: "directory" },
      ]);
      await apply(root, [
        { name: "link", type: "symlink", linkname: "o/old" },
        { name: "o/.wh..wh..opq", data: "" }, // removes o/old, which link went through
        { name: "link/g", data: "upper" },
        { name: "via", type: "symlink", linkname: "p/q" },
        { name: "via/h", data: "h" },
        { name: "p/.wh.q", data: "" },
        { name: "via/i", data: "i" },
      ]);
      assert.deepEqual(await readdir(join(root, "o")), ["old"]);
      assert.deepEqual(await readdir(join(root, "o/old")), ["g"], "made again, without the lower file");
      assert.deepEqual(await readdir(join(root, "p/q")), ["i"]);
    });
  });

  describe("bad data", () => {
    it("garbage, truncated tar, truncated gzip and zstd are ImageArchiveErrors", async () => {
      const root = await freshRoot();
      const tar = await makeTar([{ name: "big", data: randomBytes(100_000) }]);
      await rejectsWith(apply(root, randomBytes(4096)), /not a valid tar archive/);
      await rejectsWith(apply(root, Buffer.from("short")), /truncated/);
      await rejectsWith(apply(root, tar.subarray(0, 50_000)), /truncated/);
      await rejectsWith(apply(root, gzip(tar).subarray(0, 30_000)), /not valid gzip data/);
      const zstd = Buffer.concat([Buffer.from([0x28, 0xb5, 0x2f, 0xfd]), randomBytes(100)]);
      await rejectsWith(apply(root, zstd), /compression zstd is not supported/);
    });

    it("reads gzip layers and checks the diff_id", async () => {
      const root = await freshRoot();
      const tar = await makeTar([{ name: "g", data: "gz" }]);
      await apply(root, gzip(tar), { expectDiffId: `sha256:${sha256(tar)}` });
      assert.equal(await readFile(join(root, "g"), "utf8"), "gz");
      await rejectsWith(apply(root, tar, { expectDiffId: `sha256:${"0".repeat(64)}` }), /does not match its diff_id/);
    });

    it("stops between entries when aborted, with the abort's error", async () => {
      const root = await freshRoot();
      const tar = await makeTar(Array.from({ length: 200 }, (_, i) => ({ name: `f${i}`, data: "x".repeat(1000) })));
      const ac = new AbortController();
      const input = Readable.from(
        (async function* () {
          yield tar.subarray(0, 64 * 1024);
          // Aborted once the first entries are written.
          for (let i = 0; i < 1000 && (await readdir(root)).length === 0; i++) {
            await new Promise((resolve) => setTimeout(resolve, 10));
          }
          ac.abort();
          yield tar.subarray(64 * 1024);
        })(),
      );
      await assert.rejects(applyLayer(root, input, { ...opts, signal: ac.signal }), { name: "AbortError" });
      const written = (await readdir(root)).length;
      assert.ok(written > 0 && written < 200, `${written} entries written`);
      await apply(root, [{ name: "g", data: "x" }]); // the next layer is applied as usual
      assert.equal(await readFile(join(root, "g"), "utf8"), "x");
    });

    it("passes errors of the input through as they are", async () => {
      const root = await freshRoot();
      const failing = Readable.from(
        (async function* () {
          yield await makeTar([{ name: "a", data: "x" }]);
          throw Object.assign(new Error("EIO: i/o error, read"), { code: "EIO" });
        })(),
      );
      await assert.rejects(applyLayer(root, failing, opts), (err: Error & { code?: string }) => {
        assert.ok(!(err instanceof ImageArchiveError));
        assert.equal(err.code, "EIO");
        return true;
      });
    });
  });
});
