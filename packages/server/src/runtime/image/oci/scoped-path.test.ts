import assert from "node:assert/strict";
import { lstat, mkdir, readdir, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, it } from "node:test";
import { suiteTempDir } from "../../../testing/temp-dir.js";
import { ImageArchiveError } from "./errors.js";
import {
  entryComponents,
  existingDir,
  resolveDir,
  resolveDirSync,
  resolveEntry,
  resolveFromSync,
  resolveInRoot,
} from "./scoped-path.js";

describe("entryComponents", () => {
  it("drops leading '/' and './', '.' and empty components", () => {
    assert.deepEqual(entryComponents("a/b/c"), ["a", "b", "c"]);
    assert.deepEqual(entryComponents("/etc/passwd"), ["etc", "passwd"]);
    assert.deepEqual(entryComponents("./usr//bin/./ls"), ["usr", "bin", "ls"]);
    assert.deepEqual(entryComponents("usr/lib/"), ["usr", "lib"]);
    assert.deepEqual(entryComponents("."), []);
    assert.deepEqual(entryComponents("./"), []);
    assert.deepEqual(entryComponents(""), []);
    assert.deepEqual(entryComponents("..."), ["..."]);
  });
  it("refuses any '..' component and NUL bytes", () => {
    for (const name of ["../x", "a/../../b", "a/..", "/../etc", "a/../b", ".."]) {
      assert.throws(
        () => entryComponents(name),
        (err: Error) => {
          assert.ok(err instanceof ImageArchiveError, name);
          assert.match(err.message, /leaves the image/);
          return true;
        },
      );
    }
    assert.throws(() => entryComponents("a\0b"), ImageArchiveError);
  });
});

describe("resolveDir and resolveEntry", () => {
  const dir = suiteTempDir("ums-scoped-");
  let n = 0;
  async function freshRoot(): Promise<string> {
    const root = join(dir(), `root${n++}`);
    await mkdir(root);
    return root;
  }
  const mkdirIn = async (path: string) => {
    await mkdir(path);
  };

  it("resolves plain directories and reports a missing one", async () => {
    const root = await freshRoot();
    await mkdir(join(root, "usr/lib"), { recursive: true });
    assert.deepEqual(await resolveDir(root, ["usr", "lib"]), ["usr", "lib"]);
    assert.deepEqual(await resolveDir(root, []), []);
    assert.equal(await resolveDir(root, ["usr", "nope", "x"]), undefined);
    const made: string[] = [];
    const got = await resolveDir(root, ["usr", "new", "deeper"], {
      mkdir: async (path, components) => {
        made.push(components.join("/"));
        await mkdir(path);
      },
    });
    assert.deepEqual(got, ["usr", "new", "deeper"]);
    assert.deepEqual(made, ["usr/new", "usr/new/deeper"]);
    assert.ok((await lstat(join(root, "usr/new/deeper"))).isDirectory());
  });

  it("resolves a symlink to '/' at the root, never at the host's /", async () => {
    const root = await freshRoot();
    await symlink("/", join(root, "evil"));
    const marker = `pwned-${process.pid}-${Date.now()}`;
    const got = await resolveDir(root, ["evil", "tmp", marker], { mkdir: mkdirIn });
    assert.deepEqual(got, ["tmp", marker]);
    assert.ok((await lstat(join(root, "tmp", marker))).isDirectory());
    await assert.rejects(lstat(join("/tmp", marker)), { code: "ENOENT" });
  });

  it("never climbs above the root with '..' in symlinks", async () => {
    const root = await freshRoot();
    await mkdir(join(root, "a/b"), { recursive: true });
    await symlink("../../../../../..", join(root, "a/b/up"));
    await symlink("../../..", join(root, "up3"));
    await mkdir(join(root, "etc"));
    assert.deepEqual(await resolveDir(root, ["a", "b", "up", "etc"]), ["etc"]);
    assert.deepEqual(await resolveDir(root, ["up3", "etc"]), ["etc"]);
    assert.deepEqual(await resolveDir(root, ["up3"]), []);
    // What the host has above the root is not seen: a missing directory inside the root is missing.
    assert.equal(await resolveDir(root, ["up3", "proc", "self"]), undefined);
  });

  it("follows chains of relative and absolute symlinks, '..' after a symlink taken from its target", async () => {
    const root = await freshRoot();
    await mkdir(join(root, "real/inner/deep"), { recursive: true });
    await symlink("b", join(root, "a"));
    await symlink("/c/d", join(root, "b"));
    await mkdir(join(root, "c"));
    await symlink("../real/inner", join(root, "c/d"));
    assert.deepEqual(await resolveDir(root, ["a", "deep"]), ["real", "inner", "deep"]);
    // a -> b -> /c/d -> ../real/inner: "a/.." is the parent of real/inner, as the kernel would say
    assert.deepEqual(await resolveDir(root, ["a", ".."]), ["real"]);
    const entry = await resolveEntry(root, ["a", "deep", "file"]);
    assert.equal(entry?.path, join(root, "real/inner/deep/file"));
    assert.equal(entry?.rel, "real/inner/deep/file");
  });

  it("refuses symlink loops and non-directories", async () => {
    const root = await freshRoot();
    await symlink("y", join(root, "x"));
    await symlink("/x", join(root, "y"));
    await symlink("self", join(root, "self"));
    await symlink("/etc", join(root, "etc")); // chroot semantics: /etc is this very link
    await writeFile(join(root, "file"), "x");
    await symlink("file", join(root, "tofile"));
    for (const path of [["x", "a"], ["self"], ["etc", "passwd"]]) {
      await assert.rejects(resolveDir(root, path, { mkdir: mkdirIn }), (err: Error) => {
        assert.ok(err instanceof ImageArchiveError);
        assert.match(err.message, /too many levels of symbolic links/);
        return true;
      });
    }
    await assert.rejects(resolveDir(root, ["file", "a"]), /'file' is not a directory/);
    await assert.rejects(resolveDir(root, ["tofile", "a"]), ImageArchiveError);
    assert.deepEqual(await readdir(root), ["etc", "file", "self", "tofile", "x", "y"].sort());
  });

  it("never follows the last component of an entry", async () => {
    const root = await freshRoot();
    await symlink("/", join(root, "evil"));
    const entry = await resolveEntry(root, ["evil"]);
    assert.equal(entry?.path, join(root, "evil"));
    assert.deepEqual(entry?.parent, []);
    await assert.rejects(resolveEntry(root, []), /invalid components/);
  });

  it("existingDir goes through real directories only", async () => {
    const root = await freshRoot();
    await mkdir(join(root, "a/b"), { recursive: true });
    await symlink("a", join(root, "l"));
    assert.equal(await existingDir(root, "a/b"), join(root, "a/b"));
    assert.equal(await existingDir(root, ""), root);
    assert.equal(await existingDir(root, "l/b"), undefined);
    assert.equal(await existingDir(root, "l"), undefined);
    assert.equal(await existingDir(root, "a/nope"), undefined);
  });

  it("resolveDirSync and resolveFromSync (from a resolved prefix) say what resolveDir says", async () => {
    const root = await freshRoot();
    await mkdir(join(root, "real/inner/deep"), { recursive: true });
    await symlink("b", join(root, "a"));
    await symlink("/c/d", join(root, "b"));
    await mkdir(join(root, "c"));
    await symlink("../real/inner", join(root, "c/d"));
    await symlink("../../../..", join(root, "real/up"));
    await writeFile(join(root, "file"), "x");
    // A chain of 30 links: 40 at most in all, however the path is cut.
    for (let i = 0; i < 30; i++) await symlink(i === 0 ? "real" : `l${i - 1}`, join(root, `l${i}`));
    await symlink("/l29", join(root, "real/back"));
    const paths = [
      ["a", "deep"],
      ["a", ".."],
      ["real", "up", "c", "d", "deep"],
      ["real", "inner", "..", "..", "a"],
      ["l29", "inner"],
      ["l29", "back", "inner"], // 31 + 31 links: too many
      ["file", "x"],
      ["nope", "x"],
    ];
    const outcome = async (f: () => Promise<unknown> | unknown) => {
      try {
        return { ok: await f() };
      } catch (err) {
        return { error: (err as Error).message };
      }
    };
    for (const path of paths) {
      const want = await outcome(() => resolveDir(root, path));
      assert.deepEqual(await outcome(() => resolveDirSync(root, path)), want, path.join("/"));
      for (let n = 1; n < path.length; n++) {
        const visited: string[] = [];
        const prefix = await outcome(() =>
          resolveFromSync(root, { dir: [], links: 0 }, path.slice(0, n), { visit: (r) => visited.push(r) }),
        );
        if ("error" in prefix) {
          assert.equal(prefix.error, want.error, `${path.join("/")}: its start fails as it does`);
          continue;
        }
        const from = prefix.ok as ReturnType<typeof resolveFromSync>;
        if (from === undefined) continue;
        assert.ok(visited.length >= path.slice(0, n).filter((c) => c !== "..").length, "each name looked at");
        const got = await outcome(() => resolveFromSync(root, from, path.slice(n))?.dir);
        assert.deepEqual(got, want, `${path.join("/")} from ${path.slice(0, n).join("/")}`);
      }
    }
    assert.match(
      (await outcome(() => resolveDir(root, ["l29", "back", "inner"]))).error ?? "",
      /too many levels of symbolic links/,
    );
  });

  it("resolveInRoot reads a path as a process chrooted in the root would", async () => {
    const root = await freshRoot();
    await mkdir(join(root, "usr/lib/x86_64-linux-gnu"), { recursive: true });
    await writeFile(join(root, "usr/lib/x86_64-linux-gnu/libc.so.6"), "elf");
    await symlink("usr/lib", join(root, "lib"));
    await symlink("/lib/x86_64-linux-gnu/libc.so.6", join(root, "usr/lib/libc"));
    await symlink("../../../../etc/passwd", join(root, "passwd"));
    await symlink("/", join(root, "top"));
    await mkdir(join(root, "etc"));
    assert.equal(
      await resolveInRoot(root, "/lib/x86_64-linux-gnu/libc.so.6"),
      join(root, "usr/lib/x86_64-linux-gnu/libc.so.6"),
    );
    assert.equal(await resolveInRoot(root, "lib/libc"), join(root, "usr/lib/libc"));
    assert.equal(
      await resolveInRoot(root, "lib/libc", { followFinal: true }),
      join(root, "usr/lib/x86_64-linux-gnu/libc.so.6"),
    );
    // Escaping links end inside the root: the host's /etc/passwd is never the answer.
    assert.equal(await resolveInRoot(root, "passwd", { followFinal: true }), join(root, "etc/passwd"));
    assert.equal(await resolveInRoot(root, "top", { followFinal: true }), root);
    assert.equal(await resolveInRoot(root, "/usr/../..//usr/lib/.."), join(root, "usr"));
    await assert.rejects(resolveInRoot(root, "nope/x"), { code: "ENOENT" });
    await symlink("loop", join(root, "loop"));
    await assert.rejects(resolveInRoot(root, "loop", { followFinal: true }), ImageArchiveError);
  });
});
