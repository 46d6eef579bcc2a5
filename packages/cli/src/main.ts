#!/usr/bin/env node
import { API_VERSION } from "@ums/protocol";
import { ConfigError } from "@ums/server/config";
import { Command, CommanderError } from "commander";
import { imageCommand } from "./commands/image.js";
import { keysCommand } from "./commands/keys.js";
import { orgCommand } from "./commands/org.js";
import { serveCommand } from "./commands/serve.js";
import { tokenCommand } from "./commands/token.js";
import { UsageError } from "./errors.js";

const program = new Command("ums")
  .description("ums: a self-hostable Unit Management Service")
  .version(API_VERSION)
  .showHelpAfterError()
  .exitOverride();

program.addCommand(serveCommand());
program.addCommand(tokenCommand());
program.addCommand(orgCommand());
program.addCommand(imageCommand());
program.addCommand(keysCommand());

try {
  await program.parseAsync(process.argv);
} catch (err) {
  if (err instanceof CommanderError) process.exit(err.exitCode);
  if (err instanceof UsageError || err instanceof ConfigError) {
    process.stderr.write(`ums: ${err.message}\n`);
    process.exit(2);
  }
  process.stderr.write(`ums: ${err instanceof Error ? err.message : String(err)}\n`);
  process.exit(1);
}
