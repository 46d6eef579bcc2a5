/**
 * The unit's `/.unit` is ums's (docs/SECURITY.md): the host's runtime pieces (the agent, its sockets,
 * node) live there. The filesystem API (spec 4.4) never reaches into it, as the unit user or `asRoot`,
 * except what the spec exposes there read-only: the service logs (spec 4.6, `/.unit/logs/`), the
 * checkpoints ("Checkpoints mounted read-only at /.unit/checkpoints/") and ums's policy files
 * (`/.unit/policy/`), which may be read, listed and watched.
 *
 * This is the rule, on absolute paths; the unit's agent applies it to the path asked for and to the real
 * path of every file it opens (packages/agent/src/fs/guard.ts), so no `..`, symlink or race gets past
 * it. Dependency-free, so the agent bundle can import it alone.
 */

/** The error code of a request for a reserved path (HTTP 403), beside the errno names of fs errors. */
export const FS_RESERVED_PATH = "UMS_FS_RESERVED_PATH" as const;

export const UNIT_DIR = "/.unit";

/** What of `/.unit` the filesystem API may read, list and watch (never write). */
export const READABLE_UNIT_DIRS: readonly string[] = Object.freeze([
  "/.unit/logs",
  "/.unit/checkpoints",
  "/.unit/policy",
]);

export type FsAccess = "read" | "write";

/** `path` (absolute) with `.`, `..` and repeated or trailing slashes resolved lexically, as the kernel would without symlinks. */
export function normalizeAbsolute(path: string): string {
  const parts: string[] = [];
  for (const seg of path.split("/")) {
    if (seg === "" || seg === ".") continue;
    if (seg === "..") parts.pop();
    else parts.push(seg);
  }
  return `/${parts.join("/")}`;
}

const within = (path: string, dir: string): boolean => path === dir || path.startsWith(`${dir}/`);

/** Whether the filesystem API must refuse `access` to `path` (absolute; normalised here). */
export function isReservedPath(path: string, access: FsAccess): boolean {
  const p = normalizeAbsolute(path);
  if (!within(p, UNIT_DIR)) return false;
  return access === "write" || !READABLE_UNIT_DIRS.some((d) => within(p, d));
}

/** The message of a refusal: says why and what may be done instead. */
export function reservedMessage(path: string, access: FsAccess): string {
  const what = access === "write" ? "changed" : "read";
  return (
    `${FS_RESERVED_PATH}: '${path}' is reserved and cannot be ${what} through the filesystem API: ` +
    `/.unit belongs to ums (only ${READABLE_UNIT_DIRS.join(", ")} can be read)`
  );
}
