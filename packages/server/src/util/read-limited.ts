import type { Readable } from "node:stream";

/** A stream sent more than the reader takes. */
export class TooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`more than ${limit} bytes`);
  }
}

/** Reads a stream as UTF-8 text, at most `limit` characters; more destroys it and throws `TooLargeError`. */
export async function readLimited(stream: Readable, limit: number): Promise<string> {
  let text = "";
  stream.setEncoding("utf8");
  for await (const chunk of stream) {
    text += chunk;
    if (text.length > limit) {
      stream.destroy();
      throw new TooLargeError(limit);
    }
  }
  return text;
}
