import WebSocket from "ws";

// A protocol-level client of the control websocket (api/control/), speaking as the public clients do:
// the JS client's `control:` envelopes with args objects, the Go client's plain op.start with
// URL-encoded args and its plain release. Written from the protocol (docs/API.md), for the tests.

export interface Frame {
  readonly binary: boolean;
  readonly data: Buffer;
  readonly text: string;
}

export interface Envelope {
  type: string;
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary args.
  args?: any;
}

export interface ExecOutcome {
  readonly frames: Frame[];
  readonly stdout: string;
  readonly stderr: string;
  /** The exit code of the exit frame, if one came. */
  readonly exitFrame: number | undefined;
  /** Text frames of the op that are JSON (session_info, exit, ...). */
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary messages.
  readonly messages: any[];
  readonly end: Envelope;
}

export interface FsOutcome {
  /** The op's answer frame (the route's JSON, or its error body). */
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON.
  readonly answer: any;
  readonly bytes?: Buffer;
  readonly end: Envelope;
}

const PREFIX = "control:";

export class ControlClient {
  private queue: Frame[] = [];
  private waiters: Array<() => void> = [];
  closed: Promise<{ code: number }>;

  private constructor(readonly ws: WebSocket) {
    ws.on("message", (data: Buffer, binary) => {
      this.queue.push({ binary, data, text: binary ? "" : data.toString("utf8") });
      for (const w of this.waiters.splice(0)) w();
    });
    this.closed = new Promise((resolve) =>
      ws.on("close", (code) => {
        for (const w of this.waiters.splice(0)) w();
        resolve({ code });
      }),
    );
    ws.on("error", () => {});
  }

  static open(url: string, token: string): Promise<ControlClient> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, { headers: { authorization: `Bearer ${token}` } });
      const c = new ControlClient(ws);
      ws.once("open", () => resolve(c));
      ws.once("unexpected-response", (_req, res) => reject(new Error(`upgrade answered ${res.statusCode}`)));
      ws.once("error", reject);
    });
  }

  /** The next frame from the server (fails after `ms`, or when the connection closed). */
  async next(ms = 60_000): Promise<Frame> {
    const deadline = Date.now() + ms;
    while (this.queue.length === 0) {
      if (this.ws.readyState === this.ws.CLOSED) throw new Error("the control connection closed");
      const left = deadline - Date.now();
      if (left <= 0) throw new Error("timed out waiting for a frame");
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
    return this.queue.shift() as Frame;
  }

  /** The envelope a frame is (either framing), if it is one of the server's. */
  static envelope(f: Frame): Envelope | undefined {
    if (f.binary) return undefined;
    const json = f.text.startsWith(PREFIX) ? f.text.slice(PREFIX.length) : f.text;
    try {
      const v = JSON.parse(json) as Envelope;
      return v.type === "op.complete" || v.type === "op.error" ? v : undefined;
    } catch {
      return undefined;
    }
  }

  /** The next frame, which must be an envelope of the server's. */
  async nextEnvelope(ms?: number): Promise<Envelope & { prefixed: boolean }> {
    const f = await this.next(ms);
    const e = ControlClient.envelope(f);
    if (!e) throw new Error(`expected an envelope, got ${f.binary ? `${f.data.length} binary bytes` : f.text}`);
    return { ...e, prefixed: f.text.startsWith(PREFIX) };
  }

  send(data: string | Buffer): void {
    this.ws.send(data, { binary: typeof data !== "string" });
  }

  /** The JS client's op.start. */
  start(op: string, args: Record<string, unknown>): void {
    this.send(`${PREFIX}${JSON.stringify({ type: "op.start", op, args })}`);
  }

  /** The Go client's filesystem op.start: plain JSON, args URL-encoded. */
  startPlain(op: string, args: Record<string, string>): void {
    this.send(JSON.stringify({ type: "op.start", op, args: new URLSearchParams(args).toString() }));
  }

  /** The Go client's port forwarding over control: its legacy start, params as JSON (port a number). */
  startGoProxy(params: Record<string, unknown>): void {
    this.send(JSON.stringify({ type: "start", operation: "proxy", params: { ...params, keep_alive: true } }));
  }

  /** The next frame, which must be a text frame of JSON (an op's answer). */
  // biome-ignore lint/suspicious/noExplicitAny: tests read arbitrary JSON.
  async nextJson(ms?: number): Promise<any> {
    const f = await this.next(ms);
    if (f.binary) throw new Error(`expected a JSON text frame, got ${f.data.length} binary bytes`);
    return JSON.parse(f.text);
  }

  /** Binary frames until their bytes satisfy `pred`; a text frame on the way fails. */
  async binaryUntil(pred: (got: Buffer) => boolean, ms?: number): Promise<Buffer> {
    let got = Buffer.alloc(0);
    while (!pred(got)) {
      const f = await this.next(ms);
      if (!f.binary) throw new Error(`expected binary frames, got the text ${f.text}`);
      got = Buffer.concat([got, f.data]);
    }
    return got;
  }

  release(): void {
    this.send(JSON.stringify({ type: "release" }));
  }

  /** Reads an exec op's frames to its end envelope. */
  async execOutcome(ms?: number): Promise<ExecOutcome> {
    const frames: Frame[] = [];
    for (;;) {
      const f = await this.next(ms);
      const end = ControlClient.envelope(f);
      if (end) {
        const bin = frames.filter((x) => x.binary);
        const of = (id: number) =>
          Buffer.concat(bin.filter((x) => x.data[0] === id).map((x) => x.data.subarray(1))).toString();
        const exit = bin.find((x) => x.data[0] === 3 && x.data.length === 2);
        const messages = frames
          .filter((x) => !x.binary)
          .flatMap((x) => {
            try {
              return [JSON.parse(x.text)];
            } catch {
              return [];
            }
          });
        return { frames, stdout: of(1), stderr: of(2), exitFrame: exit?.data[1], messages, end };
      }
      frames.push(f);
    }
  }

  /**
   * A whole exec op, `control:` envelope: pipes, stdin then EOF ([4]). Stdin frames are raw when the
   * args name `path` or `id` (as the Go client's do), else carry the stream id 0 first (the JS client).
   */
  async exec(cmd: string[], opts: { stdin?: Buffer[]; args?: Record<string, unknown> } = {}): Promise<ExecOutcome> {
    this.start("exec", { cmd, ...(opts.stdin && { stdin: "true" }), ...opts.args });
    const raw = opts.args?.path !== undefined || opts.args?.id !== undefined;
    for (const chunk of opts.stdin ?? []) this.send(raw ? chunk : Buffer.concat([Buffer.from([0]), chunk]));
    if (opts.stdin) this.send(Buffer.from([4]));
    return this.execOutcome();
  }

  /** A whole filesystem op, Go-style: plain op.start, the file as one frame for a write, the answer, the end. */
  async fs(op: string, args: Record<string, string>, file?: Buffer): Promise<FsOutcome> {
    this.startPlain(op, args);
    if (file) this.send(file);
    const first = await this.next();
    const answer = JSON.parse(first.text);
    let bytes: Buffer | undefined;
    if (op === "fs.read" && answer.error === undefined) bytes = (await this.next()).data;
    const end = await this.nextEnvelope();
    this.release();
    return { answer, ...(bytes && { bytes }), end };
  }

  close(): Promise<{ code: number }> {
    if (this.ws.readyState === this.ws.OPEN) this.ws.close(1000);
    else if (this.ws.readyState !== this.ws.CLOSED) this.ws.terminate();
    return this.closed;
  }
}
