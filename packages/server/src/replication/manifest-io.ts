import { ReplicationError } from "./errors.js";
import { assertId, checkpointKeys } from "./keys.js";
import { MAX_MANIFEST_BYTES, type Manifest, parseManifest } from "./manifest.js";
import { type ObjectStore, readObject } from "./object-store.js";

/** Reads and validates checkpoint `checkpointId`'s manifest; NOT_FOUND (or undefined with `missingOk`) when absent. */
export async function readManifest(
  store: ObjectStore,
  checkpointId: string,
  opts: { signal?: AbortSignal | undefined; missingOk: true },
): Promise<Manifest | undefined>;
export async function readManifest(
  store: ObjectStore,
  checkpointId: string,
  opts?: { signal?: AbortSignal | undefined; missingOk?: false },
): Promise<Manifest>;
export async function readManifest(
  store: ObjectStore,
  checkpointId: string,
  opts: { signal?: AbortSignal | undefined; missingOk?: boolean } = {},
): Promise<Manifest | undefined> {
  const id = assertId(checkpointId, "checkpoint id");
  let bytes: Buffer;
  try {
    bytes = await readObject(store, checkpointKeys(id).manifest, MAX_MANIFEST_BYTES, { signal: opts.signal });
  } catch (err) {
    if (err instanceof ReplicationError && err.code === "NOT_FOUND") {
      if (opts.missingOk) return undefined;
      throw new ReplicationError("NOT_FOUND", `checkpoint ${id} is not in the store (${store.description})`);
    }
    if (err instanceof ReplicationError && err.code === "TRUNCATED") {
      throw new ReplicationError(
        "INVALID_MANIFEST",
        `the manifest of ${id} is larger than ${MAX_MANIFEST_BYTES} bytes`,
      );
    }
    throw err;
  }
  return parseManifest(bytes, id);
}

/** The checkpoints whose export is complete (a manifest), in key order. */
export async function listExports(store: ObjectStore, opts: { signal?: AbortSignal } = {}): Promise<string[]> {
  const out: string[] = [];
  for (const o of await store.list("checkpoints/", opts)) {
    const m = /^checkpoints\/([a-z0-9_-]{1,64})\/manifest\.json$/.exec(o.key);
    if (m?.[1]) out.push(m[1]);
  }
  return out;
}
