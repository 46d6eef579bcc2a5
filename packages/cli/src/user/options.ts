import { type Command, Option } from "commander";
import { UsageError } from "../errors.js";
import { exitWhenFlushed } from "../exit.js";

/**
 * `--context NAME`: which login of the config file to use (env UMS_CONTEXT; default: the current
 * one). Every command that talks to the server has it, and exits as soon as its action is done
 * and what it printed has left (exitWhenFlushed), rather than when idle keep-alive connections close.
 */
export function withContext(cmd: Command): Command {
  return cmd
    .addOption(new Option("--context <name>", "use this login context (env UMS_CONTEXT)"))
    .hook("postAction", () => exitWhenFlushed());
}

export function withJson(cmd: Command): Command {
  return cmd.option("--json", "print JSON instead of text");
}

/** Help text's "Examples:" block. */
export function examples(cmd: Command, lines: string[]): Command {
  return cmd.addHelpText("after", `\nExamples:\n${lines.map((l) => `  $ ${l}`).join("\n")}\n`);
}

/** Reads all of stdin (it is a pipe or a file). */
export async function readStdin(): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export function positiveMs(flag: string) {
  return (value: string): number => {
    const m = /^(\d{1,7})(ms|s|m)?$/.exec(value);
    if (!m) throw new UsageError(`${flag} must be a duration like 30s, 5m or 1500ms, got '${value}'`);
    const n = Number(m[1]);
    return m[2] === "ms" ? n : m[2] === "m" ? n * 60_000 : n * 1000;
  };
}
