// `ums console`, `ums sessions`, `ums attach`, `ums kill`: interactive and long-lived exec sessions
// over the exec websocket (spec 4.3, 2.8).

import { type ExecConnection, Unit } from "@ums/sdk";
import { Command } from "commander";
import { UsageError } from "../errors.js";
import { resolveConnection, unitName } from "../user/connect.js";
import { examples, withContext, withJson } from "../user/options.js";
import { age, printJson, table } from "../user/output.js";
import { DETACH_KEY, pipeTerminal, type TerminalEnd, terminalSize } from "../user/terminal.js";

function sessionId(value: string): number {
  if (!/^\d{1,9}$/.test(value)) throw new UsageError(`ID must be a session id (digits), got '${value}'`);
  return Number(value);
}

/** Ends the command as the session ended: its exit code, 0 after a detach. */
export function finish(end: TerminalEnd, unit: string, id: number | undefined): void {
  if (end.kind === "exit") {
    process.exitCode = end.code;
  } else if (end.kind === "detached") {
    process.stderr.write(`\r\n[detached; the session runs on: ums attach ${unit} ${id ?? "ID"}]\r\n`);
  } else {
    process.stderr.write("\r\nums: the connection closed before the session ended\r\n");
    process.exitCode = 1;
  }
}

async function interactive(conn: ExecConnection, unit: string): Promise<void> {
  let id: number | undefined = conn.sessionId;
  conn.on("info", (info) => {
    id = info.sessionId;
  });
  const end = await pipeTerminal(conn, { detachKey: true });
  finish(end, unit, id ?? conn.sessionId);
}

export function consoleCommand(): Command {
  const cmd = withContext(new Command("console"))
    .description(
      `an interactive shell in a unit (a TTY); Ctrl-\\ (0x${DETACH_KEY.toString(16)}) detaches and leaves it running`,
    )
    .argument("[name]", "the unit (default: the one 'ums use' chose)")
    .option("--shell <program>", "the shell to run", "bash")
    .option("--root", "as root of the unit")
    .action(async (name: string | undefined, opts: { shell: string; root?: boolean }, self: Command) => {
      const r = await resolveConnection(self);
      const unit = await Unit.connect(unitName(name, r), { client: r.client });
      const conn = await unit.sessions.open([opts.shell, "-l"], {
        tty: true,
        ...terminalSize(),
        env: { TERM: process.env.TERM || "xterm-256color" },
        user: opts.root ? "root" : undefined,
      });
      await interactive(conn, unit.name);
    });
  return examples(cmd, [
    "ums console web",
    "ums console   # the unit of 'ums use'",
    "ums attach web 12   # back after Ctrl-\\",
  ]);
}

export function attachCommand(): Command {
  const cmd = withContext(new Command("attach"))
    .description("attach to a running session (its recent output is replayed); Ctrl-\\ detaches again")
    .argument("<name>", "the unit")
    .argument("<id>", "the session id (ums sessions NAME)", sessionId)
    .action(async (name: string, id: number, _opts: unknown, self: Command) => {
      const r = await resolveConnection(self);
      const unit = await Unit.connect(name, { client: r.client });
      const conn = await unit.sessions.attach(id);
      await interactive(conn, unit.name);
    });
  return examples(cmd, ["ums attach web 12"]);
}

export function sessionsCommand(): Command {
  const cmd = withJson(withContext(new Command("sessions")))
    .description("a unit's exec sessions")
    .argument("[name]", "the unit (default: the one 'ums use' chose)")
    .action(async (name: string | undefined, opts: { json?: boolean }, self: Command) => {
      const r = await resolveConnection(self);
      const unit = await Unit.connect(unitName(name, r), { client: r.client });
      const list = await unit.sessions.list();
      if (opts.json) return printJson(list);
      const now = Date.now();
      process.stdout.write(
        table(
          ["ID", "COMMAND", "TTY", "ACTIVE", "CREATED", "WORKDIR"],
          list.map((s) => [
            s.id,
            s.command,
            s.tty ? "yes" : "no",
            s.isActive ? "yes" : "no",
            age(s.createdAt, now),
            s.workdir,
          ]),
        ),
      );
    });
  return examples(cmd, ["ums sessions web", "ums sessions --json"]);
}

export function killCommand(): Command {
  const cmd = withJson(withContext(new Command("kill")))
    .description("signal a session's processes and wait for them to end (SIGKILL after --timeout)")
    .argument("<name>", "the unit")
    .argument("<id>", "the session id", sessionId)
    .option("-s, --signal <signal>", "the signal", "SIGTERM")
    .option("--timeout <seconds>", "how long to wait before SIGKILL", "10")
    .action(
      async (name: string, id: number, opts: { signal: string; timeout: string; json?: boolean }, self: Command) => {
        if (!/^\d{1,4}$/.test(opts.timeout))
          throw new UsageError(`--timeout must be whole seconds, got '${opts.timeout}'`);
        const r = await resolveConnection(self);
        const unit = await Unit.connect(name, { client: r.client });
        const events = await unit.sessions.kill(id, { signal: opts.signal, timeoutSeconds: Number(opts.timeout) });
        if (opts.json) return printJson(events);
        const last = events.at(-1);
        const code = last && typeof last.exit_code === "number" ? ` (exit code ${last.exit_code})` : "";
        process.stdout.write(`session ${id} ended${code}\n`);
      },
    );
  return examples(cmd, ["ums kill web 12", "ums kill web 12 --signal SIGINT --timeout 3"]);
}
