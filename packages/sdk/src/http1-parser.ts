/**
 * An incremental HTTP/1.1 response parser (RFC 9112) that keeps the chunks of a chunked body
 * apart. HTTP exec (spec 4.3, docs/ARCHITECTURE.md section 10) sends each frame as its own chunk with no
 * length field, so the chunk boundaries are the framing; fetch and node:http hide them (a chunk
 * split across TCP reads comes out in pieces), hence this parser. Pure: bytes in, events out.
 */

export interface ResponseHead {
  status: number;
  statusText: string;
  /** Header names lower-cased; repeated headers joined with ", ". */
  headers: Record<string, string>;
}

export interface ParserEvents {
  head(head: ResponseHead): void;
  /** A whole chunk of a chunked body; or, for other bodies, whatever bytes arrived. */
  data(bytes: Uint8Array): void;
  end(): void;
}

const CRLF = Buffer.from("\r\n");
const HEAD_END = Buffer.from("\r\n\r\n");
/** Limits against a server (or something posing as one) that never ends a line. */
const MAX_HEAD = 64 * 1024;
const MAX_CHUNK = 64 * 1024 * 1024;

export class ResponseParser {
  #buf: Buffer = Buffer.alloc(0);
  #state: "head" | "size" | "chunk" | "trailer" | "length" | "close" | "done" = "head";
  #remaining = 0;

  constructor(private readonly on: ParserEvents) {}

  get done(): boolean {
    return this.#state === "done";
  }

  /** Feeds received bytes; throws on a malformed response. */
  push(bytes: Uint8Array): void {
    this.#buf = this.#buf.length === 0 ? Buffer.from(bytes) : Buffer.concat([this.#buf, bytes]);
    while (this.#step()) {}
  }

  /** The connection closed: a close-delimited body ends here, anything else was cut short. */
  close(): void {
    if (this.#state === "close") {
      this.#state = "done";
      this.on.end();
    } else if (this.#state !== "done") {
      throw new Error(`the connection closed in the middle of the response (${this.#state})`);
    }
  }

  /** Handles one unit of buffered input; false when more bytes are needed. */
  #step(): boolean {
    switch (this.#state) {
      case "head":
        return this.#head();
      case "size": {
        const eol = this.#line();
        if (eol < 0) return false;
        const text = this.#buf.subarray(0, eol).toString("latin1").split(";")[0]?.trim() ?? "";
        if (!/^[0-9a-fA-F]{1,8}$/.test(text)) throw new Error(`bad chunk size line '${text.slice(0, 20)}'`);
        this.#remaining = Number.parseInt(text, 16);
        if (this.#remaining > MAX_CHUNK) throw new Error(`chunk of ${this.#remaining} bytes is too large`);
        this.#buf = this.#buf.subarray(eol + 2);
        this.#state = this.#remaining === 0 ? "trailer" : "chunk";
        return true;
      }
      case "chunk": {
        if (this.#buf.length < this.#remaining + 2) return false;
        if (!this.#buf.subarray(this.#remaining, this.#remaining + 2).equals(CRLF)) {
          throw new Error("chunk data not followed by CRLF");
        }
        const chunk = Uint8Array.prototype.slice.call(this.#buf, 0, this.#remaining);
        this.#buf = this.#buf.subarray(this.#remaining + 2);
        this.#state = "size";
        this.on.data(chunk);
        return true;
      }
      case "trailer": {
        const eol = this.#line();
        if (eol < 0) return false;
        this.#buf = this.#buf.subarray(eol + 2);
        if (eol === 0) this.#finish();
        return true;
      }
      case "length": {
        if (this.#buf.length === 0) return false;
        const take = this.#buf.subarray(0, this.#remaining);
        this.#buf = this.#buf.subarray(take.length);
        this.#remaining -= take.length;
        this.on.data(Uint8Array.prototype.slice.call(take));
        if (this.#remaining === 0) this.#finish();
        return true;
      }
      case "close":
        if (this.#buf.length === 0) return false;
        this.on.data(Uint8Array.prototype.slice.call(this.#buf));
        this.#buf = Buffer.alloc(0);
        return false;
      case "done":
        return false;
    }
  }

  #head(): boolean {
    const end = this.#buf.indexOf(HEAD_END);
    if (end < 0) {
      if (this.#buf.length > MAX_HEAD) throw new Error("response head is larger than 64 KiB");
      return false;
    }
    const [statusLine = "", ...lines] = this.#buf.subarray(0, end).toString("latin1").split("\r\n");
    this.#buf = this.#buf.subarray(end + 4);
    const m = /^HTTP\/1\.[01] (\d{3})(?: (.*))?$/.exec(statusLine);
    if (!m) throw new Error(`not an HTTP/1.1 status line: '${statusLine.slice(0, 40)}'`);
    const status = Number(m[1]);
    if (status >= 100 && status < 200) return true; // 100 Continue and friends: a final head follows
    const headers: Record<string, string> = {};
    for (const line of lines) {
      const colon = line.indexOf(":");
      if (colon <= 0) throw new Error(`bad header line '${line.slice(0, 40)}'`);
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      headers[name] = name in headers ? `${headers[name]}, ${value}` : value;
    }
    this.on.head({ status, statusText: m[2] ?? "", headers });
    if (/(^|,)\s*chunked\s*$/i.test(headers["transfer-encoding"] ?? "")) this.#state = "size";
    else if (headers["content-length"] !== undefined) {
      if (!/^\d{1,15}$/.test(headers["content-length"])) throw new Error("bad content-length");
      this.#remaining = Number(headers["content-length"]);
      if (this.#remaining === 0) this.#finish();
      else this.#state = "length";
    } else if (status === 204 || status === 304) this.#finish();
    else this.#state = "close";
    return true;
  }

  #line(): number {
    const eol = this.#buf.indexOf(CRLF);
    if (eol < 0 && this.#buf.length > MAX_HEAD) throw new Error("line longer than 64 KiB");
    return eol;
  }

  #finish(): void {
    this.#state = "done";
    this.on.end();
  }
}
