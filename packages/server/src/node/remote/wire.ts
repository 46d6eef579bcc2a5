import { timingSafeEqual } from "node:crypto";
import { AgentTimeoutError } from "../../agent/deadline.js";
import { AgentAnswerError, AgentUnreachableError, NODE_SENT } from "../../agent/errors.js";
import {
  ActiveCheckpointError,
  ImageGoneError,
  ImageInUseError,
  RunningLimitError,
  TemplateGoneError,
  UnitBusyError,
  UnitDeletedError,
  UnitMovingError,
  UpgradeRefusedError,
} from "../../lifecycle/errors.js";
import { CommandError } from "../../runtime/exec/host-command.js";
import { ImageArchiveError } from "../../runtime/image/oci/index.js";
import { ImageExistsError, TemplateExistsError } from "../../store/store.js";
import { NoNodeError, UnitStartError, UnitUnavailableError } from "../errors.js";

// Issue #15: the protocol between an API process and a node process (docs/SCALE-OUT.md, "The node
// endpoint"). Every request carries the deployment's node secret as a bearer token; units never
// reach the endpoint (the node's nftables keep every unit packet from the host's own services).

/** Where the node's endpoint answers (every path begins with it). */
export const NODE_PREFIX = "/node/v1";
/** The upgrade that has a node splice the connection to a leased unit's agent, or to its HTTP target. */
export const SPLICE_UPGRADE = "ums-node-splice";
/** An API process's session with a node (node-endpoint.ts): the leases it holds there. */
export const SESSION_UPGRADE = "ums-node-session";
/**
 * Another node's request for a checkpoint (a unit moving to it), answered with the raw `btrfs send`
 * stream after a 101, until the connection's end (a reset if the send failed).
 */
export const SEND_UPGRADE = "ums-node-send";

/** A wake named a session the node no longer has (it restarted, or the session broke): open another. */
export class SessionGoneError extends Error {
  constructor() {
    super("that session is gone (the node restarted or the connection broke)");
  }
}
/** The content type of a streamed answer: one JSON event per line (progress, then the result or the error). */
export const NDJSON = "application/x-ndjson";

/** One line of a streamed answer. */
export type StreamEvent =
  | { readonly progress: string }
  | { readonly result: unknown }
  | { readonly error: WireError }
  | { readonly lease: string; readonly booted: boolean }
  /** A recipe build on a node asks the API to run the recipe's steps in a unit of draft `steps`. */
  | { readonly steps: string; readonly build: string };

/** An error as it crosses the wire: its class by name, its message, its own fields, its cause. */
export interface WireError {
  readonly kind: string;
  readonly message: string;
  readonly fields: Record<string, unknown>;
  readonly cause?: WireError;
}

// The errors the API tells apart (errors/node-errors.ts and the services): each comes back as
// itself, so that `instanceof` holds on the API's side as it does in one process.
const KINDS: Record<string, { prototype: Error }> = {
  AgentAnswerError,
  AgentTimeoutError,
  AgentUnreachableError,
  UnitDeletedError,
  RunningLimitError,
  UnitBusyError,
  UnitMovingError,
  UnitStartError,
  UnitUnavailableError,
  ActiveCheckpointError,
  TemplateGoneError,
  ImageGoneError,
  ImageInUseError,
  UpgradeRefusedError,
  ImageArchiveError,
  NoNodeError,
  CommandError,
  ImageExistsError,
  TemplateExistsError,
  SessionGoneError,
};

const isPlain = (v: unknown): boolean =>
  v === null ||
  ["string", "number", "boolean"].includes(typeof v) ||
  (Array.isArray(v) && v.every((x) => typeof x === "string"));

/** `err` for the wire (its cause chain to depth 4; fields that are not plain values are left out). */
export function encodeError(err: unknown, depth = 0): WireError {
  if (!(err instanceof Error)) return { kind: "Error", message: String(err), fields: {} };
  const ctor = err.constructor as { name: string };
  const kind = KINDS[ctor.name] && KINDS[ctor.name]?.prototype === Object.getPrototypeOf(err) ? ctor.name : "Error";
  const fields: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(err)) if (k !== "cause" && isPlain(v)) fields[k] = v;
  const cause = (err as { cause?: unknown }).cause;
  return {
    kind,
    message: err.message,
    fields,
    ...(cause !== undefined && depth < 4 && { cause: encodeError(cause, depth + 1) }),
  };
}

/** The error `w` names, as an instance of its class (no constructor runs: the fields are the node's). */
export function decodeError(w: WireError): Error {
  const err = new Error(typeof w.message === "string" ? w.message : "the node failed");
  const kind = KINDS[w.kind];
  if (kind) Object.setPrototypeOf(err, kind.prototype);
  for (const [k, v] of Object.entries(w.fields ?? {})) {
    if (k !== "message" && k !== "stack" && isPlain(v)) Object.defineProperty(err, k, { value: v, enumerable: true });
  }
  if (w.cause) Object.defineProperty(err, "cause", { value: decodeError(w.cause) });
  Object.defineProperty(err, NODE_SENT, { value: true });
  return err;
}

/** Whether `header` (an Authorization header) carries `secret` as its bearer token (compared in constant time). */
export function bearerMatches(header: string | undefined, secret: string): boolean {
  if (!header?.startsWith("Bearer ")) return false;
  const given = Buffer.from(header.slice(7));
  const want = Buffer.from(secret);
  return given.length === want.length && timingSafeEqual(given, want);
}

/** What an API asks of a node in one JSON call: the UnitNode method and its arguments. */
export const JSON_METHODS = [
  "status",
  "create",
  "fork",
  "publishTemplate",
  "deleteTemplate",
  "fromTemplate",
  "fillDraft",
  "baseImage",
  "deleteImage",
  "fromImage",
  "destroy",
  "health",
  "deleteCheckpoint",
  "checkpointsPresent",
  "resourceLimits",
  "applyResources",
  "applyNetworkPolicy",
  "networkReport",
  "moveDone",
  "moveAborted",
] as const;
export type JsonMethod = (typeof JSON_METHODS)[number];

/** The calls whose answer streams progress before the result. */
export const PROGRESS_METHODS = ["checkpoint", "restore", "upgrade", "buildImage", "moveOut", "moveIn"] as const;
export type ProgressMethod = (typeof PROGRESS_METHODS)[number];
