// `ums exec [NAME] -- CMD…`: runs a command in a unit over HTTP exec (spec 4.3) and behaves like
// the remote process: its stdout and stderr bytes go to ours, unchanged, and we exit with its code.

import { Unit } from "@ums/sdk";
import { Command } from "commander";
import { UsageError } from "../errors.js";
import { resolveConnection, unitName } from "../user/connect.js";
import { examples, positiveMs, withContext } from "../user/options.js";
import { pipeTerminal, terminalSize } from "../user/terminal.js";
import { envPairs, runExec } from "./exec-run.js";
import { finish } from "./sessions.js";

interface ExecOpts {
  env: string[];
  cwd?: string;
  root?: boolean;
  timeout?: number;
  tty?: boolean;
}

const collect = (value: string, prev: string[]) => [...prev, value];

/** The operands after the first `--` of the line: the command, never read as options. */
export function commandAfterDashDash(argv: readonly string[]): string[] | undefined {
  const i = argv.indexOf("--");
  return i < 0 ? undefined : argv.slice(i + 1);
}

export function execCommand(): Command {
  const cmd = withContext(new Command("exec"))
    .description("run a command in a unit; exits with its exit code (stdin is sent when it is not a terminal)")
    .argument("<name-and-cmd...>", "[NAME] -- CMD [ARGS...] (NAME defaults to the unit of 'ums use')")
    .option("-e, --env <KEY=VALUE>", "an environment variable (repeatable)", collect, [] as string[])
    .option("-w, --cwd <dir>", "working directory (default /home/unit)")
    .option("--root", "run as root of the unit")
    .option("-t, --tty", "run in a terminal (raw keystrokes, window size followed); exits with its exit code")
    .option("--timeout <duration>", "end the command after this long (e.g. 30s, 5m)", positiveMs("--timeout"))
    .action(async (operands: string[], opts: ExecOpts, self: Command) => {
      const after = commandAfterDashDash(process.argv);
      if (after === undefined) throw new UsageError("put the command after '--': ums exec NAME -- CMD [ARGS...]");
      if (after.length === 0) throw new UsageError("no command after '--'");
      if (operands.length > after.length + 1) throw new UsageError("only one NAME goes before '--'");
      const given = operands.length > after.length ? operands[0] : undefined;
      const env = envPairs(opts.env);
      const r = await resolveConnection(self);
      const name = unitName(given, r);
      if (opts.tty) {
        const unit = await Unit.connect(name, { client: r.client });
        const conn = await unit.sessions.open(after, {
          tty: true,
          ...terminalSize(),
          env: { TERM: process.env.TERM || "xterm-256color", ...env },
          cwd: opts.cwd,
          user: opts.root ? "root" : undefined,
          // A command of `exec -t` ends with its client (unlike a console, which can be detached).
          maxRunAfterDisconnect: "0s",
        });
        return finish(await pipeTerminal(conn), unit.name, conn.sessionId);
      }
      await runExec(r, {
        unit: name,
        command: after,
        env: opts.env,
        cwd: opts.cwd,
        root: opts.root,
        timeoutMs: opts.timeout,
      });
    });
  return examples(cmd, [
    "ums exec web -- uname -a",
    "ums exec web -- sh -c 'echo $HOME'",
    "tar c src | ums exec web -- tar x -C /home/unit",
    "ums use web && ums exec -- ls",
    "ums exec -t web -- top",
  ]);
}
