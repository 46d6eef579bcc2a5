import { unitNameProblem } from "@ums/protocol";

/**
 * Continuation tokens (spec 4.1, section 8): opaque to clients. Inside, the name of the last unit
 * returned; the next page starts strictly after it (keyset pagination), so units created or
 * deleted between pages never make another unit appear twice or be skipped.
 */
const VERSION = 1;

export function encodeContinuation(lastName: string): string {
  return Buffer.from(JSON.stringify({ v: VERSION, after: lastName }), "utf8").toString("base64url");
}

/** The name to continue after, or undefined when `token` is not one this server issued. */
export function decodeContinuation(token: string): string | undefined {
  if (!/^[A-Za-z0-9_-]{1,512}$/.test(token)) return undefined;
  try {
    const value: unknown = JSON.parse(Buffer.from(token, "base64url").toString("utf8"));
    if (typeof value !== "object" || value === null) return undefined;
    const { v, after } = value as { v?: unknown; after?: unknown };
    if (v !== VERSION || typeof after !== "string" || unitNameProblem(after)) return undefined;
    return after;
  } catch {
    return undefined;
  }
}
