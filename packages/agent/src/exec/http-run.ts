import type { IncomingMessage, ServerResponse } from "node:http";
import { frameLength } from "@ums/protocol/exec";
import { log } from "../util/log.js";
import type { SessionUser } from "../util/users.js";
import type { SessionTable } from "./registry.js";
import type { ExecRequest } from "./request.js";
import type { Attachment } from "./session.js";

/**
 * A non-TTY exec as one plain HTTP request (`POST /exec`, docs/ARCHITECTURE.md section 10): what the
 * host's `POST /v1/units/{name}/exec` asks, without a websocket's handshake and framing on either
 * side. The request's body is the process's stdin (when the query says `stdin=true`); the answer
 * streams the session's binary frames, each after its length (protocol's `frameLength`), and ends
 * after the exit frame. Text messages (session_info, pings) are for websockets and are not sent. The
 * host going away before the exit is a client leaving: the session ends as for a closed websocket.
 */
export function serveHttpExec(
  table: SessionTable,
  request: ExecRequest,
  user: SessionUser,
  req: IncomingMessage,
  res: ServerResponse,
): void {
  // The 200 goes once the session exists (or with its first frame): a session that cannot be made
  // (thrown) is then the server's 500 with its reason, not a 200 answer cut short, which the host can
  // only report as "the agent closed the session before the process exited".
  const head = () => {
    if (res.headersSent) return;
    res.writeHead(200, { "content-type": "application/octet-stream", "cache-control": "no-store" });
    res.flushHeaders();
  };
  const client: Attachment = {
    sendBinary: (frame) => {
      if (res.writableEnded || res.destroyed) return;
      head();
      res.cork();
      res.write(frameLength(frame));
      res.write(frame);
      process.nextTick(() => res.uncork());
    },
    sendText: () => {},
    close: () => {
      if (res.writableEnded) return;
      head();
      res.end();
    },
    get bufferedAmount() {
      return res.writableLength;
    },
    pauseInput: () => req.pause(),
    resumeInput: () => req.resume(),
  };
  const session = table.create(request, user, client);
  head();
  res.on("close", () => {
    // The host closed the answer's connection before its exit (a client that went away; or the rare
    // lost answer the host reports as "closed the session"): the log says which side saw it first.
    if (!res.writableFinished) log("an exec answer's connection closed before its exit", { session: session.id });
    session.detach(client);
  });
  req.on("error", () => {});
  if (!request.stdin) {
    req.resume();
    return;
  }
  req.on("data", (chunk: Buffer) => session.input(chunk));
  req.on("end", () => session.endInput());
}
