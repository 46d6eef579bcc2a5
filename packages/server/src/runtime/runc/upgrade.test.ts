// The upgrade rule's reading of `btrfs receive --dump` (upgrade.ts): which lines change system files.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { systemChanges, touchesSystem } from "./upgrade.js";

const at = (line: string) => systemChanges(line, "snap");

describe("upgrade: what a unit changed in its system files", () => {
  it("counts writes, new files, deletions, renames, owners and modes in the system trees", () => {
    assert.deepEqual(at("unlink          ./snap/usr/bin/tail"), ["usr/bin/tail"]);
    assert.deepEqual(at("update_extent   ./snap/etc/passwd            offset=0 len=3"), ["etc/passwd"]);
    assert.deepEqual(at("chmod           ./snap/usr/lib/x            mode=700"), ["usr/lib/x"]);
    assert.deepEqual(at("chown           ./snap/var/lib/dpkg/status  gid=0 uid=0"), ["var/lib/dpkg/status"]);
    // A new file: made under a temporary name at the top, then renamed where it goes.
    assert.deepEqual(at("mkfile          ./snap/o19056-18075-0"), []);
    assert.deepEqual(at("rename          ./snap/o19056-18075-0       dest=./snap/usr/local/bin/tool"), [
      "usr/local/bin/tool",
    ]);
    // Moving a system file out counts (its place in /usr is gone), as does moving one in.
    assert.deepEqual(at("rename          ./snap/usr/bin/ls           dest=./snap/root/ls"), ["usr/bin/ls"]);
    assert.deepEqual(at("rename          ./snap/root/x               dest=./snap/etc/x"), ["etc/x"]);
    assert.deepEqual(at("set_xattr       ./snap/usr/bin/ping          name=security.capability data=x len=1"), [
      "usr/bin/ping",
    ]);
  });

  it("does not count times, the unit's own trees, hard links to system files, or the runtime's boot files", () => {
    assert.deepEqual(at("utimes          ./snap/usr/bin              atime=2026-11-28T11:19:38+0000"), []);
    assert.deepEqual(at("update_extent   ./snap/root/work/a          offset=0 len=2"), []);
    assert.deepEqual(at("rename          ./snap/o1-2-0               dest=./snap/home/unit/x"), []);
    assert.deepEqual(at("link            ./snap/root/ls              dest=./snap/usr/bin/ls"), []);
    assert.deepEqual(at("update_extent   ./snap/etc/hostname         offset=0 len=5"), []);
    assert.deepEqual(at("rename          ./snap/o3-4-0               dest=./snap/etc/hosts"), []);
    assert.deepEqual(at("mkfile          ./snap/etc/ld.so.preload"), []);
    assert.deepEqual(at("snapshot        ./snap                      uuid=x transid=1"), []);
    assert.deepEqual(at("update_extent   ./snap/var/log/syslog       offset=0 len=2"), []);
    assert.deepEqual(
      at("update_extent   ./snap/usrdata/x            offset=0 len=2"),
      [],
      "a prefix of a name is not the tree",
    );
  });

  it("counts a directory on the way to a system tree (a /var/lib made a link) and unescapes paths", () => {
    assert.deepEqual(at("rename          ./snap/var/lib              dest=./snap/var/lib.orig"), ["var/lib"]);
    assert.deepEqual(at("symlink         ./snap/var/lib              dest=/"), ["var/lib"]);
    assert.deepEqual(at("chmod           ./snap/var                  mode=777"), ["var"]);
    assert.deepEqual(at("mkfile          ./snap/etc/my\\ file"), ["etc/my file"]);
    assert.equal(touchesSystem("var/lib/apt/lists/x"), false);
    assert.equal(touchesSystem("lib64"), true);
  });
});
