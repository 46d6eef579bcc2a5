import { ChunkedScanner } from "./chunked.js";
import { contentLength, fieldValues, HeadError, type ResponseHead } from "./head.js";

/** A response that breaks HTTP/1.1's rules for its framing: a proxy answers 502 and closes. */
export class BadResponse extends Error {}

/** How a response's body is delimited (RFC 9112 §6.3). */
export type BodyKind = "none" | "length" | "chunked" | "close";

/**
 * The body of a response being relayed: how it is delimited, and where it ends in the bytes as they
 * come, without changing them (they are passed on as they are). Strict: a transfer coding other
 * than chunked, or a Content-Length that is not one number, is a BadResponse.
 */
export class ResponseBody {
  private left: number;

  private constructor(
    readonly kind: BodyKind,
    length: number,
    private readonly scanner: ChunkedScanner | undefined,
  ) {
    this.left = length;
  }

  /** RFC 9112 §6.3: the body of `head`, the response to a `method` request. */
  static of(method: string, head: ResponseHead): ResponseBody {
    const raw = head.rawHeaders;
    if (method === "HEAD" || head.status === 204 || head.status === 304) return new ResponseBody("none", 0, undefined);
    const te = fieldValues(raw, "transfer-encoding");
    if (te.length > 0) {
      if (te.join(",").trim().toLowerCase() !== "chunked") {
        throw new BadResponse(`its response uses a transfer coding other than chunked (${te.join(", ")})`);
      }
      return new ResponseBody("chunked", 0, new ChunkedScanner());
    }
    let length: number | undefined;
    try {
      length = contentLength(raw);
    } catch (err) {
      if (err instanceof HeadError) throw new BadResponse(`its response's ${err.message}`);
      throw err;
    }
    if (length === undefined) return new ResponseBody("close", 0, undefined);
    return length === 0 ? new ResponseBody("none", 0, undefined) : new ResponseBody("length", length, undefined);
  }

  /**
   * How many bytes of `d` belong to the body: all of them, or fewer once the body ends within `d`
   * (what follows is not the body's). None for a body that has none. A chunked body's broken
   * framing throws a BadResponse.
   */
  take(d: Uint8Array): number {
    switch (this.kind) {
      case "none":
        return 0;
      case "close":
        return d.length;
      case "length": {
        const n = Math.min(this.left, d.length);
        this.left -= n;
        return n;
      }
      case "chunked":
        try {
          return (this.scanner as ChunkedScanner).scan(d);
        } catch (err) {
          if (err instanceof HeadError) throw new BadResponse(`its chunked body is malformed (${err.message})`);
          throw err;
        }
    }
  }

  /** Whether the body has ended (a body that ends with the connection never says so). */
  get done(): boolean {
    if (this.kind === "chunked") return (this.scanner as ChunkedScanner).done;
    if (this.kind === "length") return this.left === 0;
    return this.kind === "none";
  }
}
