import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { readdirSync, readFileSync } from "node:fs";
import { Agent, request } from "node:http";
import { describe, it } from "node:test";
import { fdSlotsInUse } from "../../agent/fd-read.js";
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
    // The sends with sendfile (issue #16) of the reads left behind ended, and freed their threads' slots.
    const t0 = Date.now();
    while (fdSlotsInUse() > 0 && Date.now() - t0 < 5000) await new Promise((r) => setTimeout(r, 50));
    assert.equal(fdSlotsInUse(), 0);
  });

  /** `GET url` on `agent`: status, the body's length and sha256, the headers, and the socket it went on. */
  const getBytes = (agent: Agent, url: string, method = "GET") =>
    new Promise<{ status: number; size: number; sha: string; length?: string; socket: unknown }>((resolve, reject) => {
      const req = request(url, { agent, method, headers: { authorization: `Bearer ${u.token}` } }, (res) => {
        const hash = createHash("sha256");
        let size = 0;
        res.on("data", (d: Buffer) => {
          size += d.length;
          hash.update(d);
        });
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            size,
            sha: hash.digest("hex"),
            length: res.headers["content-length"],
            socket: req.socket,
          }),
        );
        res.on("error", reject);
      });
      req.on("error", reject);
      req.end();
    });

  /** The counter of reads answered with a descriptor, by outcome (GET /metrics). */
  const descriptors = async () => {
    const m = await u.s.api("GET", "/metrics", { token: u.token });
    assert.equal(m.status, 200, m.text);
    const of = (outcome: string) =>
      Number(new RegExp(`^ums_fs_read_descriptors_total\\{outcome="${outcome}"\\} (\\d+)$`, "m").exec(m.text)?.[1]);
    return { sent: of("sent"), refused: of("refused") };
  };

  it("a large read goes as the file's descriptor, sent with sendfile: whole, as the unit user and root, and the connection carries the next requests (a HEAD too)", async () => {
    const size = 3 * 1024 * 1024 + 5;
    const want = (await sh(`head -c ${size} /dev/urandom | tee ${HOME}/sent.bin | sha256sum | cut -d' ' -f1`)).trim();
    const before = await descriptors();
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const url = (asRoot: boolean) =>
        `${u.s.url}${base}/read?${qs({ path: "sent.bin", workingDir: HOME, ...(asRoot && { asRoot }) })}`;
      const first = await getBytes(agent, url(false));
      const second = await getBytes(agent, url(true));
      // HEAD: the head alone (a body sent with sendfile regardless would break the connection).
      const head = await getBytes(agent, url(false), "HEAD");
      assert.equal(head.status, 200);
      assert.equal(head.length, String(size));
      assert.equal(head.size, 0);
      assert.equal(head.socket, first.socket);
      for (const got of [first, second]) {
        assert.equal(got.status, 200);
        assert.equal(got.length, String(size));
        assert.equal(got.size, size);
        assert.equal(got.sha, want);
      }
      const next = await exchange(agent, `${u.s.url}${base}/list?${qs({ path: HOME, workingDir: HOME })}`, {
        headers: { authorization: `Bearer ${u.token}` },
      });
      assert.equal(next.status, 200, next.body);
      assert.equal(second.socket, first.socket, "both reads went on one connection");
      assert.equal(next.socket, first.socket, "and the next request too");
    } finally {
      agent.destroy();
    }
    const after = await descriptors();
    assert.equal(after.sent - before.sent, 3, "the reads (and the HEAD) went as descriptors");
    assert.equal(after.refused, before.refused);
    // A file below the threshold goes as bytes, as before.
    await sh(`head -c 1000 /dev/zero > ${HOME}/small.bin`);
    assert.equal((await read("small.bin")).text.length, 1000);
    assert.equal((await descriptors()).sent, after.sent);
    await sh(`rm ${HOME}/sent.bin ${HOME}/small.bin`);
  });

  it("many large reads at once, some of whose clients leave: the others whole, nothing held after", async () => {
    // More reads than a unit's slots for descriptors (4): the rest go as bytes, at the same time.
    const size = 4 * 1024 * 1024 + 1;
    const want = (await sh(`head -c ${size} /dev/urandom | tee ${HOME}/many.bin | sha256sum | cut -d' ' -f1`)).trim();
    const fds0 = readdirSync("/proc/self/fd").length;
    const url = `${u.s.url}${base}/read?${qs({ path: "many.bin", workingDir: HOME })}`;
    const leaving = (i: number) =>
      new Promise<void>((resolve) => {
        const req = request(url, { headers: { authorization: `Bearer ${u.token}` } }, (res) => {
          res.once("data", () => setTimeout(() => req.destroy(), i % 3));
          res.on("error", () => resolve());
          res.on("close", () => resolve());
        });
        req.on("error", () => resolve());
        req.end();
      });
    const agents = Array.from({ length: 12 }, () => new Agent({ keepAlive: false }));
    try {
      const whole = agents.map((a) => getBytes(a, url));
      const left = Array.from({ length: 8 }, (_, i) => leaving(i));
      const got = await Promise.all(whole);
      await Promise.all(left);
      for (const g of got) {
        assert.equal(g.status, 200);
        assert.equal(g.size, size);
        assert.equal(g.sha, want);
      }
    } finally {
      for (const a of agents) a.destroy();
    }
    const t0 = Date.now();
    while ((fdSlotsInUse() > 0 || readdirSync("/proc/self/fd").length > fds0 + 4) && Date.now() - t0 < 10_000) {
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(fdSlotsInUse(), 0, "every descriptor's slot is free");
    const fds = readdirSync("/proc/self/fd").length;
    assert.ok(fds <= fds0 + 4, `the server holds ${fds - fds0} more descriptors than before`);
    await sh(`rm ${HOME}/many.bin`);
  });

  it("a file on another filesystem of the unit (its /dev/shm, a tmpfs): the descriptor is refused, and the read goes whole as bytes", async () => {
    // The host sends only files on the unit's own device (agent/fd-read.ts); one elsewhere (a tmpfs,
    // and so procfs or a FUSE mount the unit made) is refused after the agent sent it, and read again.
    const size = 2 * 1024 * 1024;
    const want = (await sh(`head -c ${size} /dev/urandom | tee /dev/shm/shm.bin | sha256sum | cut -d' ' -f1`)).trim();
    const before = await descriptors();
    const agent = new Agent({ keepAlive: false });
    try {
      const got = await getBytes(agent, `${u.s.url}${base}/read?${qs({ path: "/dev/shm/shm.bin", workingDir: HOME })}`);
      assert.equal(got.status, 200);
      assert.equal(got.size, size);
      assert.equal(got.sha, want);
    } finally {
      agent.destroy();
    }
    const after = await descriptors();
    assert.equal(after.refused - before.refused, 1, "the descriptor was refused");
    assert.equal(after.sent, before.sent);
    assert.equal(fdSlotsInUse(), 0);
    await sh("rm /dev/shm/shm.bin");
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
