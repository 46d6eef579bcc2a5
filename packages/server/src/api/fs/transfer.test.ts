import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { Agent, request } from "node:http";
import { describe, it } from "node:test";
import { FS_BASE, fsUnit, HOME, qs } from "../../testing/fs-unit.js";
import { exchange } from "../../testing/http-exchange.js";

/** Spec 4.4: the filesystem API's reads and writes stream, against a real unit. */
describe("filesystem API", () => {
  const u = fsUnit();
  const { sh, write, read } = u;
  const base = FS_BASE;

  /** The unit's node processes (the agent, its fs worker), found by the unit's cgroup: pid and RSS in bytes. */
  const unitAgents = () =>
    readdirSync("/proc")
      .filter((p) => /^\d+$/.test(p))
      .flatMap((pid) => {
        try {
          if (!readFileSync(`/proc/${pid}/cgroup`, "utf8").includes(`/${u.unitId}\n`)) return [];
          const status = readFileSync(`/proc/${pid}/status`, "utf8");
          if (!/^Name:\s+node$/m.test(status)) return [];
          return [{ pid, rss: Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0) * 1024 }];
        } catch {
          return []; // gone meanwhile
        }
      });

  it("streams a 1 GiB write and read with bounded memory in the server, the agent and its worker", async () => {
    const total = 1024 * 1024 * 1024;
    const chunk = Buffer.alloc(1024 * 1024);
    for (let i = 0; i < chunk.length; i++) chunk[i] = (i * 31 + 7) & 255;
    // The unit's agent and unit-user worker exist (and have warmed up) before the baseline.
    assert.equal((await write("warm.txt", "w")).status, 200);
    assert.equal((await read("warm.txt")).text, "w");
    assert.ok(unitAgents().length >= 2, "the agent and its worker are found");
    let peak = 0;
    let agentPeak = 0;
    const sample = () => {
      peak = Math.max(peak, process.memoryUsage().rss);
      agentPeak = Math.max(
        agentPeak,
        unitAgents().reduce((sum, p) => sum + p.rss, 0),
      );
    };
    const rss0 = process.memoryUsage().rss;
    const agentRss0 = unitAgents().reduce((sum, p) => sum + p.rss, 0);
    const timer = setInterval(sample, 50);
    const url = new URL(u.s.url);
    const sent = createHash("sha256");
    try {
      const up = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request(
          {
            host: url.hostname,
            port: url.port,
            method: "PUT",
            path: `${base}/write?${qs({ path: "big.bin", workingDir: HOME })}`,
            headers: {
              authorization: `Bearer ${u.token}`,
              "content-type": "application/octet-stream",
              "content-length": total,
            },
          },
          (res) => {
            let body = "";
            res.setEncoding("utf8").on("data", (d: string) => {
              body += d;
            });
            res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
          },
        );
        req.on("error", reject);
        let n = 0;
        const pump = () => {
          while (n < total) {
            chunk[0] = n / chunk.length; // every MiB differs
            sent.update(chunk);
            n += chunk.length;
            if (!req.write(Buffer.from(chunk))) return void req.once("drain", pump);
          }
          req.end();
        };
        pump();
      });
      assert.equal(up.status, 200, up.body);
      assert.equal(JSON.parse(up.body).size, total);
      const got = createHash("sha256");
      let size = 0;
      const status = await new Promise<number>((resolve, reject) => {
        request(
          {
            host: url.hostname,
            port: url.port,
            path: `${base}/read?${qs({ path: "big.bin", workingDir: HOME })}`,
            headers: { authorization: `Bearer ${u.token}` },
          },
          (res) => {
            assert.equal(res.headers["content-length"], String(total));
            res.on("data", (d: Buffer) => {
              size += d.length;
              got.update(d);
            });
            res.on("end", () => resolve(res.statusCode ?? 0));
            res.on("error", reject);
          },
        )
          .on("error", reject)
          .end();
      });
      assert.equal(status, 200);
      assert.equal(size, total);
      assert.equal(got.digest("hex"), sent.digest("hex"));
    } finally {
      clearInterval(timer);
    }
    sample();
    const growth = (peak - rss0) / 1024 / 1024;
    assert.ok(growth < 64, `RSS grew by ${growth.toFixed(1)} MiB`);
    const agentGrowth = (agentPeak - agentRss0) / 1024 / 1024;
    assert.ok(agentGrowth < 64, `the agent's and worker's RSS grew by ${agentGrowth.toFixed(1)} MiB`);
    assert.equal(await sh(`stat -c %s ${HOME}/big.bin; rm ${HOME}/big.bin`), `${total}\n`);
  });

  it("a slow client: the bytes wait in the sockets, not in the server, the agent or its worker", async () => {
    const url = new URL(u.s.url);
    const rssNow = () => ({ server: process.memoryUsage().rss, agents: unitAgents().reduce((n, p) => n + p.rss, 0) });
    const mib = (n: number) => (n / 1024 / 1024).toFixed(1);
    // A write sent in uneven pieces, with pauses between some (the worker, or the agent asRoot, gathers
    // what arrives while it writes, and waits while nothing does): the file is the bytes sent, whole.
    for (const asRoot of [false, true]) {
      const sent = createHash("sha256");
      const up = await new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request(
          {
            host: url.hostname,
            port: url.port,
            method: "PUT",
            path: `${base}/write?${qs({ path: "slow-up.bin", workingDir: HOME, asRoot })}`,
            headers: { authorization: `Bearer ${u.token}`, "content-type": "application/octet-stream" },
          },
          (res) => {
            let body = "";
            res.setEncoding("utf8").on("data", (d: string) => {
              body += d;
            });
            res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
          },
        );
        req.on("error", reject);
        const sizes = [1, 70_000, 3 * 1024 * 1024, 17, 65_536, 5 * 1024 * 1024 + 3, 2, 1024 * 1024];
        let i = 0;
        const next = (): void => {
          if (i === sizes.length * 3) return void req.end();
          const piece = Buffer.alloc(sizes[i % sizes.length] as number, i);
          sent.update(piece);
          i++;
          const go = () => (i % 5 === 0 ? setTimeout(next, 300) : setImmediate(next));
          if (req.write(piece)) go();
          else req.once("drain", go);
        };
        next();
      });
      assert.equal(up.status, 200, `asRoot ${asRoot}: ${up.body}`);
      const size = (3 * 1024 * 1024 + 70_000 + 17 + 65_536 + 5 * 1024 * 1024 + 3 + 3 + 1024 * 1024) * 3;
      assert.equal(JSON.parse(up.body).size, size);
      assert.equal(await sh(`sha256sum < ${HOME}/slow-up.bin | cut -d' ' -f1`), `${sent.digest("hex")}\n`);
    }

    // A read whose client stops reading: what the server and the unit's processes hold stays small
    // (a few socket buffers' worth) however large the file; once the client reads on, it gets it whole.
    const total = 256 * 1024 * 1024;
    const want = (await sh(`head -c ${total} /dev/urandom | tee ${HOME}/slow.bin | sha256sum | cut -d' ' -f1`)).trim();
    assert.equal((await write("slow-warm.txt", "w")).status, 200);
    assert.equal((await read("slow-warm.txt")).text, "w");
    const rss0 = rssNow();
    const got = createHash("sha256");
    let n = 0;
    const growth = await new Promise<{ server: number; agents: number; status: number }>((resolve, reject) => {
      const req = request(
        {
          host: url.hostname,
          port: url.port,
          path: `${base}/read?${qs({ path: "slow.bin", workingDir: HOME })}`,
          headers: { authorization: `Bearer ${u.token}` },
        },
        (res) => {
          res.pause();
          res.on("data", (d: Buffer) => {
            n += d.length;
            got.update(d);
          });
          res.on("error", reject);
          setTimeout(() => {
            const now = rssNow();
            const held = { server: now.server - rss0.server, agents: now.agents - rss0.agents };
            res.on("end", () => resolve({ ...held, status: res.statusCode ?? 0 }));
            res.resume();
          }, 2000);
        },
      );
      req.on("error", reject);
      req.end();
    });
    assert.equal(growth.status, 200);
    assert.ok(growth.server < 32 * 1024 * 1024, `the server's RSS grew by ${mib(growth.server)} MiB`);
    assert.ok(growth.agents < 32 * 1024 * 1024, `the agent's and worker's RSS grew by ${mib(growth.agents)} MiB`);
    assert.equal(n, total);
    assert.equal(got.digest("hex"), want);
    await sh(`rm ${HOME}/slow.bin ${HOME}/slow-up.bin ${HOME}/slow-warm.txt`);
  });

  it("a client that leaves mid-read ends the transfer; the next reads are whole", async () => {
    await sh(`head -c 33554432 /dev/zero > ${HOME}/left.bin`);
    const url = new URL(u.s.url);
    const get = (leave: boolean) =>
      new Promise<number>((resolve, reject) => {
        const req = request(
          {
            host: url.hostname,
            port: url.port,
            path: `${base}/read?${qs({ path: "left.bin", workingDir: HOME })}`,
            headers: { authorization: `Bearer ${u.token}` },
          },
          (res) => {
            let size = 0;
            res.on("data", (d: Buffer) => {
              size += d.length;
              if (leave) req.destroy();
            });
            res.on("end", () => resolve(size));
            res.on("close", () => resolve(size));
            res.on("error", () => resolve(size));
          },
        );
        req.on("error", (err) => (leave ? resolve(0) : reject(err)));
        req.end();
      });
    for (let i = 0; i < 3; i++) {
      assert.ok((await get(true)) < 33554432);
      assert.equal(await get(false), 33554432);
    }
  });

  it("an upload refused before its body was read: the rest is read and dropped, the connection carries the next request", async () => {
    // The unit user may not write in /root: the agent refuses at once, with most of the 8 MiB still
    // on its way. Left unread, the rest blocked the connection (and the server's stop) until the
    // keep-alive timeout, 30 s, ended it (RFC 9112 §9.3: the next request starts after this body).
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    const headers = { authorization: `Bearer ${u.token}`, "content-type": "application/octet-stream" };
    try {
      for (let i = 0; i < 2; i++) {
        const refused = await exchange(
          agent,
          `${u.s.url}${base}/write?${qs({ path: "/root/refused.bin", workingDir: HOME })}`,
          { method: "PUT", headers, body: Buffer.alloc(8 * 1024 * 1024, 7), timeoutMs: 10_000 },
        );
        assert.equal(refused.status, 400, refused.body);
        assert.equal(JSON.parse(refused.body).code, "EACCES");
        const next = await exchange(agent, `${u.s.url}${base}/list?${qs({ path: HOME, workingDir: HOME })}`, {
          headers,
          timeoutMs: 10_000,
        });
        assert.equal(next.status, 200, next.body);
        assert.equal(next.socket, refused.socket, "the next request went on the same connection");
      }
      assert.equal(await sh("ls /root/refused.bin 2>/dev/null; echo end", "root"), "end\n");
    } finally {
      agent.destroy();
    }
  });
});
