import { readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { type ApplyStats, LayerWorker } from "./apply-layer.js";
import type { LayerAt } from "./archive.js";
import type { GrowingFile } from "./growing-file.js";
import { prepareRoot } from "./import-archive.js";
import { isTarHeader, TarEvent, TarParser } from "./tar-parser.js";

/*
 * Issue #18: layers applied while the archive is still arriving. Which files of an archive are its
 * layers, and in what order they go, is told by its manifest, which `docker save` writes after the
 * layers (manifest.json sorts after the layers' directories and blobs/). Waiting for it means
 * applying every layer only once the whole upload is written. Instead the upload is read as it
 * comes: every file in it that is a tar or gzip stream (a layer, most likely) is applied onto the
 * image's root in the order they arrive, by a worker thread that reads the file behind its writer
 * (growing-file.ts). Once the manifest is read, the guess is checked: if the layers applied are the
 * first ones of the image, in its order, they stay and the import goes on from there; otherwise
 * (another order, a file that was no layer, a failure) they are undone and the import applies every
 * layer from the start, as it would have without the guess. An image of one layer, or whose layers
 * came in order, is applied while it arrives; any other costs no more than before, but the CPU time
 * of the wrong guess. The upload never waits for the guess.
 */

/** The first bytes of a file that tell whether it is a layer. */
const HEAD = 512;

interface Guess {
  offset: number;
  size: number;
  /**
   * A plain tar (not gzip): its digest is its diff_id, which readArchive's `verify` checks (as for
   * any plain layer); a gzip one's diff_id is computed as it is applied.
   */
  plain: boolean;
  /** Its stats, or undefined when applying it failed or was stopped. Never rejects. */
  result: Promise<ApplyStats | undefined>;
}

export interface LayerSpeculationOptions {
  uidShift: number;
  uidRange: number;
  /**
   * Makes the root empty again, prepared (prepareRoot), after a wrong guess; default: what is in it
   * removed. (A subvolume is faster deleted and made again than emptied file by file.)
   */
  reset?: () => Promise<void>;
}

/** What {@link LayerSpeculation.settle} kept: the image's first `applied` layers are on the root. */
export interface Settled {
  applied: number;
  /** Of each layer kept. */
  stats: ApplyStats[];
}

/**
 * Applies the layers of an archive being uploaded to `file` onto `root` (prepared: its owner and
 * mode set; empty) as they arrive: {@link chunk} is given every chunk of the upload in order,
 * `growing` tells how far `file` is written. Then {@link settle} with the image's layers, or
 * {@link stop}. Nothing it does throws: a guess that fails is only not kept.
 */
export class LayerSpeculation {
  private readonly parser = new TarParser();
  /** False once the upload is not read any more (not a plain tar, or settled). */
  private parsing = true;
  /** The file entry whose first bytes are being gathered. */
  private candidate: { offset: number; size: number; head: Buffer[]; got: number } | undefined;
  /** Layers found, not started yet. */
  private readonly queue: { offset: number; size: number; plain: boolean }[] = [];
  private readonly started: Guess[] = [];
  private busy = false;
  private stopped = false;
  private readonly abort = new AbortController();
  private worker: LayerWorker | undefined;

  constructor(
    private readonly root: string,
    private readonly file: string,
    private readonly growing: GrowingFile,
    private readonly opts: LayerSpeculationOptions,
  ) {}

  /** The upload's next chunk (used only during the call). */
  chunk(buf: Buffer): void {
    if (!this.parsing) return;
    const p = this.parser;
    try {
      p.push(buf);
      for (let ev = p.next(); ev !== TarEvent.Need; ev = p.next()) {
        if (ev === TarEvent.Entry) this.entry();
        else if (ev === TarEvent.Data) this.data(p.dataBuffer, p.dataStart, p.dataEnd);
        else this.sniffed();
      }
    } catch {
      // Not a plain tar (a gzip one is read by readArchive only), or broken: readArchive says what
      // is wrong with it. Nothing more is guessed.
      this.parsing = false;
    }
  }

  private entry(): void {
    const h = this.parser.header;
    this.candidate = undefined;
    if ((h.type === "file" || h.type === "contiguous-file") && h.size >= HEAD && h.byteOffset !== undefined) {
      this.candidate = { offset: h.byteOffset, size: h.size, head: [], got: 0 };
    }
  }

  private data(buf: Buffer, start: number, end: number): void {
    const c = this.candidate;
    if (c === undefined) return;
    const take = Math.min(end - start, HEAD - c.got);
    c.head.push(Buffer.from(buf.subarray(start, start + take))); // a copy: the chunk is not ours
    c.got += take;
    if (c.got >= HEAD) this.sniffed();
  }

  /** The candidate's first bytes are in: a tar or a gzip stream is taken for a layer. */
  private sniffed(): void {
    const c = this.candidate;
    this.candidate = undefined;
    if (c === undefined || c.got < HEAD) return;
    const head = Buffer.concat(c.head);
    const gzip = head[0] === 0x1f && head[1] === 0x8b;
    if (gzip || isTarHeader(head)) {
      this.queue.push({ offset: c.offset, size: c.size, plain: !gzip });
      this.next();
    }
  }

  /** Starts the next layer found, if none is being applied. */
  private next(): void {
    if (this.busy || this.stopped) return;
    const g = this.queue.shift();
    if (g === undefined) return;
    this.busy = true;
    let result: Promise<ApplyStats | undefined>;
    try {
      this.worker ??= LayerWorker.take();
      result = this.worker
        .apply(
          this.root,
          { file: this.file, offset: g.offset, size: g.size, growing: this.growing },
          { uidShift: this.opts.uidShift, uidRange: this.opts.uidRange, hash: !g.plain, signal: this.abort.signal },
        )
        .catch(() => undefined);
    } catch {
      result = Promise.resolve(undefined);
    }
    this.started.push({ ...g, result });
    result
      .then((stats) => {
        this.busy = false;
        if (stats === undefined) this.stopped = true; // what follows a failed layer is on a wrong root
        this.next();
      })
      .catch(() => {
        this.stopped = true; // next() threw: guess no more (settle undoes what was guessed)
      });
  }

  /**
   * The image's `layers` are known (read in place from `file`): keeps what was applied if it is
   * their beginning, in order, with the digests the image config gives; else undoes it (the root
   * made empty and prepared again: `reset`).
   */
  async settle(layers: readonly LayerAt[]): Promise<Settled> {
    this.parsing = false;
    this.stopped = true; // no layer starts now
    this.queue.length = 0;
    const guessed = this.started;
    const inOrder =
      guessed.length <= layers.length &&
      guessed.every((g, i) => {
        const l = layers[i] as LayerAt;
        return l.path === this.file && l.offset === g.offset && l.size === g.size;
      });
    if (inOrder) {
      const results = await Promise.all(guessed.map((g) => g.result));
      const stats: ApplyStats[] = [];
      for (const [i, r] of results.entries()) {
        if (r === undefined) break; // failed: applied again, it says why
        // A gzip layer's diff_id from the image config, as the import would have checked it.
        const want = layers[i]?.diffId;
        if (!guessed[i]?.plain && want !== undefined && r.diffId !== want) break;
        stats.push(r);
      }
      if (stats.length === guessed.length) {
        await this.release();
        return { applied: stats.length, stats };
      }
    }
    await this.stop();
    if (guessed.length > 0) await (this.opts.reset ?? (() => this.empty()))();
    return { applied: 0, stats: [] };
  }

  private async empty(): Promise<void> {
    for (const name of await readdir(this.root)) await rm(join(this.root, name), { recursive: true, force: true });
    await prepareRoot(this.root, this.opts.uidShift);
  }

  /** Stops applying (once it stopped, nothing writes to the root). */
  async stop(): Promise<void> {
    this.parsing = false;
    this.stopped = true;
    this.queue.length = 0;
    this.abort.abort();
    await Promise.all(this.started.map((g) => g.result));
    await this.release();
  }

  private async release(): Promise<void> {
    const w = this.worker;
    this.worker = undefined;
    await w?.release();
  }
}
