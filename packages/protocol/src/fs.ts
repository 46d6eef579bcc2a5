import { type Static, type TProperties, Type } from "@sinclair/typebox";

/**
 * Filesystem API wire shapes (spec 2.9 and 4.4, docs/ARCHITECTURE.md section 10).
 *
 * Paths: `path` (or `source`/`dest`) is resolved against `workingDir` when relative; `workingDir` must be
 * absolute. Everything is resolved and executed inside the unit by its agent.
 *
 * Booleans (`recursive`, `asRoot`, `preserveAttrs`, `mkdir`) default to false when left out: the public
 * clients drop unset options from the JSON they send.
 *
 * Error bodies:
 * - bad input: 400 `{errors: string[], code: "UMS_VALIDATION"}` (the API's usual validation shape);
 * - unit missing, unit unavailable, …: the API's usual `{error, code: "UMS_…"}`;
 * - a failed filesystem operation: `{error, code, path}` where `code` is the errno name (`ENOENT`,
 *   `EEXIST`, `EACCES`, `EPERM`, `ENOTDIR`, `EISDIR`, `ENOTEMPTY`, `EINVAL`, `ELOOP`, `ENAMETOOLONG`,
 *   `EXDEV`, `EBUSY`, `ENOSPC`, `EROFS`, `EIO`, …) as the public clients expect (docs/ARCHITECTURE.md section 10), and
 *   `path` is the path (as resolved in the unit) the error is about. The `UMS_` prefix of our own codes and
 *   the `E` prefix of errno names never collide, so `code` alone tells a client which kind it got.
 *   Status: 404 for ENOENT, 400 for the other errors the request caused (EEXIST, EACCES, EPERM, ENOTDIR,
 *   EISDIR, ENOTEMPTY, EINVAL, ELOOP, ENAMETOOLONG, EXDEV, EROFS), 507 for ENOSPC/EDQUOT, 500 otherwise.
 * - a path in `/.unit` (ums's, see fs-reserved.ts), asked for or reached through a symlink: 403
 *   `{error, code: "UMS_FS_RESERVED_PATH", path}`; only /.unit/logs, /.unit/checkpoints and
 *   /.unit/policy can be read, listed and watched.
 */

export const OctalMode = Type.String({
  pattern: "^0?[0-7]{3,4}$",
  maxLength: 5,
  "x-message": 'must be an octal permission string such as "0644" or "755"',
  description: 'Octal permissions, e.g. "0644" or "755"',
});

const FsPath = (description: string) => Type.String({ minLength: 1, maxLength: 4096, description });
const WorkingDir = Type.String({
  minLength: 1,
  maxLength: 4096,
  pattern: "^/",
  "x-message": "must be an absolute path",
  description: "Absolute directory that relative paths resolve against",
});
const Flag = (description: string) => Type.Optional(Type.Boolean({ default: false, description }));
const AsRoot = Flag("Run as the unit's root");

/** chmod and chown: what they change, and how far. */
const ChangeTarget = { path: FsPath("Path to change"), workingDir: WorkingDir };
const ChangeScope = { recursive: Flag("Also everything below a directory"), asRoot: AsRoot };
/** chmod and chown: each path changed, with its new attributes. */
const Changed = <T extends TProperties>(attributes: T) =>
  Type.Object({ affected: Type.Array(Type.Object(attributes)), count: Type.Integer() });

/** Spec 2.9: one directory item. `mode` is the permission bits in octal ("0644"). */
export const FsEntry = Type.Object(
  {
    name: Type.String(),
    path: Type.String(),
    type: Type.Union([
      Type.Literal("file"),
      Type.Literal("directory"),
      Type.Literal("symlink"),
      Type.Literal("fifo"),
      Type.Literal("socket"),
      Type.Literal("char"),
      Type.Literal("block"),
      Type.Literal("unknown"),
    ]),
    size: Type.Integer(),
    mode: Type.String(),
    modTime: Type.String({ format: "date-time" }),
    isDir: Type.Boolean(),
  },
  { title: "FsEntry" },
);
export type FsEntry = Static<typeof FsEntry>;

export const FsListQuery = Type.Object(
  {
    path: FsPath("Directory (or file) to list"),
    workingDir: WorkingDir,
    recursive: Flag("List the whole tree below `path` (at most 10000 entries)"),
    pattern: Type.Optional(
      Type.String({ minLength: 1, maxLength: 256, description: "Keep entries whose name matches this glob (* and ?)" }),
    ),
  },
  { additionalProperties: false },
);
export type FsListQuery = Static<typeof FsListQuery>;

export const FsListResponse = Type.Object({ path: Type.String(), entries: Type.Array(FsEntry), count: Type.Integer() });
export type FsListResponse = Static<typeof FsListResponse>;

export const FsReadQuery = Type.Object(
  { path: FsPath("File to read"), workingDir: WorkingDir },
  { additionalProperties: false },
);
export type FsReadQuery = Static<typeof FsReadQuery>;

export const FsWriteQuery = Type.Object(
  {
    path: FsPath("File to write (created, or replaced whole once the body has arrived)"),
    workingDir: WorkingDir,
    mode: Type.Optional(OctalMode),
    mkdir: Flag("Create missing parent directories"),
    mkdirParents: Flag("Same as mkdir (public clients)"),
    asRoot: Flag("Write as the unit's root instead of the unit user"),
  },
  { additionalProperties: false },
);
export type FsWriteQuery = Static<typeof FsWriteQuery>;

export const FsWriteResponse = Type.Object({ path: Type.String(), size: Type.Integer(), mode: Type.String() });
export type FsWriteResponse = Static<typeof FsWriteResponse>;

export const FsChmodBody = Type.Object(
  { ...ChangeTarget, mode: OctalMode, ...ChangeScope },
  { additionalProperties: false },
);
export type FsChmodBody = Static<typeof FsChmodBody>;

export const FsChmodResponse = Changed({ path: Type.String(), mode: Type.String() });
export type FsChmodResponse = Static<typeof FsChmodResponse>;

/** A numeric id, or a user/group name of the unit's /etc/passwd or /etc/group. */
const OwnerId = Type.Union([
  Type.Integer({ minimum: 0, maximum: 4294967294 }),
  Type.String({ minLength: 1, maxLength: 64, pattern: "^[A-Za-z0-9_][A-Za-z0-9_.-]*\\$?$" }),
]);

export const FsChownBody = Type.Object(
  { ...ChangeTarget, uid: Type.Optional(OwnerId), gid: Type.Optional(OwnerId), ...ChangeScope },
  { additionalProperties: false },
);
export type FsChownBody = Static<typeof FsChownBody>;

export const FsChownResponse = Changed({ path: Type.String(), uid: Type.Integer(), gid: Type.Integer() });
export type FsChownResponse = Static<typeof FsChownResponse>;

export const FsCopyBody = Type.Object(
  {
    source: FsPath("Path to copy"),
    dest: FsPath("Where to"),
    workingDir: WorkingDir,
    recursive: Flag("Copy a directory and everything below it"),
    preserveAttrs: Flag("Keep mode, owner and times"),
    asRoot: AsRoot,
  },
  { additionalProperties: false },
);
export type FsCopyBody = Static<typeof FsCopyBody>;

export const FsCopyResponse = Type.Object({
  copied: Type.Array(Type.Object({ source: Type.String(), dest: Type.String() })),
  count: Type.Integer(),
  totalBytes: Type.Integer(),
});
export type FsCopyResponse = Static<typeof FsCopyResponse>;

export const FsDeleteBody = Type.Object(
  {
    path: FsPath("Path to delete"),
    workingDir: WorkingDir,
    recursive: Flag("Delete a non-empty directory and everything below it"),
    asRoot: AsRoot,
  },
  { additionalProperties: false },
);
export type FsDeleteBody = Static<typeof FsDeleteBody>;

export const FsDeleteResponse = Type.Object({ deleted: Type.Array(Type.String()), count: Type.Integer() });
export type FsDeleteResponse = Static<typeof FsDeleteResponse>;

export const FsRenameBody = Type.Object(
  {
    source: FsPath("Path to rename"),
    dest: FsPath("New path"),
    workingDir: WorkingDir,
    asRoot: AsRoot,
  },
  { additionalProperties: false },
);
export type FsRenameBody = Static<typeof FsRenameBody>;

export const FsRenameResponse = Type.Object({ source: Type.String(), dest: Type.String() });
export type FsRenameResponse = Static<typeof FsRenameResponse>;

/** A failed filesystem operation: `code` is the errno name (see the top of this file). */
export const FsErrorBody = Type.Object(
  { error: Type.String(), code: Type.String(), path: Type.Optional(Type.String()) },
  { title: "FsErrorBody", description: "A failed filesystem operation; code is the errno name (ENOENT, EACCES, …)" },
);
export type FsErrorBody = Static<typeof FsErrorBody>;

export { fsErrorStatus } from "./fs-errors.js";
export {
  FS_RESERVED_PATH,
  type FsAccess,
  isReservedPath,
  normalizeAbsolute,
  READABLE_UNIT_DIRS,
} from "./fs-reserved.js";

/**
 * File watch websocket (GET /v1/units/{name}/fs/watch), JSON text frames.
 * Client: `{"type":"subscribe","path"|"paths","workingDir"?,"recursive"?}`, `{"type":"unsubscribe","path"|"paths"}`.
 * Server: `{"type":"subscribed","paths"}`, `{"type":"unsubscribed","paths"}`,
 * `{"type":"event","event":"create"|"modify"|"delete"|"rename","path","oldPath"?,"isDir","timestamp"}`
 * (`oldPath` on a rename, `path` being the new name), `{"type":"error","error","code","path"?}`,
 * and keepalive `{"type":"ping"}`.
 */
export type FsWatchClientMessage =
  | { type: "subscribe"; path?: string; paths?: string[]; workingDir?: string; recursive?: boolean }
  | { type: "unsubscribe"; path?: string; paths?: string[]; workingDir?: string };

export interface FsWatchEvent {
  type: "event";
  event: "create" | "modify" | "delete" | "rename";
  path: string;
  oldPath?: string;
  isDir: boolean;
  timestamp: string;
}
