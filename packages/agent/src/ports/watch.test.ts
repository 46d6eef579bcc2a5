// Port notifications (spec 6.5): parsing of /proc/net/tcp, and port_opened/port_closed on exec
// websockets when a process of the unit starts and stops listening.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { after, before, describe, test } from "node:test";
import { ExecClient, query, type RunningAgent, startAgent } from "../testing/harness.js";
import { parseProcNetTcp } from "./watch.js";

const SAMPLE_TCP = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 51234 1 0000000000000000 100 0 0 10 0
   1: 0100007F:1F90 0100007F:C350 01 00000000:00000000 00:00000000 00000000  1000        0 51299 1 0000000000000000 20 4 30 10 -1
   2: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1111 1 0000000000000000 100 0 0 10 0
`;
const SAMPLE_TCP6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000000000000:0BB8 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 777 1 0000000000000000 100 0 0 10 0
`;

test("parseProcNetTcp keeps LISTEN sockets only, with port and inode", () => {
  assert.deepEqual(parseProcNetTcp(SAMPLE_TCP), [
    { port: 8080, inode: 51234 },
    { port: 22, inode: 1111 },
  ]);
  assert.deepEqual(parseProcNetTcp(SAMPLE_TCP6), [{ port: 3000, inode: 777 }]);
  assert.deepEqual(parseProcNetTcp(""), []);
});

const SERVER = `
const net = require("net");
const server = net.createServer(() => {}).listen(0, "127.0.0.1", () => {
  console.log("listening " + server.address().port + " " + process.pid);
});
let lines = 0;
process.stdin.on("data", () => {
  lines++;
  if (lines === 1) server.close(() => console.log("closed"));
  else process.exit(0);
});
`;

// As in a unit whose root lacks CAP_SYS_PTRACE: the agent then reads another user's /proc/<pid>/fd as that
// user. Dropping the capability needs root and setpriv (util-linux).
const canDropPtrace = process.getuid?.() === 0 && spawnSync("setpriv", ["--version"]).status === 0;
const nobody = /^nobody:/m.test(readFileSync("/etc/passwd", "utf8"));

describe("agent port notifications", () => {
  let agent: RunningAgent;
  before(async () => {
    agent = await startAgent(
      { UMS_UNIT_URL: "https://demo-abc123.units.example.test" },
      canDropPtrace ? ["setpriv", "--bounding-set=-sys_ptrace"] : [],
    );
  });
  after(async () => {
    await agent?.stop();
  });

  test("port_opened and port_closed reach every exec websocket", async () => {
    const watcher = await ExecClient.open(agent, `/exec?${query({ cmd: ["sleep", "30"] })}`);
    const server = await ExecClient.open(
      agent,
      `/exec?${query({ cmd: ["node", "-e", SERVER], path: process.execPath, stdin: true })}`,
    );
    const out = await server.waitStdout("listening");
    const m = /listening (\d+) (\d+)/.exec(out);
    assert.ok(m, out);
    const port = Number(m[1]);
    const pid = Number(m[2]);

    for (const c of [server, watcher]) {
      const opened = await c.waitText("port_opened", (e) => e.port === port);
      assert.deepEqual(opened, {
        type: "port_opened",
        port,
        address: "https://demo-abc123.units.example.test",
        pid,
      });
    }

    server.sendStdin("\n");
    await server.waitStdout("closed");
    for (const c of [server, watcher]) {
      const closed = await c.waitText("port_closed", (e) => e.port === port);
      assert.deepEqual(closed, { type: "port_closed", port, address: "https://demo-abc123.units.example.test", pid });
    }
    server.sendStdin("\n");
    assert.equal(await server.closed, 1000);
    await watcher.close();
  });

  test("the pid of another user's listener is found without CAP_SYS_PTRACE", {
    skip: !canDropPtrace || !nobody,
  }, async () => {
    const server = await ExecClient.open(
      agent,
      `/exec?${query({ cmd: ["node", "-e", SERVER], path: process.execPath, stdin: true, user: "nobody", dir: "/" })}`,
    );
    const out = await server.waitStdout("listening");
    const m = /listening (\d+) (\d+)/.exec(out);
    assert.ok(m, out);
    const port = Number(m[1]);
    const opened = await server.waitText("port_opened", (e) => e.port === port);
    assert.equal(opened.pid, Number(m[2]));
    server.sendStdin("\n");
    await server.waitText("port_closed", (e) => e.port === port);
    server.sendStdin("\n");
    await server.closed;
  });
});
