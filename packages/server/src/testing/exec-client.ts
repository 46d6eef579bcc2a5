import { connect } from "node:net";

export interface ExecResult {
  readonly status: number;
  readonly exitCode: number | undefined;
  readonly stdout: Buffer;
  readonly stderr: Buffer;
  /** Every HTTP chunk of the body: each must be exactly one frame. */
  readonly chunks: Buffer[];
  readonly body: Buffer;
}

export interface ExecOpts {
  stdin?: Buffer | string;
  env?: string[];
  dir?: string;
  path?: string;
  user?: "root" | "unit";
}

/**
 * HTTP exec (POST /v1/units/{name}/exec) over a raw socket, reading the chunked body chunk by
 * chunk, because clients of this API take each chunk as one stream-id-prefixed frame
 * (docs/ARCHITECTURE.md section 10) and fetch would hide chunk boundaries.
 */
export function execHttp(
  baseUrl: string,
  token: string,
  unit: string,
  cmd: string[],
  opts: ExecOpts = {},
): Promise<ExecResult> {
  const url = new URL(baseUrl);
  const q = new URLSearchParams();
  for (const c of cmd) q.append("cmd", c);
  for (const e of opts.env ?? []) q.append("env", e);
  if (opts.dir) q.set("dir", opts.dir);
  if (opts.path) q.set("path", opts.path);
  if (opts.user) q.set("user", opts.user);
  const stdin = opts.stdin === undefined ? undefined : Buffer.from(opts.stdin);
  if (stdin) q.set("stdin", "true");
  return new Promise((resolve, reject) => {
    const sock = connect(Number(url.port), url.hostname);
    const head = [
      `POST /v1/units/${encodeURIComponent(unit)}/exec?${q} HTTP/1.1`,
      `Host: ${url.host}`,
      `Authorization: Bearer ${token}`,
      "Content-Type: application/octet-stream",
      `Content-Length: ${stdin?.length ?? 0}`,
      "Connection: close",
      "",
      "",
    ].join("\r\n");
    sock.write(head);
    if (stdin) sock.write(stdin);
    const parts: Buffer[] = [];
    sock.on("data", (d) => parts.push(d));
    sock.on("error", reject);
    sock.on("end", () => {
      try {
        resolve(parseResponse(Buffer.concat(parts)));
      } catch (err) {
        reject(err);
      }
    });
  });
}

function parseResponse(raw: Buffer): ExecResult {
  const split = raw.indexOf("\r\n\r\n");
  const headText = raw.subarray(0, split).toString("latin1");
  const status = Number(headText.split(" ")[1]);
  let rest = raw.subarray(split + 4);
  const chunked = /transfer-encoding:\s*chunked/i.test(headText);
  const chunks: Buffer[] = [];
  if (chunked) {
    for (;;) {
      const eol = rest.indexOf("\r\n");
      const size = Number.parseInt(rest.subarray(0, eol).toString("latin1"), 16);
      if (!size) break;
      chunks.push(rest.subarray(eol + 2, eol + 2 + size));
      rest = rest.subarray(eol + 2 + size + 2);
    }
  } else if (rest.length > 0) chunks.push(rest);
  const body = Buffer.concat(chunks);
  const stdout: Buffer[] = [];
  const stderr: Buffer[] = [];
  let exitCode: number | undefined;
  if (status === 200) {
    for (const c of chunks) {
      if (c[0] === 1) stdout.push(c.subarray(1));
      else if (c[0] === 2) stderr.push(c.subarray(1));
      else if (c[0] === 3) exitCode = c[1];
    }
  }
  return { status, exitCode, stdout: Buffer.concat(stdout), stderr: Buffer.concat(stderr), chunks, body };
}
