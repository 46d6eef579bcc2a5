import type { FastifyRequest } from "fastify";
import type { Actor } from "./event-log.js";

export type { Actor };

/** The actor of an event an API call causes: its token. */
export function actorOf(req: FastifyRequest): Actor {
  return `token:${req.auth.token.id}`;
}
