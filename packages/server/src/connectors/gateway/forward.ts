import { Agent as HttpAgent, request as httpRequest, type IncomingMessage, type ServerResponse } from "node:http";
import { Agent as HttpsAgent, request as httpsRequest } from "node:https";
import type { LookupFunction } from "node:net";
import { dropUnreadBody } from "../../http/early-answer.js";

const agents = {
  http: new HttpAgent({ keepAlive: true, maxSockets: 256 }),
  https: new HttpsAgent({ keepAlive: true, maxSockets: 256 }),
};

const HOP = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "trailer", "te"]);

export interface ForwardOpts {
  readonly url: URL;
  readonly headers: Record<string, string | string[]>;
  /** How the connection finds its address (a user-given base URL's: the pinned one, pinned-target.ts). */
  readonly lookup?: LookupFunction;
  /** Certificates a TLS provider is checked against (else Node's bundled roots). */
  readonly ca?: readonly string[];
  readonly idleTimeoutMs?: number;
  /** Called once with the provider's status, or with an error before any response. */
  readonly done: (status: number | Error) => void;
}

/** Streams the caller's request to the provider and the provider's response back as is. */
export function forward(req: IncomingMessage, res: ServerResponse, o: ForwardOpts): void {
  const https = o.url.protocol === "https:";
  const upstream = (https ? httpsRequest : httpRequest)(o.url, {
    method: req.method,
    headers: o.headers,
    agent: https ? agents.https : agents.http,
    ...(o.lookup && { lookup: o.lookup }),
    ...(https && o.ca && { ca: [...o.ca] }),
  });
  let answered = false;
  upstream.on("response", (r) => {
    answered = true;
    const headers: Record<string, string | string[]> = {};
    for (const [k, v] of Object.entries(r.headers)) if (v !== undefined && !HOP.has(k)) headers[k] = v;
    res.writeHead(r.statusCode ?? 502, r.statusMessage, headers);
    r.pipe(res);
    r.on("error", () => res.destroy());
    o.done(r.statusCode ?? 502);
  });
  upstream.on("error", (err) => {
    if (answered) {
      res.destroy();
      return;
    }
    // The answer comes before the body was read: the rest of it must not block the connection.
    dropUnreadBody(req, res);
    o.done(err);
  });
  // Small requests leave in one segment, not held back by Nagle's algorithm waiting for an ACK.
  upstream.on("socket", (socket) => socket.setNoDelay(true));
  // A provider silent for this long (no header, no byte of body) is given up on.
  upstream.setTimeout(o.idleTimeoutMs ?? 120_000, () =>
    upstream.destroy(new Error("the provider did not answer in time")),
  );
  req.on("aborted", () => upstream.destroy());
  res.on("close", () => {
    if (!res.writableFinished) upstream.destroy();
  });
  // RFC 9112 §6.3: a request without Content-Length or Transfer-Encoding has no body; ending at
  // once sends the head in one write (piping an empty body costs a round of events per request).
  const cl = req.headers["content-length"];
  const hasBody = cl !== undefined ? cl !== "0" : req.headers["transfer-encoding"] !== undefined;
  if (hasBody) {
    req.pipe(upstream);
  } else {
    req.resume();
    upstream.end();
  }
}
