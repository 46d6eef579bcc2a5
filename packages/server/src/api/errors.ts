import type { FastifyReply, FastifyRequest } from "fastify";
import { errorAnswer } from "../errors/respond.js";
import { dropUnreadBody } from "../http/early-answer.js";

export { ApiError } from "../errors/api-error.js";
export { toApiError } from "../errors/respond.js";

/**
 * The API's error handler: every error a route throws (an `ApiError`, a node's typed error, a
 * validation failure) leaves through here and `errorAnswer` (errors/respond.ts), so every error
 * body has the same shape (spec section 7).
 */
export function sendError(err: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const answer = errorAnswer(err);
  const code = (answer.body as { code?: unknown }).code;
  if (typeof code === "string") request.errorCode = code;
  // A client that went away before its body ended (a cut-short upload) is no fault of the server's.
  if (answer.internal && clientGone(err, request)) request.log.info({ err: String(err) }, "the client went away");
  else if (answer.internal) request.log.error({ err }, "internal error");
  reply.headers(answer.headers);
  // An error answered before the request's body was all read (a streamed upload the unit refused
  // part way, an upload to a unit that is not there): the rest is read and dropped, as the proxy
  // does (http/early-answer.ts). Left unread, it would block the connection until its keep-alive
  // timeout (30 s), and the server's stop with it.
  if (!request.raw.complete && !request.raw.destroyed) dropUnreadBody(request.raw, reply.raw);
  // Serialised here, not by the route's response schema: an error body must never fail to serialise.
  return reply.code(answer.status).type("application/json; charset=utf-8").serializer(JSON.stringify).send(answer.body);
}

/** The request's body ended early because its client closed the connection (Node's "aborted" ECONNRESET). */
function clientGone(err: unknown, request: FastifyRequest): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return code === "ECONNRESET" && (request.raw.destroyed || request.raw.readableAborted);
}
