import { connect as tcpConnect } from "node:net";
import { addQuery, type QueryValue, SDK_VERSION, type UmsClient } from "./client.js";
import { checkTimeout, type RequestOpts } from "./config.js";
import { ConnectionError, errorFromResponse, SdkErrorCode, TimeoutError, UmsError } from "./errors.js";
import { ResponseParser } from "./http1-parser.js";

export interface ChunkedRequestOpts extends RequestOpts {
  query?: Readonly<Record<string, QueryValue>> | undefined;
  body?: Uint8Array | undefined;
  /** Called with each chunk of a 2xx body, in order, exactly as the server framed it. */
  onChunk(chunk: Uint8Array): void;
}

/**
 * One request over a raw HTTP/1.1 connection (http or https), for the one answer whose framing is
 * its chunk boundaries: HTTP exec (see http1-parser.ts). Resolves when the body has ended; a
 * non-2xx answer rejects with the SDK's error for it.
 */
export async function chunkedRequest(
  client: UmsClient,
  method: string,
  path: string,
  opts: ChunkedRequestOpts,
): Promise<void> {
  const url = new URL(client.config.baseUrl + path);
  addQuery(url, opts.query);
  const body = opts.body ?? new Uint8Array();
  const headers: Record<string, string> = {
    host: url.host,
    "user-agent": `ums-sdk-js/${SDK_VERSION}`,
    ...Object.fromEntries(Object.entries(client.config.headers).map(([k, v]) => [k.toLowerCase(), v])),
    authorization: `Bearer ${client.config.token}`,
    "content-type": "application/octet-stream",
    "content-length": String(body.length),
    connection: "close",
  };
  for (const [k, v] of Object.entries(headers)) {
    if (/[\r\n]/.test(k + v)) throw new UmsError(`header ${k} contains a line break`, SdkErrorCode.InvalidConfig);
  }
  const head = `${method} ${url.pathname}${url.search} HTTP/1.1\r\n${Object.entries(headers)
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join("")}\r\n`;
  const timeoutMs = checkTimeout(opts.timeoutMs ?? client.config.timeoutMs, "timeoutMs");
  const port = Number(url.port) || (url.protocol === "https:" ? 443 : 80);
  const host = url.hostname.replace(/^\[|\]$/g, "");

  // node:tls only when it is needed (https): plain-http CLI runs do not pay for loading it.
  const tls = url.protocol === "https:" ? await import("node:tls") : undefined;
  return new Promise<void>((resolve, reject) => {
    const sock = tls ? tls.connect({ host, port, servername: host }) : tcpConnect({ host, port });
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    const finish = (err?: unknown) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      opts.signal?.removeEventListener("abort", onAbort);
      sock.destroy();
      if (err === undefined) resolve();
      else reject(err);
    };
    const onAbort = () => finish(opts.signal?.reason);
    if (opts.signal?.aborted) return onAbort();
    opts.signal?.addEventListener("abort", onAbort, { once: true });
    if (timeoutMs > 0) {
      timer = setTimeout(
        () => finish(new TimeoutError(`${method} ${path} did not finish within ${timeoutMs} ms`, SdkErrorCode.Timeout)),
        timeoutMs,
      );
    }

    let status = 0;
    let statusText = "";
    const errorBody: Uint8Array[] = [];
    const parser = new ResponseParser({
      head: (h) => {
        status = h.status;
        statusText = h.statusText;
      },
      data: (bytes) => {
        if (status < 200 || status >= 300) return void errorBody.push(bytes);
        try {
          opts.onChunk(bytes);
        } catch (err) {
          finish(err); // the caller's callback threw: that is the caller's error
        }
      },
      end: () => {
        if (status >= 200 && status < 300) return finish();
        const text = Buffer.concat(errorBody).toString("utf8");
        let parsed: unknown;
        try {
          parsed = JSON.parse(text);
        } catch {}
        finish(errorFromResponse(status, statusText, parsed, text));
      },
    });
    const fail = (err: unknown) =>
      finish(
        err instanceof UmsError
          ? err
          : new ConnectionError(
              `${method} ${url.origin}${path} failed: ${err instanceof Error ? err.message : String(err)}`,
              SdkErrorCode.Connection,
              { cause: err },
            ),
      );
    const malformed = (err: unknown) =>
      finish(
        new UmsError(
          `${method} ${path}: malformed HTTP response: ${(err as Error).message}`,
          SdkErrorCode.BadResponse,
          {
            status: status || undefined,
            cause: err,
          },
        ),
      );
    sock.on("data", (d: Buffer) => {
      if (settled) return;
      try {
        parser.push(d);
      } catch (err) {
        malformed(err);
      }
    });
    sock.on("end", () => {
      if (settled) return;
      try {
        parser.close();
      } catch (err) {
        fail(err);
      }
    });
    sock.on("error", fail);
    sock.on("close", () => fail(new Error("the connection closed")));
    sock.write(head);
    if (body.length > 0) sock.write(body);
  });
}
