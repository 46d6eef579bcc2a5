import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { resolveUser } from "./image-config.js";
import { ImageArchiveError } from "./oci/index.js";

const PASSWD = ["root:x:0:0:root:/root:/bin/sh", "app:x:1000:1001:app:/home/app:/bin/sh", ""].join("\n");
const GROUP = ["root:x:0:", "staff:x:50:", "app:x:1001:", ""].join("\n");

describe("an imported image's User (OCI config) as the unit's default user", () => {
  it("empty or root is root, with the passwd's home", () => {
    for (const u of [null, "", "root", "0"]) {
      assert.deepEqual(resolveUser(u, PASSWD, GROUP), { name: "root", uid: 0, gid: 0, home: "/root" }, String(u));
    }
  });

  it("a name or a uid, found in /etc/passwd, with its group unless one is named", () => {
    const app = { name: "app", uid: 1000, gid: 1001, home: "/home/app" };
    assert.deepEqual(resolveUser("app", PASSWD, GROUP), app);
    assert.deepEqual(resolveUser("1000", PASSWD, GROUP), app);
    assert.deepEqual(resolveUser("app:staff", PASSWD, GROUP), { ...app, gid: 50 });
    assert.deepEqual(resolveUser("app:7", PASSWD, GROUP), { ...app, gid: 7 });
    assert.deepEqual(resolveUser("4242", PASSWD, GROUP), { name: "4242", uid: 4242, gid: 4242, home: "/" }, "no entry");
    assert.deepEqual(resolveUser("4242", undefined, undefined), { name: "4242", uid: 4242, gid: 4242, home: "/" });
  });

  it("refuses names the image does not have and ids a unit does not have", () => {
    assert.throws(() => resolveUser("nobody-here", PASSWD, GROUP), ImageArchiveError);
    assert.throws(() => resolveUser("app:nogroup", PASSWD, GROUP), ImageArchiveError);
    assert.throws(() => resolveUser("70000", PASSWD, GROUP), /outside the ids a unit has/);
    assert.throws(() => resolveUser("app:70000", PASSWD, GROUP), /outside the ids a unit has/);
  });
});
