import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { onReservedMount, parseMountInfo } from "./guard.js";

// The mount table of a real unit (/proc/self/mountinfo, trimmed), as the agent reads it.
const MOUNTINFO = `555 65 0:38 /units/unit-1/rootfs / rw,noatime - btrfs /dev/loop0 rw,subvol=/units/unit-1/rootfs
556 555 0:111 / /proc rw,relatime - proc proc rw
579 555 0:116 / /run rw,nosuid,nodev,relatime - tmpfs tmpfs rw,mode=755
580 555 0:117 / /.unit rw,nosuid,nodev,relatime - tmpfs tmpfs rw,size=1024k,mode=755
581 580 254:0 /usr/bin/node /.unit/bin/node ro,nosuid,nodev,relatime - ext4 /dev/vda rw
583 580 254:0 /srv/ums/agent /.unit/agent ro,nosuid,nodev,relatime - ext4 /dev/vda rw
585 580 254:0 /var/lib/ums/run/unit-1/exposed /.unit/run ro,nosuid,nodev,noexec,relatime - ext4 /dev/vda rw
586 580 254:0 /var/lib/ums/run/unit-1/checkpoints /.unit/checkpoints ro,nosuid,nodev,relatime master:15 - ext4 /dev/vda rw
587 580 254:0 /var/lib/ums/run/unit-1/policy /.unit/policy ro,nosuid,nodev,noexec,relatime - ext4 /dev/vda rw
588 555 254:0 /var/lib/ums/run/unit-1/resolv.conf /etc/resolv.conf ro,nosuid,nodev,relatime - ext4 /dev/vda rw
900 555 254:0 /var/lib/ums/run/unit-1/exposed /tmp/my\\040run rw - ext4 /dev/vda rw
901 555 0:117 / /mnt/unitfs rw - tmpfs tmpfs rw
902 555 254:0 /var/lib/ums/run/unit-1/policy /tmp/pol ro - ext4 /dev/vda rw`;

describe("the mount check of guard.ts", () => {
  const mounts = parseMountInfo(MOUNTINFO);

  it("parses ids, devices, roots and mount points, octal escapes undone", () => {
    const bind = mounts.find((m) => m.id === 900);
    assert.deepEqual(bind, { id: 900, dev: "254:0", root: "/var/lib/ums/run/unit-1/exposed", point: "/tmp/my run" });
    assert.equal(mounts.length, 13);
  });

  it("passes the unit's own files, and the reserved mounts themselves (the path rule judges those)", () => {
    assert.equal(onReservedMount(mounts, 555, "/home/unit/x", "write"), false);
    assert.equal(onReservedMount(mounts, 588, "/etc/resolv.conf", "read"), false);
    assert.equal(onReservedMount(mounts, 585, "/.unit/run/host.sock", "read"), false);
  });

  it("catches a bind of a reserved mount elsewhere (unit root may mount): same filesystem, root within", () => {
    assert.equal(onReservedMount(mounts, 900, "/tmp/my run/host.sock", "read"), true);
    assert.equal(onReservedMount(mounts, 900, "/tmp/my run", "write"), true);
    assert.equal(onReservedMount(mounts, 901, "/mnt/unitfs/run", "read"), true); // /.unit's own tmpfs
  });

  it("lets a bind of a readable part be read, not written", () => {
    assert.equal(onReservedMount(mounts, 902, "/tmp/pol/network.json", "read"), false);
    assert.equal(onReservedMount(mounts, 902, "/tmp/pol/network.json", "write"), true);
  });

  it("refuses what it cannot place, and checks nothing where there is no /.unit (an agent outside a unit)", () => {
    assert.equal(onReservedMount(mounts, 4242, "/x", "read"), true);
    assert.equal(
      onReservedMount(parseMountInfo(MOUNTINFO.split("\n").slice(0, 3).join("\n")), 4242, "/x", "read"),
      false,
    );
  });
});
