import type { Readable } from "node:stream";
import { GrowingFile } from "./growing-file.js";
import {
  type ImportOciArchiveOptions,
  type ImportOciArchiveResult,
  importOciArchive,
  prepareRoot,
} from "./import-archive.js";
import { LayerSpeculation } from "./speculation.js";
import { receiveArchive } from "./upload.js";

export interface ImportUploadOptions extends Omit<ImportOciArchiveOptions, "speculation"> {
  /** The new file the upload is written to; the caller removes it afterwards. */
  upload: string;
  /** Makes the root empty and prepared again after a wrong guess (LayerSpeculationOptions.reset). */
  reset?: () => Promise<void>;
}

/**
 * Imports the archive `body` streams (an upload) into `root`, an empty directory: the upload is
 * written to `opts.upload` while its layers are applied onto `root` as they arrive
 * (speculation.ts), then the archive is read and the rest applied ({@link importOciArchive}). When
 * it fails (the body's error, an ImageArchiveError), the guess has stopped: nothing writes to `root`
 * any more, which is left for the caller to remove.
 */
export async function importUpload(
  body: Readable,
  root: string,
  opts: ImportUploadOptions,
): Promise<ImportOciArchiveResult> {
  const { upload, reset, ...rest } = opts;
  await prepareRoot(root, opts.uidShift);
  const growing = new GrowingFile();
  const guess = new LayerSpeculation(root, upload, growing, {
    uidShift: opts.uidShift,
    uidRange: opts.uidRange,
    ...(reset && { reset }),
  });
  try {
    await receiveArchive(body, upload, {
      growing,
      onChunk: (chunk) => guess.chunk(chunk),
      ...(opts.signal && { signal: opts.signal }),
    });
    return await importOciArchive(upload, root, { ...rest, speculation: guess });
  } catch (err) {
    await guess.stop();
    throw err;
  }
}
