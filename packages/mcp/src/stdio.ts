import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import type { UmsClient } from "@ums/sdk";
import { createMcpServer } from "./server.js";

/** `ums mcp`: the MCP server on stdin/stdout, for a local agent host; resolves when stdin closes. */
export async function serveStdio(client: UmsClient): Promise<void> {
  const server = createMcpServer(client);
  const transport = new StdioServerTransport();
  const closed = new Promise<void>((resolve) => {
    transport.onclose = () => resolve();
    process.stdin.once("end", () => resolve());
  });
  await server.connect(transport);
  await closed;
  await server.close();
}
