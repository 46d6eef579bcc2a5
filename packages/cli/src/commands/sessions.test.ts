// `ums console`, `exec -t`, `sessions`, `attach`, `kill` through a real pseudo-terminal (node-pty):
// the CLI is typed at as a person would, against a real server and a real unit.

import assert from "node:assert/strict";
import { after, before, describe, it } from "node:test";
import * as pty from "node-pty";
import { startUserCli, UMS, type UserCli } from "../testing/user-cli.js";

interface Term {
  write(s: string): void;
  resize(cols: number, rows: number): void;
  output(): string;
  /** Waits until the output (since `from`) matches; fails with what came so far. */
  waitFor(re: RegExp, from?: number): Promise<RegExpExecArray>;
  exited: Promise<number>;
}

describe("ums console, exec -t, sessions, attach, kill (in a pseudo-terminal)", () => {
  let cli: UserCli;
  const open: pty.IPty[] = [];

  function term(args: string[], cols = 100, rows = 30): Term {
    const p = pty.spawn(UMS, args, { name: "xterm", cols, rows, env: cli.env() as Record<string, string> });
    open.push(p);
    let out = "";
    p.onData((d) => {
      out += d;
    });
    const exited = new Promise<number>((res) => p.onExit(({ exitCode }) => res(exitCode)));
    return {
      write: (s) => p.write(s),
      resize: (c, r) => p.resize(c, r),
      output: () => out,
      async waitFor(re, from = 0) {
        // Bounds a hang on a loaded host; it times nothing.
        const deadline = Date.now() + 30_000;
        for (;;) {
          const m = re.exec(out.slice(from));
          if (m) return m;
          if (Date.now() > deadline) assert.fail(`no ${re} in the terminal; it shows: ${JSON.stringify(out)}`);
          await new Promise((r) => setTimeout(r, 25));
        }
      },
      exited,
    };
  }

  before(async () => {
    cli = await startUserCli();
    await cli.ok(["login", "--url", cli.server.url, "--token", await cli.token("tty-org")]);
    await cli.ok(["create", "term"]);
  });
  after(async () => {
    for (const p of open) {
      try {
        p.kill("SIGKILL");
      } catch {}
    }
    await cli?.close();
  });

  it("console: echo of what is typed, the window size and its changes, Ctrl-C, the exit code", async () => {
    const t = term(["console", "term"], 100, 30);
    t.write("echo hello-$((6*7))\r");
    await t.waitFor(/hello-42/);
    t.write("stty size\r");
    await t.waitFor(/30 100/);
    const mark = t.output().length;
    t.resize(120, 40);
    // The resize reaches the unit before the next line is read (SIGWINCH is forwarded at once).
    await new Promise((r) => setTimeout(r, 300));
    t.write("stty size\r");
    await t.waitFor(/40 120/, mark);
    t.write("echo sleep-$((5*5)); sleep 100\r");
    await t.waitFor(/sleep-25/);
    await new Promise((r) => setTimeout(r, 300));
    t.write("\x03");
    t.write("echo after-$?\r");
    await t.waitFor(/after-130/);
    t.write("exit 3\r");
    assert.equal(await t.exited, 3);
  });

  it("Ctrl-\\ detaches and the session runs on; sessions lists it; attach replays and continues it; kill ends one", async () => {
    const t = term(["console", "term"]);
    t.write("echo first-$((2+3))\r");
    await t.waitFor(/first-5/);
    t.write("\x1c");
    assert.equal(await t.exited, 0);
    const [, id] = await t.waitFor(/detached; the session runs on: ums attach term (\d+)/);

    const list = JSON.parse(await cli.ok(["sessions", "term", "--json"]));
    const mine = list.find((s: { id: number }) => s.id === Number(id));
    assert.ok(mine, JSON.stringify(list));
    assert.equal(mine.tty, true);
    assert.match(await cli.ok(["sessions", "term"]), new RegExp(`^${id}\\s+bash -l\\s+yes\\s+`, "m"));

    const again = term(["attach", "term", String(id)]);
    await again.waitFor(/first-5/);
    again.write("echo back-$((1+1))\r");
    await again.waitFor(/back-2/);
    again.write("exit 4\r");
    assert.equal(await again.exited, 4);

    // A detached console, killed from outside.
    const other = term(["console", "term"]);
    other.write("echo ready-$((3*3))\r");
    await other.waitFor(/ready-9/);
    other.write("\x1c");
    const [, otherId] = await other.waitFor(/ums attach term (\d+)/);
    await other.exited;
    const killed = await cli.ok(["kill", "term", String(otherId), "--signal", "SIGKILL", "--timeout", "5"]);
    assert.match(killed, new RegExp(`^session ${otherId} ended \\(exit code \\d+\\)\\n$`));
    const after = JSON.parse(await cli.ok(["sessions", "term", "--json"]));
    assert.equal(
      after.some((s: { id: number; is_active: boolean; isActive: boolean }) => s.id === Number(otherId) && s.isActive),
      false,
    );
    const missing = await cli.run(["kill", "term", "99999"]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /^ums: UMS_SESSION_NOT_FOUND: /);
  });

  it("login asks for the token on a terminal without echoing it", async () => {
    const token = await cli.token("prompted-org");
    const t = term(["login", "--url", cli.server.url, "--context", "prompted"]);
    await t.waitFor(/token: $/);
    t.write(`${token}\r`);
    assert.equal(await t.exited, 0, t.output());
    assert.match(t.output(), /logged in to .* as organization prompted-org \(context prompted\)/);
    assert.equal(t.output().includes(token), false, "the token was echoed");
    const cancelled = term(["login", "--url", cli.server.url, "--context", "never"]);
    await cancelled.waitFor(/token: $/);
    cancelled.write("abc\x03");
    assert.equal(await cancelled.exited, 2);
    assert.match(cancelled.output(), /login cancelled/);
    await cli.ok(["context", "default"]);
  });

  it("exec -t gives the command a terminal and exits with its code", async () => {
    const t = term(["exec", "-t", "term", "--", "sh", "-c", "test -t 0 && stty size && echo is-a-tty; exit 6"], 90, 20);
    await t.waitFor(/20 90\s+is-a-tty/);
    assert.equal(await t.exited, 6);
    // Without -t, there is no terminal in the unit, even when the CLI has one.
    const plain = term(["exec", "term", "--", "sh", "-c", "test -t 0 || echo no-tty"]);
    await plain.waitFor(/no-tty/);
    assert.equal(await plain.exited, 0);
  });
});
