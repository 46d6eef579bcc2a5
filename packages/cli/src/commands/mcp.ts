// `ums mcp`: the MCP server on stdio (issue #13 part 2), for an agent host on this machine. Its
// tools act with the current context's token (ums login), or UMS_URL / UMS_TOKEN.

import { Command } from "commander";
import { exitWhenFlushed } from "../exit.js";
import { resolveConnection } from "../user/connect.js";
import { examples, withContext } from "../user/options.js";

export function mcpCommand(): Command {
  const cmd = withContext(new Command("mcp"))
    .description("run the MCP server on stdin/stdout: units as tools for an AI agent")
    .action(async (_opts: unknown, self: Command) => {
      const { client } = await resolveConnection(self);
      // The MCP SDK and zod load only here: every other command starts without them (issue #13's start-up goal).
      const { serveStdio } = await import("@ums/mcp");
      await serveStdio(client);
      await exitWhenFlushed(0);
    });
  return examples(cmd, [
    "ums mcp                       # as the agent host's command",
    'claude mcp add ums -- ums mcp  # or in an MCP config: {"command": "ums", "args": ["mcp"]}',
  ]);
}
