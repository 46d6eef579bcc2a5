import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  chmodSync,
  chownSync,
  linkSync,
  lstatSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import WebSocket from "ws";
import { type RunningAgent, startAgent } from "../testing/harness.js";
import { isWriteTemp } from "./write.js";

// The agent's /fs routes, run by the real bundle as root with the unit user 1000: asRoot work in the
// agent, the rest in the unit user's worker process (worker.ts).

const isRoot = process.getuid?.() === 0;

function call(
  agent: RunningAgent,
  method: string,
  path: string,
  body?: string | Buffer,
): Promise<{ status: number; text: string; json: () => Record<string, unknown> }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: agent.socket, method, path }, (res) => {
      const parts: Buffer[] = [];
      res.on("data", (d: Buffer) => parts.push(d));
      res.on("end", () => {
        const text = Buffer.concat(parts).toString("utf8");
        resolve({ status: res.statusCode ?? 0, text, json: () => JSON.parse(text) });
      });
    });
    req.on("error", reject);
    req.end(body);
  });
}

const q = (o: Record<string, string>) => new URLSearchParams(o).toString();

/** The temporary files of writes in progress in `dir` (write.ts). */
const temps = (dir: string) => readdirSync(dir).filter((n) => isWriteTemp(n));

/**
 * A PUT /fs/write whose client announces `total` bytes, sends `sent` of them, waits until the agent has
 * its temporary file in `dir`, and then goes away.
 */
async function cutShortWrite(agent: RunningAgent, path: string, dir: string, total: number, sent: number) {
  const req = request({
    socketPath: agent.socket,
    method: "PUT",
    path: `/fs/write?${path}`,
    headers: { "content-type": "application/octet-stream", "content-length": total },
  });
  req.on("error", () => {});
  req.write(Buffer.alloc(sent, "n"));
  for (let i = 0; i < 200 && temps(dir).length === 0; i++) await new Promise((r) => setTimeout(r, 10));
  const seen = temps(dir);
  req.destroy();
  for (let i = 0; i < 200 && temps(dir).length > 0; i++) await new Promise((r) => setTimeout(r, 10));
  return seen;
}

describe("agent filesystem routes", { skip: !isRoot && "needs root (runs the worker as uid 1000)" }, () => {
  let agent: RunningAgent;
  let home: string;
  before(async () => {
    agent = await startAgent({ UMS_AGENT_UID: "1000", UMS_AGENT_GID: "1000" });
    chmodSync(agent.dir, 0o755);
    home = agent.home;
    chownSync(home, 1000, 1000);
  });
  after(() => agent?.stop());

  it("runs unit-user work in a worker process with uid/gid 1000, and asRoot work as root", async () => {
    const w = await call(agent, "PUT", `/fs/write?${q({ path: join(home, "u.txt"), mode: "0600" })}`, "mine");
    assert.equal(w.status, 200, w.text);
    assert.deepEqual(w.json(), { path: join(home, "u.txt"), size: 4, mode: "0600" });
    assert.equal(statSync(join(home, "u.txt")).uid, 1000);
    const denied = await call(agent, "PUT", `/fs/write?${q({ path: join(agent.dir, "r.txt") })}`, "x");
    assert.equal(denied.status, 400);
    assert.deepEqual(denied.json(), {
      error: `EACCES: permission denied, open '${join(agent.dir, "r.txt")}'`,
      code: "EACCES",
      path: join(agent.dir, "r.txt"),
    });
    const root = await call(agent, "PUT", `/fs/write?${q({ path: join(agent.dir, "r.txt"), as: "root" })}`, "x");
    assert.equal(root.status, 200, root.text);
    assert.equal(statSync(join(agent.dir, "r.txt")).uid, 0);
    // the worker: a child of the agent, running as 1000:1000 with no supplementary groups
    const pids = execFileSync("pgrep", ["-P", String(agent.proc.pid), "-f", "fs-worker"])
      .toString()
      .trim();
    const status = readFileSync(`/proc/${pids.split("\n")[0]}/status`, "utf8");
    assert.match(status, /^Uid:\s+1000\s+1000\s+1000\s+1000$/m);
    assert.match(status, /^Gid:\s+1000\s+1000\s+1000\s+1000$/m);
    assert.match(status, /^Groups:\s*$/m);
  });

  it("GET /fs/connect (Upgrade: ums-fs) hands the connection to the process of that identity", async () => {
    const viaConnect = (as: string, method: string, path: string, body?: string) =>
      new Promise<{ status: number; text: string }>((resolve, reject) => {
        const up = request({
          socketPath: agent.socket,
          path: `/fs/connect?as=${as}`,
          headers: { connection: "Upgrade", upgrade: "ums-fs" },
        });
        up.on("upgrade", (_res, socket) => {
          const req = request(
            { createConnection: () => socket, method, path, headers: { connection: "close" } },
            (res) => {
              let text = "";
              res.setEncoding("utf8").on("data", (d: string) => {
                text += d;
              });
              res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
            },
          );
          req.on("error", reject);
          req.end(body);
        });
        up.on("error", reject);
        up.end();
      });
    for (let i = 0; i < 10; i++) {
      const w = await viaConnect("user", "PUT", `/fs/write?${q({ path: join(home, `k${i}`) })}`, `k${i}`);
      assert.equal(w.status, 200, w.text);
      assert.equal(statSync(join(home, `k${i}`)).uid, 1000);
      assert.equal((await viaConnect("user", "GET", `/fs/read?${q({ path: join(home, `k${i}`) })}`)).text, `k${i}`);
    }
    const r = await viaConnect("root", "PUT", `/fs/write?${q({ path: join(agent.dir, "k-root") })}`, "r");
    assert.equal(r.status, 200, r.text);
    assert.equal(statSync(join(agent.dir, "k-root")).uid, 0);
    const bad = await call(agent, "GET", "/fs/connect?as=nobody");
    assert.equal(bad.status, 404); // a plain GET is no upgrade: no such route
  });

  for (const how of ["on an fs connection", "in one exchange"] as const)
    it(`reads raw (GET /fs/read upgraded to ums-fs-bytes, ${how}): the size, the bytes, then the end`, async () => {
      /**
       * A raw read as identity `as`: on a connection of that identity (/fs/connect first), or asked
       * of the agent itself (/fs/read?as=); the answer's status and headers, and every byte after it.
       */
      const rawRead = (as: string, path: string, upgrade = "ums-fs-bytes") =>
        new Promise<{ status: number; headers: Record<string, unknown>; body: Buffer }>((resolve, reject) => {
          const read = (
            connection: { createConnection: () => import("node:stream").Duplex } | { socketPath: string },
          ) => {
            const req = request({
              ...connection,
              path: `/fs/read?${q(how === "in one exchange" ? { as, path } : { path })}`,
              headers: { connection: "Upgrade", upgrade },
            });
            const collect = (
              status: number,
              headers: Record<string, unknown>,
              from: NodeJS.ReadableStream,
              head = Buffer.alloc(0),
            ) => {
              const parts: Buffer[] = [head];
              from.on("data", (d: Buffer) => parts.push(d));
              from.on("end", () => resolve({ status, headers, body: Buffer.concat(parts) }));
            };
            req.on("upgrade", (res, raw, head) => collect(101, res.headers, raw, head));
            req.on("response", (res) => collect(res.statusCode ?? 0, res.headers, res));
            req.on("error", reject);
            req.end();
          };
          if (how === "in one exchange") return read({ socketPath: agent.socket });
          const up = request({
            socketPath: agent.socket,
            path: `/fs/connect?as=${as}`,
            headers: { connection: "Upgrade", upgrade: "ums-fs" },
          });
          up.on("upgrade", (_res, socket) => read({ createConnection: () => socket }));
          up.on("error", reject);
          up.end();
        });
      const data = Buffer.alloc(3 * 1024 * 1024 + 5);
      for (let i = 0; i < data.length; i++) data[i] = (i * 7 + (i >> 12)) & 255;
      writeFileSync(join(home, "raw.bin"), data);
      chownSync(join(home, "raw.bin"), 1000, 1000);
      for (const as of ["user", "root"]) {
        const r = await rawRead(as, join(home, "raw.bin"));
        assert.equal(r.status, 101);
        assert.equal(r.headers["x-ums-size"], String(data.length));
        assert.ok(r.body.equals(data), `${as}: the bytes as written`);
      }
      const empty = await rawRead("user", "/dev/null");
      assert.equal(empty.status, 101);
      assert.equal(empty.headers["x-ums-size"], undefined, "no size for what is not a regular file");
      assert.equal(empty.body.length, 0);
      writeFileSync(join(home, "root-only"), "secret");
      chmodSync(join(home, "root-only"), 0o600);
      const denied = await rawRead("user", join(home, "root-only"));
      assert.equal(denied.status, 400);
      assert.equal(JSON.parse(denied.body.toString()).code, "EACCES");
      assert.equal((await rawRead("root", join(home, "root-only"))).body.toString(), "secret");
      const missing = await rawRead("user", join(home, "none"));
      assert.deepEqual([missing.status, JSON.parse(missing.body.toString()).code], [404, "ENOENT"]);
      assert.equal(JSON.parse((await rawRead("user", home)).body.toString()).code, "EISDIR");
      assert.equal((await rawRead("user", "relative")).status, 400);
      assert.equal((await rawRead("user", join(home, "raw.bin"), "websocket")).status, 400);
      if (how === "in one exchange") assert.equal((await rawRead("nobody", join(home, "raw.bin"))).status, 400);
    });

  it("streams concurrent reads and writes through the worker intact", async () => {
    const bodies = [0, 1, 2, 3].map((i) => Buffer.alloc(8 * 1024 * 1024 + i, i + 1));
    const writes = await Promise.all(
      bodies.map((b, i) => call(agent, "PUT", `/fs/write?${q({ path: join(home, `c${i}.bin`) })}`, b)),
    );
    for (const [i, w] of writes.entries()) assert.equal(w.json().size, bodies[i]?.length);
    const reads = await Promise.all(
      bodies.map(
        (_, i) =>
          new Promise<string>((resolve, reject) => {
            request({ socketPath: agent.socket, path: `/fs/read?${q({ path: join(home, `c${i}.bin`) })}` }, (res) => {
              const h = createHash("sha256");
              res.on("data", (d: Buffer) => h.update(d));
              res.on("end", () => resolve(h.digest("hex")));
            })
              .on("error", reject)
              .end();
          }),
      ),
    );
    reads.forEach((sum, i) => {
      assert.equal(
        sum,
        createHash("sha256")
          .update(bodies[i] as Buffer)
          .digest("hex"),
      );
    });
  });

  it("reports errno codes with the path they are about", async () => {
    mkdirSync(join(home, "d"));
    chownSync(join(home, "d"), 1000, 1000);
    writeFileSync(join(home, "d", "f"), "x");
    const notEmpty = await call(agent, "POST", "/fs/delete?as=root", JSON.stringify({ path: join(home, "d") }));
    assert.equal(notEmpty.status, 400);
    assert.equal(notEmpty.json().code, "ENOTEMPTY");
    const missing = await call(agent, "GET", `/fs/list?${q({ path: join(home, "none") })}`);
    assert.equal(missing.status, 404);
    assert.equal(missing.json().path, join(home, "none"));
    const bad = await call(agent, "GET", `/fs/list?${q({ path: "relative" })}`);
    assert.deepEqual(bad.json(), { errors: ["path: must be an absolute path"], code: "UMS_VALIDATION" });
    const badMode = await call(agent, "PUT", `/fs/write?${q({ path: join(home, "m"), mode: "9" })}`, "x");
    assert.equal(badMode.status, 400);
  });

  it("replaces a file whole or not at all: a body cut short leaves it as it was, and no temporary file", async () => {
    for (const as of ["user", "root"]) {
      const file = join(home, `whole-${as}.txt`);
      const put = (body: string) => call(agent, "PUT", `/fs/write?${q({ path: file, as })}`, body);
      assert.equal((await put("acknowledged\n")).status, 200);
      const before = statSync(file);
      const seen = await cutShortWrite(agent, q({ path: file, as }), home, 1024 * 1024, 64 * 1024);
      assert.equal(seen.length, 1, `${as}: the body went to a temporary file: ${seen}`);
      assert.match(seen[0] ?? "", new RegExp(`^\\.whole-${as}\\.txt\\.ums-write-[0-9a-f]{16}$`));
      assert.deepEqual(temps(home), [], `${as}: the temporary file is removed`);
      assert.equal(readFileSync(file, "utf8"), "acknowledged\n", `${as}: the file is as it was`);
      assert.equal(statSync(file).ino, before.ino);
      // a new file cut short is not made at all
      const fresh = join(home, `fresh-${as}.txt`);
      await cutShortWrite(agent, q({ path: fresh, as }), home, 100_000, 10);
      assert.throws(() => statSync(fresh), /ENOENT/);
      assert.deepEqual(temps(home), []);
      // a complete write replaces it (a new inode), and answers as before
      const w = await put("new");
      assert.equal(w.status, 200, w.text);
      assert.deepEqual(w.json(), { path: file, size: 3, mode: "0644" });
      assert.equal(readFileSync(file, "utf8"), "new");
      assert.notEqual(statSync(file).ino, before.ino);
    }
  });

  it("keeps the owner and mode of the file it replaces; mode= is exact", async () => {
    const file = join(home, "kept.txt");
    writeFileSync(file, "old");
    chownSync(file, 1234, 1234);
    chmodSync(file, 0o640);
    const w = await call(agent, "PUT", `/fs/write?${q({ path: file, as: "root" })}`, "new content");
    assert.deepEqual(w.json(), { path: file, size: 11, mode: "0640" });
    const st = statSync(file);
    assert.deepEqual([st.uid, st.gid, st.mode & 0o7777], [1234, 1234, 0o640]);
    const m = await call(agent, "PUT", `/fs/write?${q({ path: file, as: "root", mode: "0604" })}`, "x");
    assert.equal(m.json().mode, "0604");
    assert.deepEqual([statSync(file).uid, statSync(file).mode & 0o7777], [1234, 0o604]);
    // the unit user's own file, written by the unit user
    const mine = join(home, "mine.txt");
    writeFileSync(mine, "old");
    chownSync(mine, 1000, 1000);
    chmodSync(mine, 0o640);
    assert.equal((await call(agent, "PUT", `/fs/write?${q({ path: mine })}`, "new")).json().mode, "0640");
    assert.deepEqual([statSync(mine).uid, statSync(mine).gid], [1000, 1000]);
  });

  it("writes in place what a replacement would change: hard links, another owner's file, a mount point", async () => {
    const a = join(home, "linked-a");
    const b = join(home, "linked-b");
    writeFileSync(a, "old");
    chownSync(a, 1000, 1000);
    linkSync(a, b);
    const ino = statSync(a).ino;
    const w = await call(agent, "PUT", `/fs/write?${q({ path: a })}`, "both");
    assert.equal(w.status, 200, w.text);
    assert.equal(statSync(a).ino, ino, "the same inode");
    assert.equal(readFileSync(b, "utf8"), "both", "every name sees the new content");
    // a file of root's the unit user may write (0666): it cannot give a new file to root, so in place
    const shared = join(home, "shared");
    writeFileSync(shared, "old old old");
    chmodSync(shared, 0o666);
    const s = await call(agent, "PUT", `/fs/write?${q({ path: shared })}`, "new");
    assert.equal(s.status, 200, s.text);
    assert.deepEqual([statSync(shared).uid, statSync(shared).mode & 0o777], [0, 0o666]);
    assert.equal(readFileSync(shared, "utf8"), "new");
    // a file bound over another (as runc binds /etc/hosts): rename(2) over a mount point is EBUSY
    const src = join(agent.dir, "bind-src");
    const bound = join(home, "bound");
    writeFileSync(src, "old");
    writeFileSync(bound, "hidden");
    execFileSync("mount", ["--bind", src, bound]);
    try {
      const b = await call(agent, "PUT", `/fs/write?${q({ path: bound, as: "root" })}`, "through the mount");
      assert.equal(b.status, 200, b.text);
      assert.equal(readFileSync(src, "utf8"), "through the mount");
    } finally {
      execFileSync("umount", [bound]);
    }
    assert.equal(readFileSync(bound, "utf8"), "hidden");
    assert.deepEqual(temps(home), []);
  });

  it("refuses FIFOs, devices and directories, and replaces the target of a symlink, not the link", async () => {
    execFileSync("mkfifo", [join(home, "fifo")]);
    const fifo = await call(agent, "PUT", `/fs/write?${q({ path: join(home, "fifo"), as: "root" })}`, "x");
    assert.equal(fifo.status, 400);
    assert.ok(["ENXIO", "EINVAL"].includes(fifo.json().code as string), fifo.text); // ENXIO: no reader
    execFileSync("mknod", [join(home, "null"), "c", "1", "3"]); // a /dev/null of the test's own
    const dev = await call(agent, "PUT", `/fs/write?${q({ path: join(home, "null"), as: "root" })}`, "x");
    assert.equal(dev.json().code, "EINVAL");
    assert.ok(lstatSync(join(home, "null")).isCharacterDevice());
    assert.equal((await call(agent, "PUT", `/fs/write?${q({ path: home })}`, "x")).json().code, "EISDIR");
    mkdirSync(join(home, "real"));
    chownSync(join(home, "real"), 1000, 1000);
    writeFileSync(join(home, "real", "t"), "old");
    chownSync(join(home, "real", "t"), 1000, 1000);
    symlinkSync("real/t", join(home, "to-t"));
    symlinkSync("real", join(home, "to-real"));
    for (const via of ["to-t", "to-real/t"]) {
      const w = await call(agent, "PUT", `/fs/write?${q({ path: join(home, via) })}`, via);
      assert.equal(w.status, 200, w.text);
      assert.equal(readFileSync(join(home, "real", "t"), "utf8"), via);
    }
    assert.ok(lstatSync(join(home, "to-t")).isSymbolicLink(), "the link is still a link");
    assert.deepEqual(temps(join(home, "real")), []);
  });

  it("reports watch events over its websocket", async () => {
    mkdirSync(join(home, "w"));
    const ws = new WebSocket(`ws+unix://${agent.socket}:/fs/watch`);
    const got: Array<Record<string, unknown>> = [];
    ws.on("message", (d) => got.push(JSON.parse(String(d))));
    await new Promise((r) => ws.once("open", r));
    ws.send(JSON.stringify({ type: "subscribe", path: "w", workingDir: home }));
    const wait = async (pred: (e: Record<string, unknown>) => boolean) => {
      for (let i = 0; i < 50 && !got.some(pred); i++) await new Promise((r) => setTimeout(r, 50));
      assert.ok(got.some(pred), JSON.stringify(got));
    };
    await wait((e) => e.type === "subscribed");
    writeFileSync(join(home, "w", "a"), "1");
    await wait((e) => e.event === "create" && e.path === join(home, "w", "a"));
    // a write through the API: its temporary file is never reported; a replacement is a modify
    const put = (body: string) =>
      call(agent, "PUT", `/fs/write?${q({ path: join(home, "w", "b"), as: "root" })}`, body);
    assert.equal((await put("1")).status, 200);
    await wait((e) => e.event === "create" && e.path === join(home, "w", "b"));
    await new Promise((r) => setTimeout(r, 150));
    assert.equal((await put("22")).status, 200);
    await wait((e) => e.event === "modify" && e.path === join(home, "w", "b"));
    // a subscription to the file itself follows it through its replacements
    ws.send(JSON.stringify({ type: "subscribe", path: join(home, "w", "b") }));
    await wait((e) => e.type === "subscribed" && JSON.stringify(e.paths) === JSON.stringify([join(home, "w", "b")]));
    const from = got.length;
    for (const body of ["333", "4444"]) {
      const n = got.length;
      assert.equal((await put(body)).status, 200);
      for (let i = 0; i < 50 && got.length === n; i++) await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 150));
    }
    assert.ok(
      got.slice(from).filter((e) => e.event === "modify" && e.path === join(home, "w", "b")).length >= 4, // both subscriptions
      JSON.stringify(got.slice(from)),
    );
    ws.close();
    assert.ok(!got.some((e) => typeof e.path === "string" && isWriteTemp(e.path.split("/").pop() ?? "")));
    assert.ok(
      got.every((e) => e.event !== "rename" && e.event !== "delete"),
      JSON.stringify(got),
    );
  });
});
