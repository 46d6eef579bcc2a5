// The ums command line without its host-admin part: the program, the user commands (built on the
// SDK) and how a run ends. main.ts adds the host-admin commands, `mcp` and `completion`.
import { API_VERSION } from "@ums/protocol/versions";
import { Command, CommanderError } from "commander";
import { auditCommand } from "./commands/audit.js";
import { checkpointCommand, forkCommand } from "./commands/checkpoints.js";
import { eventsCommand } from "./commands/events.js";
import { execCommand } from "./commands/exec.js";
import { cpCommand, lsCommand, rmCommand } from "./commands/files.js";
import { contextCommand, loginCommand, logoutCommand, whoamiCommand } from "./commands/login.js";
import { policyCommand } from "./commands/policy.js";
import { proxyCommand } from "./commands/proxy.js";
import { serviceCommand, servicesCommand, urlCommand } from "./commands/services.js";
import { attachCommand, consoleCommand, killCommand, sessionsCommand } from "./commands/sessions.js";
import { templateCommand } from "./commands/templates.js";
import { topCommand } from "./commands/top.js";
import {
  createCommand,
  deleteCommand,
  infoCommand,
  listCommand,
  upgradeCommand,
  useCommand,
} from "./commands/units.js";
import { exitWhenFlushed } from "./exit.js";
import { reportAndExit } from "./report.js";

/**
 * Commands that are not user commands: the host-admin ones (they load @ums/server, host-only and
 * slow to load), help and completion (they need every command), and `mcp` (the MCP SDK). main.ts
 * loads the host-admin code only for these.
 */
export const NOT_USER = [
  "serve",
  "token",
  "org",
  "node",
  "image",
  "keys",
  "doctor",
  "install",
  "uninstall",
  "help",
  "completion",
  "mcp",
];

/** The first word of a command line that is not an option: the command it names, if any. */
export const commandOf = (args: readonly string[]): string | undefined => args.find((a) => !a.startsWith("-"));

export function newProgram(): Command {
  return new Command("ums")
    .description("ums: a self-hostable Unit Management Service")
    .version(API_VERSION)
    .showHelpAfterError()
    .exitOverride();
}

/** Adds the user commands: everything a user on a laptop runs against a server. */
export function addUserCommands(program: Command): void {
  for (const c of [
    loginCommand(),
    logoutCommand(),
    whoamiCommand(),
    contextCommand(),
    createCommand(),
    listCommand(),
    infoCommand(),
    upgradeCommand(),
    deleteCommand(),
    useCommand(),
    execCommand(),
    consoleCommand(),
    sessionsCommand(),
    attachCommand(),
    killCommand(),
    cpCommand(),
    lsCommand(),
    rmCommand(),
    checkpointCommand(),
    forkCommand(),
    templateCommand(),
    servicesCommand(),
    serviceCommand(),
    urlCommand(),
    policyCommand(),
    proxyCommand(),
    auditCommand(),
    eventsCommand(),
    topCommand(),
  ])
    program.addCommand(c);
}

/**
 * Parses `argv` (node's layout: two words before the arguments) and runs the command. Every failure
 * ends the process: usage errors (commander's refusals, UsageError, and what `isUsage` adds) with
 * exit 2, the server's errors with exit 1 and one line `ums: CODE: message`, anything else with 1.
 */
export async function runProgram(
  program: Command,
  argv: readonly string[],
  isUsage: (err: unknown) => boolean = () => false,
): Promise<void> {
  // Added commands do not inherit these settings: every one throws its usage errors to the handler below.
  const inherit = (cmd: Command): void => {
    for (const sub of cmd.commands)
      inherit(sub.exitOverride().showHelpAfterError("(add --help for usage and examples)"));
  };
  inherit(program);
  try {
    await program.parseAsync(argv as string[]);
  } catch (err) {
    // Commander's own refusals (unknown option, missing argument) are usage errors: exit 2.
    if (err instanceof CommanderError) return exitWhenFlushed(err.exitCode === 0 ? 0 : 2);
    return reportAndExit(err, isUsage);
  }
}
