import { InputFailed } from "./worker-messages.js";

/*
 * A file read while it is still being written: an upload that a worker thread reads behind the
 * thread that writes it (issue #18: layers applied while the archive arrives). The writer says in
 * shared memory how many bytes are written, and whether the file is complete or failed; the reader
 * waits (Atomics.wait: a worker thread may block) for the bytes it needs.
 */

/** Int32 slots: the state, and a counter bumped (and notified) at every change. */
const STATE = 0;
const SEQ = 1;
/** BigInt64 slot (bytes 8 to 16): bytes written so far. */
const WRITTEN = 1;

const GROWING = 0;
const COMPLETE = 1;
const FAILED = 2;

/** How long a reader waits at most before it checks its abort flag again. */
const WAIT_MS = 20;

/** The writer's side: says how far the file is written. Its `memory` goes to the reader. */
export class GrowingFile {
  readonly memory = new SharedArrayBuffer(16);
  private readonly ints = new Int32Array(this.memory, 0, 2);
  private readonly written = new BigInt64Array(this.memory);

  /** `bytes` bytes of the file are written (from its start). */
  grew(bytes: number): void {
    Atomics.store(this.written, WRITTEN, BigInt(bytes));
    this.bump();
  }

  /** The file is written whole: readers read it to its end. */
  complete(): void {
    this.setState(COMPLETE);
  }

  /** The file will not be written whole: readers waiting for more fail (InputFailed). */
  fail(): void {
    this.setState(FAILED);
  }

  private setState(state: number): void {
    if (Atomics.load(this.ints, STATE) !== GROWING) return;
    Atomics.store(this.ints, STATE, state);
    this.bump();
  }

  private bump(): void {
    Atomics.add(this.ints, SEQ, 1);
    Atomics.notify(this.ints, SEQ);
  }
}

/**
 * The reader's side (in a worker thread): returns once the first `until` bytes of the file whose
 * {@link GrowingFile.memory} is `memory` are written, or the file is complete (it may be shorter).
 * Throws InputFailed when the writer failed, and what `checkAbort` throws.
 */
export function waitForBytes(memory: SharedArrayBuffer, until: number, checkAbort: () => void): void {
  const ints = new Int32Array(memory, 0, 2);
  const written = new BigInt64Array(memory);
  for (;;) {
    const seq = Atomics.load(ints, SEQ);
    const state = Atomics.load(ints, STATE);
    if (state === FAILED) throw new InputFailed("the upload ended before its end");
    if (state === COMPLETE || Number(Atomics.load(written, WRITTEN)) >= until) return;
    checkAbort();
    Atomics.wait(ints, SEQ, seq, WAIT_MS);
  }
}
