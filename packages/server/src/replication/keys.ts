import { ReplicationError } from "./errors.js";

/** A store's own key prefix: `[a-z0-9_-]` segments, each followed by `/` (e.g. `ums/`), or "". */
export const KEY_PREFIX_PATTERN = /^(?:[a-z0-9_-]{1,64}\/){0,8}$/;

/** Unit and checkpoint ids as they may appear in an object key: nothing a unit wrote, nothing like `..`. */
export const ID_PATTERN = /^[a-z0-9_-]{1,64}$/;

export function isValidId(id: unknown): id is string {
  return typeof id === "string" && ID_PATTERN.test(id);
}

/** Throws INVALID_ID unless `id` matches {@link ID_PATTERN}. */
export function assertId(id: unknown, what: string): string {
  if (!isValidId(id)) {
    const shown = typeof id === "string" ? JSON.stringify(id.slice(0, 80)) : typeof id;
    throw new ReplicationError("INVALID_ID", `${what} ${shown} is not [a-z0-9_-]{1,64}`);
  }
  return id;
}

/**
 * The store layout, relative to the store's own key prefix: one folder per checkpoint, the
 * compressed send stream as one object uploaded in parts, and the manifest written last (its
 * presence means the export is complete).
 */
export function checkpointKeys(checkpointId: string): { dir: string; stream: string; manifest: string } {
  const id = assertId(checkpointId, "checkpoint id");
  const dir = `checkpoints/${id}/`;
  return { dir, stream: `${dir}stream.btrfs.zst`, manifest: `${dir}manifest.json` };
}
