// Harness of the user commands' tests: a real server in this process (units on the shared test pool)
// and `ums` run as a subprocess with a HOME of its own, so the config file it writes is the test's.

import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { startTestServer, testDialects } from "@ums/server/testing";

type TestServer = Awaited<ReturnType<typeof startTestServer>>;

export const UMS = join(resolve(fileURLToPath(import.meta.url), "../../../../.."), "bin", "ums");

export interface UserRun {
  code: number | null;
  stdout: Buffer;
  stderr: string;
}

export interface UserCli {
  readonly server: TestServer;
  readonly home: string;
  /** The environment `run` gives `ums` (for a pseudo-terminal's own spawn). */
  env(): NodeJS.ProcessEnv;
  /** A token of `org` (created when new). */
  token(org: string): Promise<string>;
  /** Runs `ums ARGS` with this HOME; `stdin` is piped in (else stdin is /dev/null). */
  run(
    args: string[],
    opts?: { env?: NodeJS.ProcessEnv; stdin?: Buffer | string; timeoutMs?: number },
  ): Promise<UserRun>;
  /** As run; fails unless it exits 0; returns stdout as text. */
  ok(args: string[], opts?: { env?: NodeJS.ProcessEnv; stdin?: Buffer | string }): Promise<string>;
  close(): Promise<void>;
}

/** The environment without the runner's UMS_* settings, config dir or node:test marker. */
function baseEnv(home: string): NodeJS.ProcessEnv {
  const env = Object.fromEntries(
    Object.entries(process.env).filter(
      ([k]) => !k.startsWith("UMS_") && k !== "NODE_TEST_CONTEXT" && k !== "XDG_CONFIG_HOME",
    ),
  );
  return { ...env, HOME: home };
}

export async function startUserCli(): Promise<UserCli> {
  const sqlite = testDialects[0];
  if (sqlite?.name !== "sqlite") throw new Error("no sqlite dialect");
  const server = await startTestServer(sqlite);
  const home = await mkdtemp(join(tmpdir(), "ums-cli-home-"));
  const children = new Set<number>();

  const run: UserCli["run"] = (args, opts = {}) =>
    new Promise((res, rej) => {
      const child = spawn(UMS, args, {
        env: { ...baseEnv(home), ...opts.env },
        stdio: [opts.stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"],
      });
      if (child.pid !== undefined) children.add(child.pid);
      const out: Buffer[] = [];
      let err = "";
      child.stdout?.on("data", (d: Buffer) => out.push(d));
      child.stderr?.setEncoding("utf8").on("data", (d: string) => {
        err += d;
      });
      child.stdin?.on("error", () => {});
      child.stdin?.end(opts.stdin);
      // Bounds a hang; it times nothing.
      const timer = setTimeout(() => child.kill("SIGKILL"), opts.timeoutMs ?? 60_000);
      child.on("error", rej);
      child.on("close", (code) => {
        clearTimeout(timer);
        if (child.pid !== undefined) children.delete(child.pid);
        res({ code, stdout: Buffer.concat(out), stderr: err });
      });
    });

  return {
    server,
    home,
    env: () => baseEnv(home),
    token: (org) => server.token(org),
    run,
    async ok(args, opts) {
      const r = await run(args, opts);
      // What the server and the units' agents said goes with a failure (a rare one is explained by nothing else).
      if (r.code !== 0)
        assert.fail(`ums ${args.join(" ")} exited ${r.code}: ${r.stderr}\n${await server.diagnostics()}`);
      return r.stdout.toString("utf8");
    },
    async close() {
      for (const pid of children) {
        try {
          process.kill(pid, "SIGKILL");
        } catch {}
      }
      await server.close();
      await rm(home, { recursive: true, force: true });
    },
  };
}
