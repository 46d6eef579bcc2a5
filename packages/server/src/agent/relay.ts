import type { ServerResponse } from "node:http";
import { connect, type Socket } from "node:net";
import type { Duplex, Writable } from "node:stream";
import { privateSocketPair } from "../util/private-socket-pair.js";

// A connection to the agent whose reads all land in buffers of its own (node's `onread`), for the
// bytes of a raw read (packages/agent/src/fs/raw-read.ts). Streamed the ordinary way, every 64 KiB read
// was a new buffer: at 1 GiB the garbage collector of this (large) process cost more than the copying.
// Until `relayTo` the socket behaves as any other (each read is copied out and pushed), so that the
// HTTP client reads the upgrade answers from it; after the raw read's 101, the bytes go from those
// buffers to the client's response, one read at a time, each read into the next of RING buffers in
// turn: the socket is read while the last read's bytes are still being written to the client (the
// client's socket rarely takes a read whole at once), and paused only when the buffer next in turn
// is still being written.

/** A Unix socket read returns at most what its sender's buffer holds (~208 KiB by default). */
const BUFFER_BYTES = 256 * 1024;
/** Buffers a raw read takes turns with: one being written to the client while the next is read. */
const RING = 2;
/** Buffers of relays that ended cleanly, for the next ones (small reads must not cost 256 KiB each). */
const spare: Buffer[] = [];
const SPARE_MAX = 8;
/** Each RelaySocket by its socket, for code that is handed the socket alone (relayOf). */
const relays = new WeakMap<Socket, RelaySocket>();

/**
 * The RelaySocket `socket` belongs to, if it is one's: a connection passed through code that knows
 * it only as a socket (an API process's connection to a node, node/remote/, through the agent
 * client's HTTP upgrades) can still have a raw read's bytes go from its own buffers (`relayTo`).
 */
export function relayOf(socket: Duplex): RelaySocket | undefined {
  return relays.get(socket as Socket);
}

export class RelaySocket {
  readonly socket: Socket;
  private raw = false;
  private pending: Buffer[] = [];
  /** Takes a chunk read into the buffer in turn; true to read on (the next buffer is free), false to pause. */
  private sink: ((chunk: Buffer) => boolean) | null = null;
  /** Issue #15: the first line, while it is being taken out of the bytes (`firstLine`). */
  private line: LineTaker | null = null;

  /** The ring; the second buffer is taken only by a raw read (an upgrade answer or an error needs one). */
  private readonly buffers: Buffer[];
  /** The buffer the next read lands in. */
  private turn = 0;

  /** `to`: a Unix socket's path (a unit's agent), or a TCP address (issue #15: another node's endpoint). */
  constructor(to: string | { host: string; port: number }) {
    this.buffers = [spare.pop() ?? Buffer.allocUnsafe(BUFFER_BYTES)];
    this.socket = connect({
      ...(typeof to === "string" ? { path: to } : { host: to.host, port: to.port }),
      // `buffer` as a function: node asks it for the buffer of each next read, after `callback`.
      onread: {
        buffer: () => this.buffers[this.turn] as Buffer,
        callback: (n, buf) => this.onRead((buf as Buffer).subarray(0, n)),
      },
    });
    // Its users come and go (the HTTP client until the 101, then `relayTo`): between them an error
    // must find a listener (issue #19 finding 6). Each user sees the error or the close on its own.
    this.socket.on("error", () => {});
    relays.set(this.socket, this);
    // Never raw (an exec, a JSON call): every read was copied out, nothing refers to the buffers.
    this.socket.once("close", () => (this.raw ? undefined : this.recycle()));
  }

  private onRead(read: Buffer): boolean {
    const chunk = this.line ? this.takeLine(read) : read;
    if (chunk.length === 0) return true;
    if (!this.raw) return this.socket.push(Buffer.from(chunk));
    if (this.sink) return this.sink(chunk);
    this.pending.push(Buffer.from(chunk));
    return false; // paused until `relayTo` (the copies are written first)
  }

  /**
   * Issue #15: the connection's first line (`\n`-terminated, at most `max` bytes, a wake's answer
   * from a node: node/remote/remote-node.ts `wakePipelined`), taken out of its bytes below the
   * stream: whoever reads the socket (the agent client, which may already have written its request
   * behind the wake) sees only what follows it. Rejects when the connection closes first or the
   * line is longer than `max` (then the socket is destroyed).
   */
  firstLine(max: number): Promise<string> {
    return new Promise((resolve, reject) => {
      const taker: LineTaker = { parts: [], size: 0, max, resolve, reject };
      this.line = taker;
      this.socket.once("close", () => {
        if (this.line !== taker) return;
        this.line = null;
        reject(new Error("the connection closed before its first line"));
      });
    });
  }

  /** What of `read` follows the first line (empty while the line goes on). */
  private takeLine(read: Buffer): Buffer {
    const taker = this.line as LineTaker;
    const nl = read.indexOf(10);
    const part = nl >= 0 ? read.subarray(0, nl) : read;
    taker.size += part.length;
    if (taker.size > taker.max) {
      this.line = null;
      this.socket.destroy();
      taker.reject(new Error(`the first line is longer than ${taker.max} bytes`));
      return Buffer.alloc(0);
    }
    // Copied: the read's buffer is read into again.
    taker.parts.push(Buffer.from(part));
    if (nl < 0) return Buffer.alloc(0);
    this.line = null;
    taker.resolve(Buffer.concat(taker.parts).toString("utf8"));
    return read.subarray(nl + 1);
  }

  /** From now on reads are raw bytes for `relayTo` (call it where the raw answer begins: the 101). */
  beginRaw(): void {
    this.raw = true;
  }

  /**
   * From now on each read lands in the next of the RING buffers in turn and goes to `write`; the
   * socket is paused when the buffer next in turn is still being written, and resumed once it is.
   * `waiting()`: whether it is paused so.
   */
  private ring(write: (chunk: Buffer, then: () => void) => void): { waiting(): boolean } {
    const busy: boolean[] = [];
    let waiting = -1;
    this.sink = (chunk) => {
      const i = this.turn;
      busy[i] = true;
      this.turn = (i + 1) % RING;
      if (this.turn >= this.buffers.length) this.buffers.push(spare.pop() ?? Buffer.allocUnsafe(BUFFER_BYTES));
      write(chunk, () => {
        busy[i] = false;
        if (waiting === i) {
          waiting = -1;
          this.socket.resume();
        }
      });
      if (!busy[this.turn]) return true;
      waiting = this.turn;
      return false;
    };
    return { waiting: () => waiting !== -1 };
  }

  /**
   * Issue #15: the raw bytes (after `beginRaw`) to `out` (a child's stdin: a checkpoint's send
   * stream from another node into `btrfs receive`), `head` first, each chunk shown to `look` before
   * it is written (it throws to stop the transfer). Resolves once the peer ended the connection and
   * `out` has taken everything and ended; rejects when the connection breaks (a reset: the sender
   * failed), `look` throws or `out` fails, with the socket destroyed. A reset can also reach this end
   * as a plain end (the kernel reports a connection's error once): whether the bytes are whole is for
   * `look` to know from the bytes themselves (a send stream's end command: StreamChecker). With
   * `end: false`, `out` is left open (its owner ends it, or resets it).
   */
  pumpTo(out: Writable, head: Buffer, look: (chunk: Buffer) => void, opts: { end?: boolean } = {}): Promise<void> {
    const { socket } = this;
    return new Promise<void>((resolve, reject) => {
      let failed = false;
      let ended = false;
      let inFlight = 0;
      const fail = (err: unknown) => {
        if (failed) return;
        failed = true;
        socket.destroy();
        reject(err);
      };
      const finish = () => {
        if (failed || !ended || inFlight > 0) return;
        const done = () => {
          this.recycle();
          resolve();
        };
        if (opts.end === false) done();
        else out.end(() => (failed ? undefined : done()));
      };
      const write = (chunk: Buffer, then: () => void): void => {
        if (failed) return;
        try {
          look(chunk);
        } catch (err) {
          fail(err);
          return;
        }
        inFlight++;
        out.write(chunk, (err) => {
          inFlight--;
          if (err) return fail(err);
          then();
          finish();
        });
      };
      out.once("error", fail);
      socket.once("error", fail);
      socket.once("end", () => {
        ended = true;
        finish();
      });
      // A close without its end (a reset, a destroy) is a transfer cut short.
      socket.once("close", () => (ended ? undefined : fail(new Error("the connection closed before its end"))));
      this.ring(write);
      // Copies (the head, what came before the sink): written at once, in order.
      for (const chunk of [head, ...this.pending.splice(0)]) if (chunk.length > 0) write(chunk, () => {});
      const before = endedAlready(socket);
      if (before === "end") {
        ended = true;
        finish();
      } else if (before) fail(before);
      socket.resume();
    });
  }

  /**
   * The buffers go to the next relays once this socket has closed. Only after a clean end: no
   * write from them can still be pending then.
   */
  private recycle(): void {
    const give = () => {
      for (const b of this.buffers.splice(0)) if (spare.length < SPARE_MAX) spare.push(b);
    };
    if (this.socket.closed) give();
    else this.socket.once("close", give);
  }

  /**
   * Writes `head` (bytes read past the 101) and then everything the agent sends until it ends the
   * connection to `res`, which must have its head written. Resolves once done: with true when all of
   * `size` bytes (if known) went through, false when either side cut the transfer short (then both are
   * destroyed: a client must not take a partial body for a whole one). Bytes past `size` (a file that
   * grew during the read) are left out. `onBytes` hears each chunk's length as it is handed to `res`
   * (before the client can have it: a count read after the answer already holds it).
   */
  relayTo(
    res: ServerResponse,
    head: Buffer,
    size: number | undefined,
    onBytes: (n: number) => void = () => {},
  ): Promise<boolean> {
    const { socket } = this;
    return relayBytes(socket, res, size, onBytes, {
      feed: (write) => {
        const ring = this.ring(write);
        const first = [head, ...this.pending.splice(0)];
        const next = (): void => {
          const chunk = first.shift();
          if (chunk) write(chunk, next);
          else if (!ring.waiting()) socket.resume(); // else resumed once the buffer in turn is written
        };
        next();
      },
      settled: (ok) => (ok ? this.recycle() : undefined),
    });
  }
}

interface LineTaker {
  readonly parts: Buffer[];
  size: number;
  readonly max: number;
  resolve(line: string): void;
  reject(err: Error): void;
}

/**
 * Issue #15: `RelaySocket.relayTo`'s contract for a connection made some other way (a node's splice
 * of a unit's agent, node/remote/): the same trimming to `size`, the same verdict, with the
 * socket's own reads (each chunk is written before the next is read).
 */
export function relayPlain(
  socket: Duplex,
  res: ServerResponse,
  head: Buffer,
  size: number | undefined,
  onBytes: (n: number) => void = () => {},
): Promise<boolean> {
  return relayBytes(socket, res, size, onBytes, {
    feed: (write) => {
      const go = (chunk: Buffer) => {
        socket.pause();
        write(chunk, () => socket.resume());
      };
      go(head);
      socket.on("data", go);
    },
  });
}

/**
 * How `socket` ended before a relay of it began (`pumpTo`, `relayTo` and `relayPlain` come after
 * awaits): "end" when its end was read (a raw read had not paused it, so its bytes are all in the
 * head and the copies: a send short enough to come whole with the 101), its error when it broke;
 * null while it is open. Its `end` and `close` went by with no one listening: a move back hung on
 * that for good in a CI run (`btrfs receive` had the whole stream and exited; the relay waited
 * for an end that had come).
 */
function endedAlready(socket: Duplex): "end" | Error | null {
  if (socket.readableEnded) return "end";
  if (socket.destroyed) return socket.errored ?? new Error("the connection closed before its end");
  return null;
}

/**
 * The relay both share: what `feed` hands to `write` goes to `res` (which has its head written),
 * `then` once written; trimmed to `size` bytes (a file that grew during the read: its first `size`
 * bytes, ended cleanly so that the client's connection stays usable for its next request;
 * destroying it there failed that next request: "other side closed"); true when all of `size` (if
 * known) went through, false when either side cut it short (then both are destroyed: a client
 * must not take a partial body for a whole one). `onBytes` hears each chunk's length as it is
 * handed to `res`.
 */
function relayBytes(
  socket: Duplex,
  res: ServerResponse,
  size: number | undefined,
  onBytes: (n: number) => void,
  how: {
    feed: (write: (chunk: Buffer, then: () => void) => void) => void;
    settled?: (ok: boolean) => void;
  },
): Promise<boolean> {
  let sent = 0;
  return new Promise((resolve) => {
    let settled = false;
    const settle = (ok: boolean) => {
      if (settled) return;
      settled = true;
      if (!ok) {
        socket.destroy();
        res.destroy();
      }
      how.settled?.(ok);
      resolve(ok);
    };
    // The client may have gone while the read was being set up: no 'close' would come any more.
    if (res.destroyed || res.writableEnded) {
      settle(false);
      return;
    }
    let trimmed = false;
    const write = (chunk: Buffer, then: () => void): void => {
      if (trimmed) return;
      if (chunk.length === 0) {
        then();
        return;
      }
      if (size !== undefined && sent + chunk.length > size) {
        trimmed = true;
        const part = chunk.subarray(0, size - sent);
        sent = size;
        onBytes(part.length);
        socket.destroy();
        res.end(part, () => settle(true));
        return;
      }
      sent += chunk.length;
      onBytes(chunk.length);
      res.write(chunk, (err) => (err ? settle(false) : then()));
    };
    res.once("close", () => settle(res.writableFinished));
    socket.on("error", () => trimmed || settle(false));
    socket.once("close", () => {
      if (!trimmed && !socket.readableEnded) settle(false);
    });
    const onEnd = () => {
      if (trimmed) return;
      if (size !== undefined && sent !== size) settle(false);
      else res.end(() => settle(true));
    };
    socket.once("end", onEnd);
    how.feed(write);
    // After the head's write (its bytes counted): an end that came first ends the answer now.
    const before = endedAlready(socket);
    if (before === "end") onEnd();
    else if (before) settle(false);
  });
}

/**
 * A connected pair of Unix sockets on this host: `relay`, read into its own buffers, and `peer`, to
 * hand to a child process as its stdout (issue #15: `btrfs send`'s stream, read without a buffer
 * per read). Not a socket the server uses itself: libuv makes a child's stdio descriptors blocking,
 * and that flag belongs to the open file, which only `peer` shares with the child (close it once
 * the child has it). See privateSocketPair for how it is made.
 */
export async function relayPair(): Promise<{ relay: RelaySocket; peer: Socket }> {
  let relay: RelaySocket | undefined;
  const { peer } = await privateSocketPair((path) => {
    relay = new RelaySocket(path);
    return relay.socket;
  });
  return { relay: relay as RelaySocket, peer };
}
