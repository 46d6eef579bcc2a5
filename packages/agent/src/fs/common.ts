import { FS_RESERVED_PATH } from "@ums/protocol/fs-reserved";
import { FsOpError, fsFailure } from "./errors.js";
import type { Guard, Pinned } from "./guard.js";

/** Runs a call made through /proc/self/fd paths; its failure names `shown`, the caller's path. */
export const at = async <T>(shown: string, syscall: string, fn: () => Promise<T>): Promise<T> => {
  try {
    return await fn();
  } catch (err) {
    throw fsFailure(err, shown, syscall);
  }
};

export const isReservedError = (err: unknown): boolean => err instanceof FsOpError && err.code === FS_RESERVED_PATH;

/** A directory below a listed one, by its real path: null when reserved (/.unit below /), gone, or moved. */
export async function openBelow(g: Guard, real: string, shown: string): Promise<Pinned | null> {
  const d = await g.open(real, "read", { follow: false, directory: true }, shown).catch(() => null);
  if (!d || d.real === real) return d;
  await d.close();
  return null;
}
