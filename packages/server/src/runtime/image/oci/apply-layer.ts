import { lstat } from "node:fs/promises";
import { MessageChannel, type MessagePort, Worker } from "node:worker_threads";
import type { GrowingFile } from "./growing-file.js";
import { type ApplyStats, MAX_SKIPPED_LISTED } from "./layer-applier.js";
import { destroyInput } from "./tar-input.js";
import {
  type AckMessage,
  type ApplyReply,
  type ApplyRequest,
  type ChunkMessage,
  deserializeError,
  type LayerSource,
} from "./worker-messages.js";

export { type ApplyStats, emptyStats, MAX_SKIPPED_LISTED } from "./layer-applier.js";

export interface ApplyLayerOptions {
  /** Host id of the image's id 0: an entry of uid/gid N is stored as uidShift + N. */
  uidShift: number;
  /** Ids an image may use: 0..uidRange-1; an entry owned by another is an error. */
  uidRange: number;
  /** The layer's diff_id (`sha256:<hex>` of its tar data, from the image config), checked at the end. */
  expectDiffId?: string;
  /** Whether the layer's diff_id is computed and given in the stats' `diffId`. */
  hash?: boolean;
  signal?: AbortSignal;
}

/** Adds `b` into `a`. */
export function addStats(a: ApplyStats, b: ApplyStats): void {
  a.entries += b.entries;
  a.whiteouts += b.whiteouts;
  a.bytes += b.bytes;
  a.skippedTotal += b.skippedTotal;
  for (const s of b.skipped) if (a.skipped.length < MAX_SKIPPED_LISTED) a.skipped.push(s);
}

/**
 * Applies one layer (a tar stream; plain or gzip) onto `root`, as overlayfs would show it over what
 * is there: entries replace what is at their path (an existing directory is kept and takes the new
 * mode/owner), `dir/.wh.NAME` removes `dir/NAME`, `dir/.wh..wh..opq` removes what lower layers put
 * in `dir` (what this layer puts there stays, before or after the marker). Owners are shifted by
 * `uidShift`; modes (setuid, setgid, sticky too), mtimes, symlinks, hard links and FIFOs are kept;
 * file capabilities are written as namespaced (v3) ones when the host has python3. Device nodes and
 * other xattrs are skipped and listed.
 *
 * Every path is resolved inside `root` as if it were `/` (symlinks of the image are followed within
 * it, never out of it; an entry's own name is never followed): nothing outside `root` is created,
 * changed or removed, whatever the archive holds. A name with "..", an id outside the range, a
 * hard link to something not in the image, corrupt data: {@link ImageArchiveError}. Nothing else may
 * write into `root` meanwhile.
 *
 * The work is done in a worker thread (layer-applier.ts), with synchronous filesystem calls; this
 * thread only passes the layer's data on.
 */
export async function applyLayer(
  root: string,
  layer: NodeJS.ReadableStream | AsyncIterable<Buffer>,
  opts: ApplyLayerOptions,
): Promise<ApplyStats> {
  const worker = LayerWorker.take();
  try {
    return await worker.apply(root, { stream: layer }, opts);
  } finally {
    await worker.release();
  }
}

/** What a layer is read from: a stream (passed on to the worker), or a file (read by the worker). */
export type LayerInput =
  | { stream: NodeJS.ReadableStream | AsyncIterable<Buffer> }
  /**
   * `size` bytes at `offset` of `file` (default: all of it); of a file still being written
   * (`growing`), read as it is written.
   */
  | { file: string; offset?: number; size?: number; growing?: GrowingFile };

/** Idle worker threads are kept this long for the next layers, then end. */
const IDLE_MS = 60_000;
/** Idle worker threads kept at most. */
const MAX_IDLE = 2;
const idle: LayerWorker[] = [];

/** Bytes of a stream sent to the worker and not taken yet, at most. */
const MAX_IN_FLIGHT = 8 * 1024 * 1024;

/** Sends the chunks of `input` over `port`, as the worker takes them. */
class ChunkPump {
  /** The error of reading the input, if it failed. */
  inputError: unknown;
  private inFlight = 0;
  private wake: (() => void) | undefined;
  private stopped = false;

  constructor(
    private readonly input: NodeJS.ReadableStream | AsyncIterable<Buffer | string>,
    private readonly port: MessagePort,
  ) {
    port.on("message", (m: AckMessage) => {
      this.inFlight -= m.bytes;
      this.wake?.();
    });
    port.on("close", () => this.stop());
    this.run().catch(() => {}); // never rejects
  }

  private async run(): Promise<void> {
    const send = (m: ChunkMessage, transfer?: ArrayBuffer[]) => {
      if (!this.stopped) this.port.postMessage(m, transfer);
    };
    try {
      for await (const c of this.input as AsyncIterable<Buffer | string>) {
        if (this.stopped) break;
        const chunk = typeof c === "string" ? Buffer.from(c) : c;
        if (chunk.length === 0) continue;
        const data = new Uint8Array(chunk.length); // a copy of its own, given away: the input may share its memory
        data.set(chunk);
        this.inFlight += data.length;
        send({ type: "chunk", data }, [data.buffer]);
        while (this.inFlight > MAX_IN_FLIGHT && !this.stopped) {
          await new Promise<void>((resolve) => {
            this.wake = resolve;
          });
          this.wake = undefined;
        }
        if (this.stopped) break;
      }
      send({ type: "end" });
    } catch (err) {
      if (this.stopped) return;
      this.inputError = err;
      send({ type: "input-error" });
    }
  }

  /** Stops sending and closes the input (if it was not read to its end). */
  stop(): void {
    if (this.stopped) return;
    this.stopped = true;
    this.wake?.();
    destroyInput(this.input);
  }
}

/**
 * A worker thread that applies layers, one at a time ({@link LayerWorker.apply}). Take one with
 * {@link LayerWorker.take} and give it back with {@link LayerWorker.release}: a thread takes about
 * 0.1 s to start, and its code runs faster once it is warm, so one that did well is kept idle a
 * while for the next layers (not keeping the process alive).
 */
export class LayerWorker {
  private readonly worker: Worker;
  private pending: { resolve: (r: ApplyReply) => void; reject: (err: unknown) => void } | undefined;
  private dead: unknown;
  /** Whether every layer it applied went well: only such a thread is used again. */
  private clean = true;
  private idleTimer: NodeJS.Timeout | undefined;

  /** An idle worker thread, or a new one. */
  static take(): LayerWorker {
    for (let w = idle.pop(); w !== undefined; w = idle.pop()) {
      if (w.dead !== undefined) continue;
      clearTimeout(w.idleTimer);
      w.worker.ref();
      return w;
    }
    return new LayerWorker();
  }

  /** Gives the thread back: kept idle a while if all it did went well, else ended. */
  async release(): Promise<void> {
    if (this.dead !== undefined || !this.clean || this.pending !== undefined || idle.length >= MAX_IDLE) {
      await this.close();
      return;
    }
    this.worker.unref();
    this.idleTimer = setTimeout(() => {
      const i = idle.indexOf(this);
      if (i >= 0) idle.splice(i, 1);
      this.close().catch(() => {});
    }, IDLE_MS);
    this.idleTimer.unref();
    idle.push(this);
  }

  constructor() {
    this.worker = new Worker(new URL("./layer-worker.js", import.meta.url));
    this.worker.on("message", (reply: ApplyReply) => {
      const p = this.pending;
      this.pending = undefined;
      p?.resolve(reply);
    });
    this.worker.on("error", (err) => this.die(err));
    this.worker.on("exit", (code) => this.die(new Error(`the layer worker thread ended (exit code ${code})`)));
  }

  private die(err: unknown): void {
    this.dead ??= err;
    const p = this.pending;
    this.pending = undefined;
    p?.reject(this.dead);
  }

  /** Applies the layer `input` onto `root` (see {@link applyLayer}). */
  async apply(root: string, input: LayerInput, opts: ApplyLayerOptions): Promise<ApplyStats> {
    const stream = "stream" in input ? input.stream : undefined;
    try {
      const rootStat = await lstat(root);
      if (!rootStat.isDirectory()) throw new Error(`${root} is not a directory`);
      if (this.dead !== undefined) throw this.dead;
      if (this.pending !== undefined) throw new Error("LayerWorker.apply: a layer is being applied");
      opts.signal?.throwIfAborted();
    } catch (err) {
      if (stream) destroyInput(stream);
      throw err;
    }

    const abort = new SharedArrayBuffer(4);
    let channel: MessageChannel | undefined;
    let pump: ChunkPump | undefined;
    let source: LayerSource;
    if (stream !== undefined) {
      channel = new MessageChannel();
      source = { kind: "port", port: channel.port2 };
    } else {
      const { file, offset, size, growing } = input as Extract<LayerInput, { file: string }>;
      source = { kind: "file", path: file, offset, size, ...(growing && { growing: growing.memory }) };
    }
    const onAbort = () => {
      Atomics.store(new Int32Array(abort), 0, 1);
      channel?.port1.postMessage({ type: "abort" } satisfies ChunkMessage);
    };
    const reply = new Promise<ApplyReply>((resolve, reject) => {
      this.pending = { resolve, reject };
    });
    try {
      const req: ApplyRequest = {
        root,
        source,
        uidShift: opts.uidShift,
        uidRange: opts.uidRange,
        ...(opts.expectDiffId !== undefined && { expectDiffId: opts.expectDiffId }),
        ...(opts.hash && { hash: true }),
        abort,
      };
      this.worker.postMessage(req, channel ? [channel.port2] : []);
      if (stream !== undefined && channel !== undefined) pump = new ChunkPump(stream, channel.port1);
      opts.signal?.addEventListener("abort", onAbort, { once: true });
      const r = await reply;
      if (r.type === "done") return r.stats;
      this.clean = false;
      const { error } = r;
      if (error.kind === "aborted") {
        opts.signal?.throwIfAborted();
        throw new Error("the layer worker stopped without being asked to");
      }
      if (error.kind === "input") throw pump?.inputError ?? new Error("the layer's file was not written whole");
      throw deserializeError(error);
    } catch (err) {
      this.clean = false;
      throw err;
    } finally {
      opts.signal?.removeEventListener("abort", onAbort);
      pump?.stop();
      channel?.port1.close();
      if (this.pending !== undefined) this.pending = undefined;
    }
  }

  /** Ends the thread. */
  async close(): Promise<void> {
    await this.worker.terminate();
  }
}
