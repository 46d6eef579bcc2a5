import { createHmac, timingSafeEqual } from "node:crypto";

/**
 * Issue #17: webhook deliveries are signed. The receiver gets `X-UMS-Timestamp` (Unix seconds) and
 * `X-UMS-Signature: v1=<hex HMAC-SHA256(secret, timestamp + "." + body)>`; it recomputes the MAC
 * over the raw body and refuses a timestamp too far from its clock (replay).
 */
export const SIGNATURE_HEADER = "x-ums-signature";
export const TIMESTAMP_HEADER = "x-ums-timestamp";
/** How far a delivery's timestamp may be from the receiver's clock by default (seconds). */
export const DEFAULT_TOLERANCE_S = 300;

export function signWebhook(secret: string, timestamp: number | string, body: string | Uint8Array): string {
  const mac = createHmac("sha256", secret);
  mac.update(`${timestamp}.`);
  mac.update(body);
  return `v1=${mac.digest("hex")}`;
}

export interface VerifyWebhookInput {
  readonly secret: string;
  /** The raw request body, exactly as received. */
  readonly body: string | Uint8Array;
  /** The X-UMS-Signature header. */
  readonly signature: string | null | undefined;
  /** The X-UMS-Timestamp header. */
  readonly timestamp: string | null | undefined;
  /** Seconds the timestamp may differ from `now` (default 300). */
  readonly toleranceSeconds?: number;
  /** The receiver's clock in ms (default Date.now()). */
  readonly now?: number;
}

/** Whether a delivery is authentic and fresh; constant-time in the MAC comparison. */
export function verifyWebhook(input: VerifyWebhookInput): boolean {
  const { signature, timestamp } = input;
  if (typeof signature !== "string" || typeof timestamp !== "string" || !/^\d{1,12}$/.test(timestamp)) return false;
  const tolerance = input.toleranceSeconds ?? DEFAULT_TOLERANCE_S;
  const now = Math.floor((input.now ?? Date.now()) / 1000);
  if (Math.abs(now - Number(timestamp)) > tolerance) return false;
  const expected = Buffer.from(signWebhook(input.secret, timestamp, input.body));
  // A header may carry several signatures (a secret being rotated): any one that matches will do.
  return signature
    .split(",")
    .map((s) => Buffer.from(s.trim()))
    .some((got) => got.length === expected.length && timingSafeEqual(got, expected));
}
