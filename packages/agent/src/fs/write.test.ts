import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { FlushBehind, finalMode, isWriteTemp, planWrite, tempName } from "./write.js";

// The pure parts of the atomic file write (write.ts); the write itself: fs.test.ts here, and the
// server's api/fs/fs.test.ts against a real unit.

const obj = (kind: "file" | "dir" | "fifo" | "dev", nlink = 1) => ({
  isFile: () => kind === "file",
  isDirectory: () => kind === "dir",
  isFIFO: () => kind === "fifo",
  nlink,
});

describe("atomic write: temporary names", () => {
  it("are hidden, carry the name, and are recognised", () => {
    const t = tempName("a.txt", "0123456789abcdef");
    assert.equal(t, ".a.txt.ums-write-0123456789abcdef");
    assert.ok(isWriteTemp(t));
    assert.ok(isWriteTemp(tempName("x")));
    assert.notEqual(tempName("x"), tempName("x"), "random");
    assert.match(tempName("x"), /^\.x\.ums-write-[0-9a-f]{16}$/);
  });

  it("stay within NAME_MAX (bytes) for long names", () => {
    const long = "é".repeat(120); // 240 bytes
    const t = tempName(long, "0123456789abcdef");
    assert.equal(t, ".ums-write-0123456789abcdef");
    assert.ok(isWriteTemp(t));
    assert.ok(Buffer.byteLength(tempName("a".repeat(255))) <= 255);
    assert.equal(tempName("a".repeat(200), "0123456789abcdef").length, 1 + 200 + 11 + 16);
  });

  it("are not confused with ordinary names", () => {
    for (const n of [
      "a.txt",
      ".a.txt",
      "a.ums-write-0123456789abcdef",
      ".a.ums-write-0123",
      ".a.ums-write-XYZ3456789abcdef",
    ])
      assert.equal(isWriteTemp(n), false, n);
    assert.ok(isWriteTemp(".a\nb.ums-write-0123456789abcdef"));
  });
});

describe("atomic write: plan", () => {
  it("replaces a new or a plain file", () => {
    assert.deepEqual(planWrite(null, true), { kind: "replace" });
    assert.deepEqual(planWrite(obj("file"), true), { kind: "replace" });
  });

  it("writes in place a hard-linked file or a mount point", () => {
    assert.deepEqual(planWrite(obj("file", 2), true), { kind: "in-place", why: "hard links" });
    assert.deepEqual(planWrite(obj("file"), false), { kind: "in-place", why: "mount point" });
  });

  it("refuses directories, FIFOs and devices", () => {
    assert.equal(planWrite(obj("dir"), true).kind, "refuse");
    assert.deepEqual(planWrite(obj("fifo"), true), { kind: "refuse", code: "EINVAL", what: "cannot write a FIFO" });
    assert.deepEqual(planWrite(obj("dev", 3), false), {
      kind: "refuse",
      code: "EINVAL",
      what: "cannot write a special file",
    });
  });
});

describe("atomic write: mode", () => {
  it("is the mode asked for, exactly", () => {
    assert.equal(finalMode(0o600, { mode: 0o100755 }, 0o022, true), 0o600);
    assert.equal(finalMode(0o4755, null, 0o077, false), 0o4755);
  });

  it("keeps the replaced file's, less the set-ID bits a write by the unprivileged clears", () => {
    assert.equal(finalMode(null, { mode: 0o100640 }, 0o022, false), 0o640);
    assert.equal(finalMode(null, { mode: 0o106755 }, 0o022, true), 0o6755);
    assert.equal(finalMode(null, { mode: 0o106755 }, 0o022, false), 0o755);
    assert.equal(finalMode(null, { mode: 0o102745 }, 0o022, false), 0o2745, "setgid without group exec: locking");
  });

  it("is 0644 less the umask for a new file", () => {
    assert.equal(finalMode(null, null, 0o022, false), 0o644);
    assert.equal(finalMode(null, null, 0o077, true), 0o600);
  });
});

describe("atomic write: flushes behind the write", () => {
  /** A file handle whose datasync calls wait until released, counted. */
  const fakeFile = () => {
    const pending: { resolve: () => void; reject: (e: Error) => void }[] = [];
    return {
      pending,
      datasync: () => new Promise<void>((resolve, reject) => pending.push({ resolve, reject })),
    };
  };

  it("starts one every so many bytes, never two at once", async () => {
    const fh = fakeFile();
    const flush = new FlushBehind(fh, 100);
    flush.wrote(60);
    assert.equal(fh.pending.length, 0, "none before 100 bytes");
    flush.wrote(60);
    assert.equal(fh.pending.length, 1, "one at 120 bytes");
    flush.wrote(90);
    assert.equal(fh.pending.length, 1, "none while one is under way");
    fh.pending[0]?.resolve();
    await flush.settle();
    flush.wrote(9);
    assert.equal(fh.pending.length, 1, "counted from the one that started: 99 bytes since");
    flush.wrote(1);
    assert.equal(fh.pending.length, 2, "the bytes written during a flush count toward the next");
    const settled = flush.settle();
    let done = false;
    void settled.then(() => {
      done = true;
    });
    await new Promise((r) => setImmediate(r));
    assert.equal(done, false, "settle waits for the flush under way");
    fh.pending[1]?.resolve();
    await settled;
  });

  it("fails the write with a flush's error, and starts none after it", async () => {
    const fh = fakeFile();
    const flush = new FlushBehind(fh, 10);
    flush.wrote(10);
    fh.pending[0]?.reject(Object.assign(new Error("EIO: i/o error, fdatasync"), { code: "EIO" }));
    await assert.rejects(flush.settle(), { code: "EIO" });
    flush.wrote(100);
    assert.equal(fh.pending.length, 1, "no flush after a failed one");
    await assert.rejects(flush.settle(), { code: "EIO" }, "still failed at the fsync");
  });

  it("settles at once when none was started", async () => {
    await new FlushBehind(fakeFile(), 100).settle();
  });
});
