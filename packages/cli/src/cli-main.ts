// The whole command line (commander): every command but the `ums exec` fast path (main.ts).
import { completionCommand } from "./commands/completion.js";
import { mcpCommand } from "./commands/mcp.js";
import { addUserCommands, commandOf, NOT_USER, newProgram, runProgram } from "./program.js";

const program = newProgram();

// The host-admin commands load @ums/server (host-only, slow to load): only when the line names one,
// or asks for help, so that a user command on a laptop needs only the SDK.
const first = commandOf(process.argv.slice(2));
const admin = first === undefined || NOT_USER.includes(first) ? await import("./admin.js") : undefined;
if (admin) {
  program.addCommand(admin.serveCommand());
  program.addCommand(admin.tokenCommand());
  program.addCommand(admin.orgCommand());
  program.addCommand(admin.nodeCommand());
  program.addCommand(admin.imageCommand());
  program.addCommand(admin.keysCommand());
  program.addCommand(admin.doctorCommand());
  program.addCommand(admin.installCommand());
  program.addCommand(admin.uninstallCommand());
}
addUserCommands(program);
program.addCommand(mcpCommand());
program.addCommand(completionCommand(() => program));

await runProgram(program, process.argv, (err) => !!admin && err instanceof admin.ConfigError);
