export { CommandError, run } from "../exec/host-command.js";
export {
  childSubvolumes,
  createSubvolume,
  deleteSubvolume,
  isReadonly,
  isSubvolume,
  listSubvolumes,
  type SubvolumeInfo,
  setReadonly,
  snapshot,
} from "./btrfs.js";
export { withFileLock } from "./lock.js";
export { mountsBelow, unmountBelow } from "./mounts.js";
export { closePool, DEFAULT_POOL_SIZE, defaultPoolSize, type OpenPoolOptions, openPool, type Pool } from "./pool.js";
