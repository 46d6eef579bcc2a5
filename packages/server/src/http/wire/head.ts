/**
 * HTTP/1.1 message heads read strictly (RFC 9112 §2-§5), for the unit URL's fast path
 * (api/unit-url/fast-path.ts). Strict on purpose: what this parser takes is re-written field by
 * field before a unit sees it, and anything it does not take goes to Node's parser (the request)
 * or is answered 502 (the unit's response). So: CRLF line ends only, no obs-fold, no whitespace
 * between a field's name and its colon (§5.1: a server MUST reject that), tokens for names,
 * visible characters and obs-text in values, origin-form or absolute targets without spaces.
 */

/** A head, its fields as `[name, value, …]` (names as sent, values without surrounding whitespace). */
export interface Head {
  readonly startLine: string;
  readonly rawHeaders: string[];
  /** Bytes of the head, its final empty line included. */
  readonly length: number;
}

export interface RequestHead extends Head {
  readonly method: string;
  readonly target: string;
  readonly minorVersion: 0 | 1;
}

export interface ResponseHead extends Head {
  readonly status: number;
  readonly reason: string;
  readonly minorVersion: 0 | 1;
}

/** Not all of the head has arrived yet. */
export const PARTIAL = "partial" as const;

export class HeadError extends Error {}

const TOKEN = "[!#$%&'*+\\-.^_`|~0-9A-Za-z]+";
const REQUEST_LINE = new RegExp(`^(${TOKEN}) ([\\x21-\\x7e]+) HTTP/1\\.([01])$`);
const STATUS_LINE = /^HTTP\/1\.([01]) ([1-9][0-9]{2})(?: ([\t\x20-\x7e\x80-\xff]*))?$/;
const FIELD_LINE = new RegExp(`^(${TOKEN}):[ \\t]*([\\t\\x20-\\x7e\\x80-\\xff]*?)[ \\t]*$`);

const CRLFCRLF = Buffer.from("\r\n\r\n");

/** The lines of a head of at most `maxBytes` bytes at the start of `buf`, or PARTIAL. */
function headLines(buf: Buffer, maxBytes: number): { lines: string[]; length: number } | typeof PARTIAL {
  const end = buf.indexOf(CRLFCRLF);
  if (end < 0 || end + 4 > maxBytes) {
    if (buf.length >= maxBytes) throw new HeadError(`the head is larger than ${maxBytes} bytes`);
    return PARTIAL;
  }
  // latin1: one character per byte, so that obs-text stays what it was and nothing is decoded.
  const text = buf.toString("latin1", 0, end);
  return { lines: text.split("\r\n"), length: end + 4 };
}

function fields(lines: readonly string[]): string[] {
  const raw: string[] = [];
  for (let i = 1; i < lines.length; i++) {
    const m = FIELD_LINE.exec(lines[i] as string);
    if (!m) throw new HeadError(`malformed field line ${i}`);
    raw.push(m[1] as string, m[2] as string);
  }
  return raw;
}

/** The request head at the start of `buf` (RFC 9112 §3), PARTIAL, or a HeadError. */
export function parseRequestHead(buf: Buffer, maxBytes: number): RequestHead | typeof PARTIAL {
  const found = headLines(buf, maxBytes);
  if (found === PARTIAL) return PARTIAL;
  const startLine = found.lines[0] as string;
  const m = REQUEST_LINE.exec(startLine);
  if (!m) throw new HeadError("malformed request line");
  return {
    startLine,
    method: m[1] as string,
    target: m[2] as string,
    minorVersion: m[3] === "1" ? 1 : 0,
    rawHeaders: fields(found.lines),
    length: found.length,
  };
}

/** The response head at the start of `buf` (RFC 9112 §4), PARTIAL, or a HeadError. */
export function parseResponseHead(buf: Buffer, maxBytes: number): ResponseHead | typeof PARTIAL {
  const found = headLines(buf, maxBytes);
  if (found === PARTIAL) return PARTIAL;
  const startLine = found.lines[0] as string;
  const m = STATUS_LINE.exec(startLine);
  if (!m) throw new HeadError("malformed status line");
  return {
    startLine,
    status: Number(m[2]),
    reason: m[3] ?? "",
    minorVersion: m[1] === "1" ? 1 : 0,
    rawHeaders: fields(found.lines),
    length: found.length,
  };
}

/** The values of a field (case-insensitive name) in a raw `[name, value, …]` list. */
export function fieldValues(rawHeaders: readonly string[], name: string): string[] {
  const out: string[] = [];
  for (let i = 0; i < rawHeaders.length; i += 2) {
    if ((rawHeaders[i] as string).length === name.length && (rawHeaders[i] as string).toLowerCase() === name) {
      out.push(rawHeaders[i + 1] as string);
    }
  }
  return out;
}

/** Whether a comma-separated field (Connection, Transfer-Encoding) lists `token`. */
export function listsToken(values: readonly string[], token: string): boolean {
  for (const v of values) for (const t of v.split(",")) if (t.trim().toLowerCase() === token) return true;
  return false;
}

/**
 * RFC 9110 §8.6: a Content-Length is decimal digits; several fields or a list are allowed only
 * when every value is the same. undefined for none, a HeadError for anything else.
 */
export function contentLength(rawHeaders: readonly string[]): number | undefined {
  const values = fieldValues(rawHeaders, "content-length");
  if (values.length === 0) return undefined;
  let length: number | undefined;
  for (const v of values) {
    for (const part of v.split(",")) {
      const t = part.trim();
      if (!/^[0-9]{1,15}$/.test(t)) throw new HeadError("malformed Content-Length");
      const n = Number(t);
      if (length !== undefined && n !== length) throw new HeadError("conflicting Content-Length values");
      length = n;
    }
  }
  return length;
}
