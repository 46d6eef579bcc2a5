import type { MessagePort } from "node:worker_threads";
import { ImageArchiveError } from "./errors.js";
import type { GrowingFile } from "./growing-file.js";
import type { ApplyStats } from "./layer-applier.js";

/*
 * The messages between applyLayer (apply-layer.ts) and its worker thread (layer-worker.ts).
 */

/** Where the worker reads the layer: a file (a range of it), or chunks sent over a port. */
export type LayerSource =
  | {
      kind: "file";
      path: string;
      offset?: number;
      size?: number;
      /** The {@link GrowingFile.memory} of a file still being written: its bytes are waited for. */
      growing?: SharedArrayBuffer;
    }
  | { kind: "port"; port: MessagePort };

/** To the worker: apply one layer. */
export interface ApplyRequest {
  root: string;
  source: LayerSource;
  uidShift: number;
  uidRange: number;
  expectDiffId?: string;
  /** Whether the layer's diff_id is computed and given in the stats (it is when `expectDiffId` is set). */
  hash?: boolean;
  /** An Int32Array's memory: set to 1 to stop the worker between entries. */
  abort: SharedArrayBuffer;
}

/** From the worker: how it went. */
export type ApplyReply = { type: "done"; stats: ApplyStats } | { type: "failed"; error: SerializedError };

/** Over the port of a {@link LayerSource} of kind "port". */
export type ChunkMessage =
  | { type: "chunk"; data: Uint8Array }
  | { type: "end" }
  /** Reading the layer failed: the sender has the error. */
  | { type: "input-error" }
  | { type: "abort" };
/** Back over that port: bytes the worker took (for flow control). */
export interface AckMessage {
  type: "ack";
  bytes: number;
}

/** An error, as it crosses to the other thread (an Error loses its class and its fields on the way). */
export type SerializedError =
  /** The worker stopped on the abort flag. */
  | { kind: "aborted" }
  /** Reading the layer's chunks failed (a "port" source): the sender has the error. */
  | { kind: "input" }
  | { kind: "archive"; message: string; cause?: { name: string; message: string } }
  | { kind: "error"; name: string; message: string; stack?: string; fields: Record<string, string | number> };

/** Thrown in the worker when the abort flag is set. */
export class Aborted extends Error {}
/** Thrown in the worker when the sender of the chunks could not read them. */
export class InputFailed extends Error {}

const FIELDS = ["code", "errno", "syscall", "path", "dest"] as const;

export function serializeError(err: unknown): SerializedError {
  if (err instanceof Aborted) return { kind: "aborted" };
  if (err instanceof InputFailed) return { kind: "input" };
  if (err instanceof ImageArchiveError) {
    const cause = err.cause as { name?: unknown; message?: unknown } | undefined;
    return {
      kind: "archive",
      message: err.message,
      ...(cause !== undefined && { cause: { name: String(cause.name ?? "Error"), message: String(cause.message) } }),
    };
  }
  const e = (err instanceof Error ? err : new Error(String(err))) as Error & Record<string, unknown>;
  const fields: Record<string, string | number> = {};
  for (const f of FIELDS) {
    const v = e[f];
    if (typeof v === "string" || typeof v === "number") fields[f] = v;
  }
  return { kind: "error", name: e.name, message: e.message, ...(e.stack !== undefined && { stack: e.stack }), fields };
}

/** The error of a reply; "aborted" and "input" are for the caller, which knows the real ones. */
export function deserializeError(e: SerializedError & { kind: "archive" | "error" }): Error {
  if (e.kind === "archive") {
    const cause = e.cause && Object.assign(new Error(e.cause.message), { name: e.cause.name });
    return new ImageArchiveError(e.message, cause ? { cause } : undefined);
  }
  const err = Object.assign(new Error(e.message), e.fields);
  err.name = e.name;
  if (e.stack !== undefined) err.stack = e.stack;
  return err;
}
