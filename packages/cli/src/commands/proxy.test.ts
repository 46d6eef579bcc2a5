// `ums proxy NAME PORT:LOCAL` carries HTTP requests to a server inside a real unit.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { freePort } from "@ums/server/testing";
import { startUserCli, UMS, type UserCli } from "../testing/user-cli.js";

describe("ums proxy", () => {
  let cli: UserCli;
  before(async () => {
    cli = await startUserCli();
    await cli.ok(["login", "--url", cli.server.url, "--token", await cli.token("proxy-org")]);
    await cli.ok(["create", "web"]);
    await cli.ok(["exec", "web", "--", "sh", "-c", "mkdir -p site && echo proxied-page > site/index.html"]);
    await cli.ok([
      "service",
      "put",
      "web",
      "http",
      "-w",
      "/home/unit/site",
      "--",
      "python3",
      "-m",
      "http.server",
      "8080",
    ]);
  });
  after(async () => {
    await cli?.close();
  });

  it("forwards a local port to the unit's HTTP server, many requests, until SIGINT", async () => {
    const local = await freePort();
    const child = spawn(UMS, ["proxy", "web", `8080:${local}`], { env: cli.env(), stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
    });
    const exited = new Promise<number | null>((res) => child.once("close", (code) => res(code)));
    try {
      // Bounds a hang; it times nothing.
      const deadline = Date.now() + 30_000;
      while (!stderr.includes("forwarding")) {
        assert.ok(Date.now() < deadline, `no 'forwarding' line: ${stderr}`);
        assert.equal(child.exitCode, null, stderr);
        await new Promise((r) => setTimeout(r, 50));
      }
      assert.match(stderr, new RegExp(`^forwarding 127\\.0\\.0\\.1:${local} -> web:8080 `));
      // The service may still be starting: its first answer can take a moment.
      let body = "";
      while (!body.includes("proxied-page")) {
        assert.ok(Date.now() < deadline, `no page through the proxy; ums said: ${stderr}`);
        try {
          body = await (await fetch(`http://127.0.0.1:${local}/index.html`)).text();
        } catch {
          await new Promise((r) => setTimeout(r, 200));
        }
      }
      const answers = await Promise.all(
        Array.from({ length: 5 }, async () => (await fetch(`http://127.0.0.1:${local}/index.html`)).text()),
      );
      assert.deepEqual(answers, Array(5).fill("proxied-page\n"));
      const missing = await fetch(`http://127.0.0.1:${local}/nope`);
      assert.equal(missing.status, 404);
      await missing.text();
    } finally {
      child.kill("SIGINT");
    }
    assert.equal(await exited, 0);
  });

  it("a port where nothing listens closes the local connection and says why; bad ports exit 2", async () => {
    const local = await freePort();
    const child = spawn(UMS, ["proxy", "web", `9999:${local}`], { env: cli.env(), stdio: ["ignore", "pipe", "pipe"] });
    let stderr = "";
    child.stderr.setEncoding("utf8").on("data", (d: string) => {
      stderr += d;
    });
    const exited = new Promise<number | null>((res) => child.once("close", (code) => res(code)));
    try {
      const deadline = Date.now() + 30_000;
      while (!stderr.includes("forwarding")) {
        assert.ok(Date.now() < deadline, stderr);
        await new Promise((r) => setTimeout(r, 50));
      }
      await assert.rejects(fetch(`http://127.0.0.1:${local}/`));
      while (!stderr.includes("UMS_TUNNEL_REFUSED")) {
        assert.ok(Date.now() < deadline, stderr);
        await new Promise((r) => setTimeout(r, 50));
      }
    } finally {
      child.kill("SIGINT");
    }
    assert.equal(await exited, 0);
    for (const bad of ["0", "70000", "80:x", "a"]) {
      const r = await cli.run(["proxy", "web", bad]);
      assert.equal(r.code, 2, `${bad}: ${r.stderr}`);
    }
  });
});
