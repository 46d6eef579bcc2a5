import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { closeSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { fdSlotsInUse, receiveFd, takeFdSlot } from "./fd-read.js";

// Issue #16: the descriptor a unit's agent sends for a large read comes from the attacker (root in a
// unit controls its agent). Here the agent's end is a python process that sends whatever it is told
// (the kernel objects are real); only a regular file on the unit's device, open for reading, sent
// alone after the "go" byte, is taken. Everything else is closed and refused, and nothing leaks.

const ATTACKER = String.raw`
import os, socket, sys, time
path, case, good, other = sys.argv[1:5]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(path)
if case == "close":
    s.close(); sys.exit(0)
assert s.recv(1) == b"g"
def send(*fds, byte=b"F"):
    socket.send_fds(s, [byte], list(fds))
if case == "good": send(os.open(good, os.O_RDONLY))
elif case == "write-only": send(os.open(good, os.O_WRONLY))
elif case == "o-path": send(os.open(good, os.O_PATH))
elif case == "other-device": send(os.open(other, os.O_RDONLY))
elif case == "proc": send(os.open("/proc/self/status", os.O_RDONLY))
elif case == "fifo":
    f = os.path.join(os.path.dirname(good), "fifo")
    os.mkfifo(f)
    send(os.open(f, os.O_RDONLY | os.O_NONBLOCK))
elif case == "socket": send(s.fileno())
elif case == "two": send(os.open(good, os.O_RDONLY), os.open(good, os.O_RDONLY))
elif case == "many": send(*[os.open(good, os.O_RDONLY) for _ in range(8)])
elif case == "no-descriptor": s.send(b"F")
elif case == "wrong-byte": send(os.open(good, os.O_RDONLY), byte=b"X")
elif case == "silent": time.sleep(5)
s.close()
`;

describe("a read's descriptor from a unit's agent (agent/fd-read.ts)", () => {
  let dir: string;
  let good: string;
  let other: string;
  let server: Server;
  let sockPath: string;
  const accepted: ((s: Socket) => void)[] = [];

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), "ums-fd-read-"));
    good = join(dir, "file");
    writeFileSync(good, "the unit's file\n");
    // Another device than `dir`'s (tmpfs), as a file on a mount of the unit's own would be.
    other = join("/dev/shm", `ums-fd-read-${process.pid}`);
    writeFileSync(other, "elsewhere\n");
    assert.notEqual(statSync(other).dev, statSync(dir).dev);
    sockPath = join(dir, "agent.sock");
    server = createServer({ pauseOnConnect: true }, (s) => accepted.shift()?.(s));
    await new Promise<void>((r) => server.listen(sockPath, r));
  });

  after(() => {
    server.close();
    rmSync(dir, { recursive: true, force: true });
    rmSync(other, { force: true });
  });

  /** What receiveFd makes of the attacker's `kind` of answer: the file's text, or the refusal. */
  async function attempt(kind: string, timeoutMs = 3000): Promise<{ text?: string; size?: number; refused?: string }> {
    const conn = new Promise<Socket>((r) => accepted.push(r));
    const py = spawn("python3", ["-c", ATTACKER, sockPath, kind, good, other], { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    py.stderr.on("data", (d) => {
      stderr += d;
    });
    const exited = new Promise<void>((r) => py.once("exit", () => r()));
    try {
      const socket = await conn;
      const slot = takeFdSlot(`test-${kind}`);
      assert.ok(slot, "a slot is free");
      try {
        const { fd, size } = await receiveFd(socket, statSync(dir).dev, slot, timeoutMs);
        try {
          return { text: readFileSync(`/proc/self/fd/${fd}`, "utf8"), size };
        } finally {
          slot.release();
          closeSync(fd);
        }
      } catch (err) {
        return { refused: (err as Error).message };
      }
    } finally {
      py.kill();
      await exited;
      rmSync(join(dir, "fifo"), { force: true });
      assert.ok(!/Traceback/.test(stderr), stderr);
    }
  }

  const openFds = () => readdirSync("/proc/self/fd").length;

  it("takes a regular file on the unit's device, opened for reading, sent alone", async () => {
    const got = await attempt("good");
    assert.equal(got.text, "the unit's file\n");
    assert.equal(got.size, 16);
  });

  for (const [kind, why] of [
    ["write-only", /not open for reading/],
    ["o-path", /not open for reading/],
    ["other-device", /not on the unit's filesystem/],
    ["proc", /not on the unit's filesystem/],
    ["fifo", /not a regular file/],
    ["socket", /not a regular file/],
    ["two", /not one descriptor/],
    ["many", /more than one descriptor/],
    ["no-descriptor", /not one descriptor/],
    ["wrong-byte", /not one descriptor/],
    ["close", /closed the connection|go byte could not be written|reset by peer/],
  ] as const) {
    it(`refuses ${kind}, and keeps nothing of it`, async () => {
      const before = openFds();
      const got = await attempt(kind);
      assert.match(got.refused ?? `taken: ${got.text}`, why);
      assert.equal(openFds(), before, "no descriptor left open");
      assert.equal(fdSlotsInUse(), 0, "the slot is free again");
    });
  }

  it("an agent that never sends: refused at the timeout, off node's thread", async () => {
    const started = performance.now();
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 20);
    const got = await attempt("silent", 600);
    clearInterval(ticker);
    assert.match(got.refused ?? "", /did not come in time|no descriptor came in time/);
    assert.ok(performance.now() - started < 3000);
    assert.ok(ticks >= 15, `the event loop ran meanwhile (${ticks} ticks)`);
    assert.equal(fdSlotsInUse(), 0);
  });

  it("slots are bounded, per unit and in all", () => {
    const mine = [1, 2, 3, 4].map(() => takeFdSlot("unit-a"));
    assert.ok(mine.every(Boolean));
    assert.equal(takeFdSlot("unit-a"), null, "a unit holds at most 4");
    const others = Array.from({ length: 12 }, (_, i) => takeFdSlot(`unit-${i}`));
    assert.ok(others.every(Boolean));
    assert.equal(takeFdSlot("unit-z"), null, "16 in all");
    for (const s of [...mine, ...others]) s?.release();
    mine[0]?.release(); // a second release changes nothing
    assert.equal(fdSlotsInUse(), 0);
  });
});
