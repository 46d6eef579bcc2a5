import { type ServerResponse, STATUS_CODES } from "node:http";
import type { Duplex } from "node:stream";
import { AgentErrorCode } from "@ums/protocol/error-codes";

// JSON answers in the project's error shapes (docs/ARCHITECTURE.md section 10): {"error","code"} or
// {"errors":[...],"code"}.

export function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

/** Answers an upgrade request that is refused, on the raw socket, before any websocket handshake. */
export function rejectUpgrade(socket: Duplex, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  socket.end(
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ""}\r\n` +
      "Content-Type: application/json\r\n" +
      `Content-Length: ${Buffer.byteLength(text)}\r\n` +
      "Connection: close\r\n\r\n" +
      text,
  );
}

export function notFound(what: string): { error: string; code: string } {
  return { error: what, code: AgentErrorCode.NotFound };
}

export function sessionNotFound(id: string): { error: string; code: string } {
  return { error: `exec session ${id} not found`, code: AgentErrorCode.SessionNotFound };
}

export function validation(errors: string[]): { errors: string[]; code: string } {
  return { errors, code: AgentErrorCode.Validation };
}
