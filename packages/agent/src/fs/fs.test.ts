import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { chmodSync, chownSync, mkdirSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import WebSocket from "ws";
import { type RunningAgent, startAgent } from "../testing/harness.js";

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

  it("reads raw (GET /fs/read upgraded to ums-fs-bytes): the size, the bytes, then the end", async () => {
    /** A raw read on a connection of identity `as`: the answer's status and headers, and every byte after it. */
    const rawRead = (as: string, path: string, upgrade = "ums-fs-bytes") =>
      new Promise<{ status: number; headers: Record<string, unknown>; body: Buffer }>((resolve, reject) => {
        const up = request({
          socketPath: agent.socket,
          path: `/fs/connect?as=${as}`,
          headers: { connection: "Upgrade", upgrade: "ums-fs" },
        });
        up.on("upgrade", (_res, socket) => {
          const req = request({
            createConnection: () => socket,
            path: `/fs/read?${q({ path })}`,
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
        });
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
    ws.close();
  });
});
