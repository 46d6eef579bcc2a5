import { type IncomingMessage, request } from "node:http";
import type { Readable } from "node:stream";
import { agentSpan } from "../tracing/tracing.js";
import { type AgentEndpoint, AgentTimeoutError, boundAnswer, connectEndpoint } from "./deadline.js";
import { AgentAnswerError, AgentUnreachableError, MAX_JSON_BYTES, NODE_SENT } from "./errors.js";

export interface AgentRequestOpts {
  /** A JSON text, or a stream piped as it comes. */
  readonly body?: string | Readable;
  readonly headers?: Readonly<Record<string, string>>;
  /** More time for an answer that legitimately waits (e.g. on a service's stop grace). */
  readonly extraMs?: number;
  /**
   * A body sent only once the answer's head says 200 (the agent's plain HTTP exec answers its head
   * first): an agent that refuses the request never gets a byte of it, and the caller may still send
   * it another way. After another status the request ends without it.
   */
  readonly bodyAfterHead?: Readable;
}

/**
 * One HTTP request to the unit's agent over its Unix socket. Resolves with the response once its
 * head arrives (the body streams on): the endpoint's deadlines bound the wait for that head (issue
 * #19 finding 8). A connection that fails becomes `AgentUnreachableError`; a missed deadline, the
 * endpoint's timeout error.
 */
export function agentRequest(
  ep: AgentEndpoint,
  method: string,
  path: string,
  opts: AgentRequestOpts = {},
): Promise<IncomingMessage> {
  const span = agentSpan(method, path);
  return new Promise<IncomingMessage>((resolve, reject) => {
    const headers: Record<string, string> = { ...opts.headers };
    if (typeof opts.body === "string") headers["content-type"] ??= "application/json";
    const later = opts.bodyAfterHead;
    const req = request({ createConnection: (_o, done) => connectEndpoint(ep, done), method, path, headers }, (res) => {
      deadline.answered();
      if (span) {
        span.setAttribute("http.response.status_code", res.statusCode ?? 0);
        res.once("close", () => span.end());
      }
      if (later && res.statusCode === 200) {
        later.on("error", (err) => req.destroy(err));
        later.pipe(req);
      } else if (later) req.end();
      resolve(res);
    });
    const deadline = boundAnswer(req, ep, opts.extraMs);
    req.on("error", (err) => {
      span?.end(err.message);
      reject(wrap(err));
    });
    const body = opts.body;
    if (later) req.flushHeaders();
    else if (body === undefined || typeof body === "string") req.end(body);
    else {
      body.on("error", (err) => req.destroy(err));
      body.pipe(req);
    }
  });
}

/** An answer read whole. */
export interface AgentAnswer {
  readonly status: number;
  readonly body: string;
}

/**
 * A request whose whole answer (at most `limit` bytes) must come within the endpoint's deadlines:
 * for small JSON answers, where a head followed by silence is as stuck as no answer.
 */
export function agentCall(
  ep: AgentEndpoint,
  method: string,
  path: string,
  limit = MAX_JSON_BYTES,
): Promise<AgentAnswer> {
  const span = agentSpan(method, path);
  return new Promise<AgentAnswer>((resolve, reject) => {
    const req = request({ createConnection: (_o, done) => connectEndpoint(ep, done), method, path }, (res) => {
      span?.setAttribute("http.response.status_code", res.statusCode ?? 0);
      let body = "";
      res.on("error", (err) => reject(wrap(err)));
      res.setEncoding("utf8").on("data", (d: string) => {
        body += d;
        if (body.length > limit) req.destroy(new Error(`the agent's answer is over ${limit} bytes`));
      });
      res.on("end", () => {
        deadline.answered();
        span?.end();
        resolve({ status: res.statusCode ?? 0, body });
      });
    });
    const deadline = boundAnswer(req, ep);
    req.on("error", (err) => {
      span?.end(err.message);
      reject(wrap(err));
    });
    req.end();
  });
}

/**
 * Any failure of a call that is not the agent's answer (`AgentAnswerError`) nor a missed deadline
 * (`AgentTimeoutError`) is a failure to reach it: no connection, a broken one, or garbage.
 */
export function wrap(err: unknown): Error {
  if (err instanceof AgentAnswerError || err instanceof AgentTimeoutError || err instanceof AgentUnreachableError) {
    return err;
  }
  // What a node answered for a unit behind it (issue #15, node/remote/wire.ts) is already the node's error.
  if (err instanceof Error && (err as { [NODE_SENT]?: true })[NODE_SENT]) return err;
  return new AgentUnreachableError(err);
}
