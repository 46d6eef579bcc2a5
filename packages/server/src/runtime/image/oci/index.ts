export { type ApplyLayerOptions, type ApplyStats, applyLayer, MAX_SKIPPED_LISTED } from "./apply-layer.js";
export { type OciArchive, type OciImageConfig, type OciLayerRef, readOciArchive } from "./archive.js";
export { ImageArchiveError } from "./errors.js";
export {
  type ImportOciArchiveOptions,
  type ImportOciArchiveResult,
  type ImportProgress,
  importOciArchive,
  prepareRoot,
} from "./import-archive.js";
export { type ImportUploadOptions, importUpload } from "./import-upload.js";
export { entryComponents, MAX_SYMLINKS, resolveDir, resolveEntry, resolveInRoot } from "./scoped-path.js";
