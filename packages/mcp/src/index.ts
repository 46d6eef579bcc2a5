export { handleMcpHttp } from "./http.js";
export {
  capOutput,
  createMcpServer,
  MAX_FILE_CHARS,
  MAX_OUTPUT_CHARS,
  MCP_SERVER_NAME,
  MCP_SERVER_VERSION,
} from "./server.js";
export { serveStdio } from "./stdio.js";
