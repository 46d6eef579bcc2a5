import { constants } from "node:fs";
import { lstat, open, readdir } from "node:fs/promises";
import { type ApplyStats, addStats, emptyStats, LayerWorker } from "./apply-layer.js";
import { type OciArchive, type OciImageConfig, readArchive } from "./archive.js";
import { withContext } from "./errors.js";
import type { LayerSpeculation } from "./speculation.js";

export interface ImportProgress {
  /** The layer being applied (1-based); 0 while the archive is read. */
  layer: number;
  /** Layers in all; 0 until the archive is read. */
  layers: number;
  message: string;
}

export interface ImportOciArchiveOptions {
  /** An empty directory for the archive's files; the caller removes it afterwards. */
  workDir: string;
  /** Host id of the image's id 0 (UID_SHIFT). */
  uidShift: number;
  /** Ids an image may use (UID_RANGE). */
  uidRange: number;
  onProgress?: (progress: ImportProgress) => void;
  /** Stops the import (between entries); what was written stays for the caller to remove. */
  signal?: AbortSignal;
  /**
   * Layers applied onto `root` while the archive arrived (speculation.ts): kept if they are the
   * image's first ones, in order, else undone. With it, `root` was prepared ({@link prepareRoot}).
   */
  speculation?: LayerSpeculation;
}

export interface ImportOciArchiveResult {
  config: OciImageConfig;
  format: OciArchive["format"];
  /** Number of layers applied. */
  layers: number;
  /** All layers' stats added up. */
  stats: ApplyStats;
  reference: string | null;
  platform: string | null;
}

/** Gives `root` (the image's `/`) its owner and mode until a layer says otherwise: the image's root, 0755. */
export async function prepareRoot(root: string, uidShift: number): Promise<void> {
  const fh = await open(root, constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW);
  try {
    await fh.chown(uidShift, uidShift);
    await fh.chmod(0o755);
  } finally {
    await fh.close();
  }
}

/**
 * Imports the image archive `archive` (`docker save` output or an OCI image layout tar, plain or
 * gzip) into `root`, an empty directory the caller made: its files go to `opts.workDir`, then every
 * layer is applied onto `root` in order ({@link applyLayer}), owners shifted by `opts.uidShift`. The
 * root itself is owned by the image's root (uidShift) with mode 0755 unless a layer says otherwise.
 * Problems of the archive are an ImageArchiveError ("layer 2: entry 'x' ..."); on any error the
 * root is left as it is, for the caller to remove.
 *
 * Of an uncompressed archive (docker save makes those) nothing is copied: the work directory gets
 * empty stand-ins of its files, the layers are read where they are in `archive`, which must stay as
 * it is until the import is done. Its large files are hashed while the layers are applied: the
 * import fails, with the digest's error, if one does not match.
 */
export async function importOciArchive(
  archive: string,
  root: string,
  opts: ImportOciArchiveOptions,
): Promise<ImportOciArchiveResult> {
  const st = await lstat(root);
  if (!st.isDirectory()) throw new Error(`${root} is not a directory`);
  if (opts.speculation === undefined && (await readdir(root)).length > 0) throw new Error(`${root} is not empty`);
  const report = (p: ImportProgress) => opts.onProgress?.(p);

  report({ layer: 0, layers: 0, message: "reading the archive" });
  const worker = LayerWorker.take(); // one thread for all the layers (a new one starts while the archive is read)
  try {
    // Its layers are read where they are in the archive (an uncompressed one): not copied first.
    const image = await readArchive(archive, opts.workDir, { signal: opts.signal, inPlace: true });
    const layers = image.layers.length;

    // The archive's large files are hashed while the layers are applied. A digest that does not
    // match stops the import, with its own error: the one reading the archive would have given, had
    // it hashed them first.
    const stop = new AbortController();
    const signal = opts.signal ? AbortSignal.any([opts.signal, stop.signal]) : stop.signal;
    const verified = image.verify();
    verified.catch(() => stop.abort());
    const stats = emptyStats();
    try {
      let from = 0; // layers on the root already
      if (opts.speculation !== undefined) {
        const kept = await opts.speculation.settle(image.layers);
        from = kept.applied;
        for (const s of kept.stats) addStats(stats, s);
        if (from > 0) {
          report({ layer: from, layers, message: `applied ${from}/${layers} layers while the archive arrived` });
        }
      } else await prepareRoot(root, opts.uidShift);
      for (const [i, layer] of image.layers.entries()) {
        if (i < from) continue;
        signal.throwIfAborted();
        const mib = (layer.size / 1024 / 1024).toFixed(1);
        report({
          layer: i + 1,
          layers,
          message: `applying layer ${i + 1}/${layers} (${mib} MiB${layer.compression === "gzip" ? ", gzip" : ""})`,
        });
        try {
          const layerStats = await worker.apply(
            root,
            { file: layer.path, offset: layer.offset, size: layer.size },
            {
              uidShift: opts.uidShift,
              uidRange: opts.uidRange,
              // An uncompressed layer's digest is its diff_id: readArchive checks it (image.verify).
              // A gzip one's diff_id is checked as it is applied.
              expectDiffId: layer.compression === "none" ? undefined : layer.diffId,
              signal,
            },
          );
          addStats(stats, layerStats);
        } catch (err) {
          throw withContext(err, `layer ${i + 1}`);
        }
      }
    } catch (err) {
      await verified; // its error first
      throw err;
    }
    await verified;
    report({ layer: layers, layers, message: `imported ${layers} layers, ${stats.entries} entries` });
    return {
      config: image.config,
      format: image.format,
      layers,
      stats,
      reference: image.reference,
      platform: image.platform,
    };
  } finally {
    await worker.release();
  }
}
