export { type ApplyLayerOptions, type ApplyStats, applyLayer, MAX_SKIPPED_LISTED } from "./apply-layer.js";
export { type OciArchive, type OciImageConfig, type OciLayerRef, readOciArchive } from "./archive.js";
export { ImageArchiveError } from "./errors.js";
export { GrowingFile } from "./growing-file.js";
export {
  type ImportOciArchiveOptions,
  type ImportOciArchiveResult,
  type ImportProgress,
  importOciArchive,
  prepareRoot,
} from "./import-archive.js";
export { entryComponents, MAX_SYMLINKS, resolveDir, resolveEntry, resolveInRoot } from "./scoped-path.js";
export { LayerSpeculation } from "./speculation.js";
export { receiveArchive } from "./upload.js";
