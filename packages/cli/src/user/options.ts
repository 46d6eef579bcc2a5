import { type Command, Option } from "commander";
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

export { positiveMs, readStdin } from "./input.js";
