#!/usr/bin/env node
import { API_VERSION } from "@ums/protocol/versions";
import { UmsError } from "@ums/sdk";
import { Command, CommanderError } from "commander";
import { auditCommand } from "./commands/audit.js";
import { checkpointCommand, forkCommand } from "./commands/checkpoints.js";
import { completionCommand } from "./commands/completion.js";
import { execCommand } from "./commands/exec.js";
import { cpCommand, lsCommand, rmCommand } from "./commands/files.js";
import { contextCommand, loginCommand, logoutCommand, whoamiCommand } from "./commands/login.js";
import { mcpCommand } from "./commands/mcp.js";
import { policyCommand } from "./commands/policy.js";
import { proxyCommand } from "./commands/proxy.js";
import { serviceCommand, servicesCommand, urlCommand } from "./commands/services.js";
import { attachCommand, consoleCommand, killCommand, sessionsCommand } from "./commands/sessions.js";
import { topCommand } from "./commands/top.js";
import { createCommand, deleteCommand, infoCommand, listCommand, useCommand } from "./commands/units.js";
import { UsageError } from "./errors.js";

const program = new Command("ums")
  .description("ums: a self-hostable Unit Management Service")
  .version(API_VERSION)
  .showHelpAfterError()
  .exitOverride();

// The host-admin commands load @ums/server (host-only, slow to load): only when the line names one,
// or asks for help, so that `ums exec` on a laptop starts fast and needs only the SDK.
const ADMIN = ["serve", "token", "org", "image", "keys", "doctor", "install", "uninstall", "help", "completion"];
const first = process.argv.slice(2).find((a) => !a.startsWith("-"));
const admin = first === undefined || ADMIN.includes(first) ? await import("./admin.js") : undefined;
if (admin) {
  program.addCommand(admin.serveCommand());
  program.addCommand(admin.tokenCommand());
  program.addCommand(admin.orgCommand());
  program.addCommand(admin.imageCommand());
  program.addCommand(admin.keysCommand());
  program.addCommand(admin.doctorCommand());
  program.addCommand(admin.installCommand());
  program.addCommand(admin.uninstallCommand());
}
program.addCommand(loginCommand());
program.addCommand(logoutCommand());
program.addCommand(whoamiCommand());
program.addCommand(contextCommand());
program.addCommand(createCommand());
program.addCommand(listCommand());
program.addCommand(infoCommand());
program.addCommand(deleteCommand());
program.addCommand(useCommand());
program.addCommand(execCommand());
program.addCommand(consoleCommand());
program.addCommand(sessionsCommand());
program.addCommand(attachCommand());
program.addCommand(killCommand());
program.addCommand(cpCommand());
program.addCommand(lsCommand());
program.addCommand(rmCommand());
program.addCommand(checkpointCommand());
program.addCommand(forkCommand());
program.addCommand(servicesCommand());
program.addCommand(serviceCommand());
program.addCommand(urlCommand());
program.addCommand(policyCommand());
program.addCommand(proxyCommand());
program.addCommand(mcpCommand());
program.addCommand(auditCommand());
program.addCommand(topCommand());
program.addCommand(completionCommand(() => program));

// Added commands do not inherit these settings: every one throws its usage errors to the handler below.
const inherit = (cmd: Command): void => {
  for (const sub of cmd.commands) inherit(sub.exitOverride().showHelpAfterError("(add --help for usage and examples)"));
};
inherit(program);

try {
  await program.parseAsync(process.argv);
} catch (err) {
  // Commander's own refusals (unknown option, missing argument) are usage errors: exit 2.
  if (err instanceof CommanderError) process.exit(err.exitCode === 0 ? 0 : 2);
  if (err instanceof UsageError || (admin && err instanceof admin.ConfigError)) {
    process.stderr.write(`ums: ${err.message}\n`);
    process.exit(2);
  }
  // The server's (or the SDK's) stable code first, then what it said: one line.
  if (err instanceof UmsError) {
    process.stderr.write(`ums: ${err.code}: ${err.message.replace(/\s*\n\s*/g, " ")}\n`);
    process.exit(1);
  }
  process.stderr.write(`ums: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
