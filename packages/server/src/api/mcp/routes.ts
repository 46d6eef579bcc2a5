import type { IncomingMessage, ServerResponse } from "node:http";
import { ErrorCode } from "@ums/protocol";
import { parseBearer } from "../../auth/tokens.js";
import { NO_CONSOLE_COOKIE } from "../console/session.js";
import type { ApiInstance } from "../instance.js";

/**
 * Answers one MCP request (streamable HTTP, stateless) for a caller: `apiBase` and `token` let it
 * reach this API as that caller. Given by `ums serve` (the MCP server is its own package, @ums/mcp,
 * built on the SDK), so the server does not depend on it.
 */
export type McpHandler = (
  req: IncomingMessage,
  res: ServerResponse,
  body: unknown,
  caller: { apiBase: string; token: string },
) => Promise<void>;

/**
 * Issue #13 part 2: the MCP endpoint, `/v1/mcp` (the MCP streamable HTTP transport). It sits behind
 * the bearer authentication like every route (no token: 401), and its tools call this API with the
 * caller's token, so they can do what the token can, no more, and are rate limited and audited
 * like any call.
 */
export function mcpRoutes(app: ApiInstance, handler: McpHandler, apiBase: () => string): void {
  app.route({
    method: ["GET", "POST", "DELETE"],
    url: "/v1/mcp",
    // The MCP endpoint takes a bearer token only (its tools call the API with it).
    config: NO_CONSOLE_COOKIE,
    schema: { hide: true },
    handler: async (req, reply) => {
      const token = parseBearer(req.headers.authorization) as string;
      reply.hijack();
      try {
        await handler(req.raw, reply.raw, req.body, { apiBase: apiBase(), token });
      } catch (err) {
        req.log.warn({ err }, "mcp request failed");
        if (!reply.raw.headersSent) {
          reply.raw.writeHead(500, { "content-type": "application/json" });
          reply.raw.end(JSON.stringify({ error: "the MCP request failed", code: ErrorCode.Internal }));
        } else reply.raw.destroy();
      }
    },
  });
}
