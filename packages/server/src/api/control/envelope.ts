// The envelope of the multiplexed control websocket (GET /v1/sprites/{name}/control, and the same
// under /v1/units; docs/API.md, GET /v1/units/{name}/control; docs/ARCHITECTURE.md section 10). Pure: parsing and encoding only.
//
// The public Sprites clients speak it in two framings, and both are accepted:
// - "prefixed": a text frame `control:` + JSON (`{"type":"op.start","op":"exec","args":{…}}`), as the
//   JS client sends every envelope and the Go client its exec ops;
// - "plain": a text frame of bare JSON whose `type` is an envelope type (`op.start`, `release`), as the
//   Go client sends its filesystem ops (`args` then a URL-encoded string) and its release; and the Go
//   client's older proxy start `{"type":"start","operation":…,"params":{…}}`, read as an op.start.
// Answers go back in the framing of the op.start they answer (session.ts).
//
// Any other text frame is data: while an op runs it is the op's (an exec's resize or signal).

export const CONTROL_PREFIX = "control:";

export type Framing = "prefixed" | "plain";

/** An op's arguments: every value a string or a list of strings (as a query string would give). */
export type OpArgs = Readonly<Record<string, string | readonly string[]>>;

export interface Envelope {
  readonly type: string;
  readonly op?: string;
  readonly args: OpArgs;
}

export type ParsedText =
  | { readonly kind: "envelope"; readonly framing: Framing; readonly envelope: Envelope }
  /** Plain text that is no envelope: an op's data. */
  | { readonly kind: "data" }
  | { readonly kind: "invalid"; readonly framing: Framing; readonly problem: string };

/** Types a plain (unprefixed) JSON frame may have to count as an envelope. */
const PLAIN_TYPES = new Set(["op.start", "release", "start"]);

/** Bounds on what an envelope may carry (a client cannot make the server hold more per op). */
export const MAX_ARGS = 64;
const MAX_NAME = 64;

/** Reads a client text frame. Never throws: a malformed envelope is `invalid`, naming the problem. */
export function parseText(text: string): ParsedText {
  if (text.startsWith(CONTROL_PREFIX)) {
    const body = text.slice(CONTROL_PREFIX.length);
    let value: unknown;
    try {
      value = JSON.parse(body);
    } catch {
      return invalid("prefixed", "envelope: the text after 'control:' is not JSON");
    }
    return readEnvelope(value, "prefixed");
  }
  if (!text.trimStart().startsWith("{")) return { kind: "data" };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { kind: "data" };
  }
  const type = (value as { type?: unknown } | null)?.type;
  if (typeof type !== "string" || !PLAIN_TYPES.has(type)) return { kind: "data" };
  return readEnvelope(value, "plain");
}

function invalid(framing: Framing, problem: string): ParsedText {
  return { kind: "invalid", framing, problem };
}

function readEnvelope(value: unknown, framing: Framing): ParsedText {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return invalid(framing, "envelope: must be a JSON object");
  }
  const v = value as Record<string, unknown>;
  if (typeof v.type !== "string" || v.type === "" || v.type.length > MAX_NAME) {
    return invalid(framing, "type: is required (a string such as 'op.start' or 'release')");
  }
  // The Go client's proxy start: {"type":"start","operation":"proxy","params":{…}}.
  const legacy = v.type === "start";
  const type = legacy ? "op.start" : v.type;
  const opValue = legacy ? v.operation : v.op;
  const opField = legacy ? "operation" : "op";
  let op: string | undefined;
  if (opValue !== undefined) {
    if (typeof opValue !== "string" || opValue === "" || opValue.length > MAX_NAME) {
      return invalid(framing, `${opField}: must be a non-empty string of at most ${MAX_NAME} characters`);
    }
    op = opValue;
  }
  const args = readArgs(legacy ? v.params : v.args, legacy ? "params" : "args");
  if (typeof args === "string") return invalid(framing, args);
  return { kind: "envelope", framing, envelope: { type, ...(op !== undefined && { op }), args } };
}

/** `args` as an object of strings and lists of strings, or a URL-encoded string; a problem as a string. */
export function readArgs(value: unknown, field = "args"): OpArgs | string {
  if (value === undefined || value === null) return {};
  if (typeof value === "string") {
    const out: Record<string, string | string[]> = {};
    let count = 0;
    for (const [k, v] of new URLSearchParams(value)) {
      const had = out[k];
      if (had === undefined) {
        if (++count > MAX_ARGS) return `${field}: at most ${MAX_ARGS} arguments`;
        out[k] = v;
      } else out[k] = Array.isArray(had) ? [...had, v] : [had as string, v];
    }
    return out;
  }
  if (typeof value !== "object" || Array.isArray(value)) {
    return `${field}: must be an object (or a URL-encoded string)`;
  }
  const entries = Object.entries(value as Record<string, unknown>);
  if (entries.length > MAX_ARGS) return `${field}: at most ${MAX_ARGS} arguments`;
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of entries) {
    const scalar = asText(v);
    if (scalar !== undefined) out[k] = scalar;
    else if (Array.isArray(v)) {
      const items = v.map(asText);
      if (items.some((i) => i === undefined)) return `${field}.${k}: a list may hold only strings and numbers`;
      out[k] = items as string[];
    } else return `${field}.${k}: must be a string, a number, a boolean or a list of strings`;
  }
  return out;
}

function asText(v: unknown): string | undefined {
  if (typeof v === "string") return v;
  if (typeof v === "number" && Number.isFinite(v)) return String(v);
  if (typeof v === "boolean") return String(v);
  return undefined;
}

/** A server envelope (`op.complete`, `op.error`) in `framing`. */
export function encodeEnvelope(framing: Framing, type: string, args?: Readonly<Record<string, unknown>>): string {
  const json = JSON.stringify(args === undefined ? { type } : { type, args });
  return framing === "prefixed" ? `${CONTROL_PREFIX}${json}` : json;
}

/** One value of `args` as a single string (the last of a list, as a query string's last value wins). */
export function argText(args: OpArgs, key: string): string | undefined {
  const v = args[key];
  return typeof v === "string" ? v : v?.at(-1);
}

/** One value of `args` as a list. */
export function argList(args: OpArgs, key: string): string[] | undefined {
  const v = args[key];
  return v === undefined ? undefined : typeof v === "string" ? [v] : [...v];
}
