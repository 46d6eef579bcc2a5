import http from "node:http";

export interface Answer {
  status: number;
  /** The answer's body, as text. */
  body: string;
  connection: string | undefined;
  /** The client socket it went on (`reusedSocket` misses a socket handed over from the queue). */
  socket: unknown;
  ms: number;
}

/** One request on `agent` (the early-answer tests: a body the server answers before reading); status 0 when no answer came within `timeoutMs`. */
export function exchange(
  agent: http.Agent,
  url: string,
  opts: {
    method?: string;
    headers?: Record<string, string>;
    body?: Buffer;
    chunked?: boolean;
    /** Declares this Content-Length but sends only `body` (and waits for the answer). */
    declared?: number;
    timeoutMs?: number;
  },
): Promise<Answer> {
  const started = performance.now();
  return new Promise((resolve) => {
    const headers = {
      ...opts.headers,
      ...(opts.declared !== undefined && { "content-length": String(opts.declared) }),
    };
    const req = http.request(url, { agent, method: opts.method ?? "GET", headers }, (res) => {
      if (opts.declared !== undefined) req.destroy();
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => {
        body += d;
      });
      res.on("end", () =>
        resolve({
          status: res.statusCode ?? 0,
          body,
          connection: res.headers.connection,
          socket: req.socket,
          ms: performance.now() - started,
        }),
      );
    });
    const none = (): void =>
      resolve({ status: 0, body: "", connection: undefined, socket: req.socket, ms: performance.now() - started });
    req.setTimeout(opts.timeoutMs ?? 15_000, () => {
      req.destroy();
      none();
    });
    req.on("error", none);
    if (opts.declared !== undefined) {
      req.write(opts.body);
    } else if (opts.body && opts.chunked) {
      // No Content-Length: the body goes chunked, in pieces.
      for (let i = 0; i < opts.body.length; i += 64 * 1024) req.write(opts.body.subarray(i, i + 64 * 1024));
      req.end();
    } else {
      req.end(opts.body);
    }
  });
}
