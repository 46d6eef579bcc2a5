import type { IncomingMessage, ServerResponse } from "node:http";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { UmsClient } from "@ums/sdk";
import { createMcpServer } from "./server.js";

/**
 * One MCP request over streamable HTTP, stateless (a server and a transport per request, JSON
 * answers): what `ums serve` runs at /v1/mcp. The tools call the API at `apiBase` with the caller's
 * token.
 */
export async function handleMcpHttp(
  req: IncomingMessage,
  res: ServerResponse,
  body: unknown,
  caller: { apiBase: string; token: string },
): Promise<void> {
  const client = new UmsClient({ baseUrl: caller.apiBase, token: caller.token });
  const server = createMcpServer(client);
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  res.on("close", () => {
    transport.close().catch(() => {});
    server.close().catch(() => {});
  });
  await server.connect(transport);
  await transport.handleRequest(req, res, body);
}
