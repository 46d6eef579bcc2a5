// `ums services`, `ums service put|logs [-f]|restart|rm` against a real server with a real unit.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { startUserCli, UMS, type UserCli } from "../testing/user-cli.js";

const TICKER = "i=0; while :; do echo tick-$i; i=$((i+1)); sleep 0.2; done";

describe("ums services, service put|logs|restart|rm", () => {
  let cli: UserCli;
  before(async () => {
    cli = await startUserCli();
    const token = await cli.token("svc-org");
    await cli.ok(["login", "--url", cli.server.url, "--token", token]);
    await cli.ok(["create", "svc"]);
  });
  after(async () => {
    await cli?.close();
  });

  it("puts a service, lists it (table and --json), and reads its log", async () => {
    assert.match(await cli.ok(["service", "put", "svc", "ticker", "--", "sh", "-c", TICKER]), /^service ticker: /);
    const table = await cli.ok(["services", "svc"]);
    assert.match(table, /^SERVICE\s+STATUS\s+PID\s+HTTP PORT\s+COMMAND$/m);
    assert.match(table, /^ticker\s+running\s+\d+\s+-\s+sh -c /m);
    const list = JSON.parse(await cli.ok(["services", "svc", "--json"]));
    assert.equal(list[0].name, "ticker");
    await new Promise((r) => setTimeout(r, 800));
    assert.match(await cli.ok(["service", "logs", "svc", "ticker"]), /^tick-0$/m);
  });

  it("logs -f prints lines written after it started, until it is interrupted", async () => {
    const before = await cli.ok(["service", "logs", "svc", "ticker"]);
    const last = Math.max(...[...before.matchAll(/tick-(\d+)/g)].map((m) => Number(m[1])));
    const child = spawn(UMS, ["service", "logs", "svc", "ticker", "-f"], {
      env: cli.env(),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      out += d;
    });
    const closed = new Promise<number | null>((r) => child.on("close", (code) => r(code)));
    try {
      const want = `tick-${last + 5}`;
      const deadline = Date.now() + 20_000;
      while (!out.includes(want) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      assert.ok(out.includes(want), `followed to ${want}: ${out.slice(-200)}`);
    } finally {
      child.kill("SIGINT");
    }
    const code = await Promise.race([closed, new Promise((r) => setTimeout(() => r("still running"), 10_000))]);
    assert.notEqual(code, "still running", "Ctrl-C ends logs -f");
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
  });

  it("restart prints the first output; rm removes it; an unknown service is the server's 404 code", async () => {
    const restarted = await cli.run(["service", "restart", "svc", "ticker"]);
    assert.equal(restarted.code, 0, restarted.stderr);
    assert.match(restarted.stdout.toString(), /tick-0/);
    assert.match(await cli.ok(["service", "rm", "svc", "ticker"]), /^removed service ticker\n$/);
    assert.deepEqual(JSON.parse(await cli.ok(["services", "svc", "--json"])), []);
    const missing = await cli.run(["service", "logs", "svc", "ticker"]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /^ums: UMS_SERVICE_NOT_FOUND: /);
  });
});
