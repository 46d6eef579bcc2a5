// The filesystem operations of spec 4.4, run by the agent (or its worker, see worker.ts) inside the unit:
// every path is resolved by the kernel in the unit's mount namespace, so no `..`, absolute path or symlink
// can reach a host file. Paths arrive absolute (the host resolves `workingDir`). Nothing in /.unit but
// what the spec shows there read-only is reached, and every object is used through the descriptor it
// was checked by, never by its path a second time (guard.ts). Failures are FsOpError with the errno
// name and the path they are about (errors.ts). The operations live by kind: listing (entries.ts),
// changes of mode, owner and place (changes.ts), opening and copying (open.ts).
export { chmodOp, chownOp, deleteOp, renameOp, resolveOwner } from "./changes.js";
export { type Entry, entryOf, globRegExp, list, MAX_LIST, octal, parseMode } from "./entries.js";
export { FsOpError, statusOf, toFsError } from "./errors.js";
export { copyOp, openForRead, openForWrite } from "./open.js";
