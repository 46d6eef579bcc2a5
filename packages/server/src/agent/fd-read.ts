import { close as closeFd, read as readFd } from "node:fs";
import type { ServerResponse } from "node:http";
import { Socket } from "node:net";
import { fileURLToPath } from "node:url";
import { metrics } from "../metrics/server-metrics.js";
import { loadAddon } from "../util/native-addon.js";

// Issue #16 part 1: a large read sent with sendfile(2). The agent hands over the descriptor of the file
// it opened and checked (packages/agent/src/fs/raw-read.ts has the exchange), this server checks it
// (native/fd-read.c: a regular file on the unit's own filesystem, open for reading, nothing else) and
// sends it to the client's socket from the page cache: no byte is copied through the agent's or this
// process's memory. The waits (the descriptor's arrival, the client's socket) are on threads of the
// addon's own, never on node's thread or its pool; at most SLOTS reads hold one at a time, and
// UNIT_SLOTS per unit (a descriptor refused is closed on its thread, and a close can wait on a FUSE
// server in the unit: a unit can keep at most its own slots). Without the addon, or with no slot free,
// a read goes as bytes, as before.

interface Addon {
  receive(
    sock: number,
    dev: number,
    timeoutMs: number,
    cb: (err: string | null, fd: number, size: number) => void,
  ): void;
  send(
    fd: number,
    sock: number,
    count: number,
    idleMs: number,
    cb: (err: string | null, sent: number) => void,
  ): unknown;
  cancel(handle: unknown): void;
}

const ADDON = fileURLToPath(new URL("../native/ums-fd-read.node", import.meta.url));
const SLOTS = 16;
const UNIT_SLOTS = 4;
/** How long the agent has to send the descriptor once asked ("go"). */
const RECEIVE_MS = 10_000;
/** A client that takes nothing of a read for this long is cut off (its thread is freed). */
const IDLE_MS = 120_000;
/** How long a response's head may take to reach its socket's kernel buffer. */
const HEAD_WAIT_MS = 10_000;

let addon: Addon | null | undefined;
function fdAddon(): Addon | null {
  if (addon === undefined) addon = loadAddon<Addon>(ADDON); // tried once
  return addon;
}

let inUse = 0;
const perUnit = new Map<string, number>();

/** A slot for a read as a descriptor, held from the offer to the end of its send; released once. */
export interface FdSlot {
  release(): void;
}

/**
 * A slot for a read of the unit whose agent is at `unitKey` (its socket path) as a descriptor; null
 * when there is no addon or no slot free (the read is then offered as bytes only).
 */
export function takeFdSlot(unitKey: string): FdSlot | null {
  if (!fdAddon()) return null;
  const mine = perUnit.get(unitKey) ?? 0;
  if (inUse >= SLOTS || mine >= UNIT_SLOTS) return null;
  inUse++;
  perUnit.set(unitKey, mine + 1);
  let held = true;
  return {
    release: () => {
      if (!held) return;
      held = false;
      inUse--;
      const left = (perUnit.get(unitKey) ?? 1) - 1;
      if (left > 0) perUnit.set(unitKey, left);
      else perUnit.delete(unitKey);
    },
  };
}

/** Slots in use now (tests). */
export const fdSlotsInUse = (): number => inUse;

/** The descriptor of a connected socket's handle (node's internal `_handle.fd`), or -1. */
export function socketFd(socket: unknown): number {
  const fd = (socket as { _handle?: { fd?: unknown } } | null)?._handle?.fd;
  return typeof fd === "number" ? fd : -1;
}

/**
 * After the agent's `101 … Upgrade: ums-fs-fd` on `socket` (which must not be read any more: paused
 * here at once), says "go" and takes the descriptor the agent sends, checked to be a regular file on
 * device `dev` (the unit's rootfs) open for reading. Resolves with it and its size, or rejects with
 * why not. The slot stays held while a refused descriptor's close may still be under way.
 */
export function receiveFd(
  socket: Socket,
  dev: number,
  slot: FdSlot,
  timeoutMs: number = RECEIVE_MS,
): Promise<{ fd: number; size: number }> {
  const native = fdAddon() as Addon;
  // Node must read no more of it, at the handle: its stream's pause alone does not stop the reads, and
  // a read-ahead the stream scheduled after the 101's chunk (maybeReadMore: `read(0)`, which starts a
  // socket with its own buffers reading again) would. So `read` does nothing from here on (the socket
  // is destroyed once the descriptor came).
  socket.read = () => null;
  socket.pause();
  const handle = (socket as unknown as { _handle?: { reading?: boolean; readStop?: () => number } })._handle;
  handle?.readStop?.();
  if (handle) handle.reading = false;
  const sock = socketFd(socket);
  return new Promise((resolve, reject) => {
    if (sock < 0) {
      slot.release();
      return reject(new Error("the agent's connection has no descriptor"));
    }
    let late = false;
    // The addon's own timeout bounds the wait; this one bounds a thread stuck past it (a close).
    const timer = setTimeout(() => {
      late = true;
      reject(new Error("the agent's descriptor did not come in time"));
    }, timeoutMs + 2000);
    native.receive(sock, dev, timeoutMs, (err, fd, size) => {
      clearTimeout(timer);
      socket.destroy();
      if (err !== null || late) {
        if (fd >= 0) closeFd(fd, () => {});
        slot.release();
        metrics.fsDescriptor("refused");
        if (!late) reject(new Error(err ?? "late"));
        return;
      }
      metrics.fsDescriptor("sent");
      resolve({ fd, size });
    });
  });
}

/**
 * Sends `size` bytes of the file `fd` (from its start) as the body of `res`, whose head is set: with
 * sendfile(2) on its plain socket, else (a TLS socket, a response not yet on its socket) read here
 * and written. Takes `fd` (closed at the end) and the slot (released at the end). True when all of
 * `size` went out (then `res` is ended, its connection usable for the next request); false when it
 * was cut short (both destroyed).
 */
export async function sendFd(
  fd: number,
  size: number,
  res: ServerResponse,
  slot: FdSlot,
  onBytes: (n: number) => void,
): Promise<boolean> {
  try {
    if (res.req?.method === "HEAD") {
      // No body: nothing to read (node drops a HEAD's writes; sendfile would not).
      closeFd(fd, () => {});
      res.end();
      return true;
    }
    const sock = res.socket;
    const sockFd = socketFd(sock);
    if (!(sock instanceof Socket) || "encrypted" in sock || sockFd < 0 || res.destroyed) {
      return await copyFd(fd, size, res, onBytes);
    }
    res.flushHeaders();
    // The head must be in the kernel before the file's first byte (it almost always is at once: a
    // socket's 'drain' comes only after a write that filled its buffer, so this looks every 1 ms).
    for (let waited = 0; res.writableLength > 0 && !res.destroyed && waited < HEAD_WAIT_MS; waited++) {
      await new Promise((r) => setTimeout(r, 1));
    }
    if (res.destroyed || res.writableLength > 0) {
      closeFd(fd, () => {});
      res.destroy();
      return false;
    }
    const native = fdAddon() as Addon;
    const { err, sent } = await new Promise<{ err: string | null; sent: number }>((resolve) => {
      let handle: unknown;
      const cancel = () => native.cancel(handle);
      try {
        handle = native.send(fd, sockFd, size, IDLE_MS, (err, sent) => {
          res.off("close", cancel);
          resolve({ err, sent });
        });
      } catch (err) {
        closeFd(fd, () => {}); // no thread took it
        return resolve({ err: (err as Error).message, sent: 0 });
      }
      res.once("close", cancel);
    });
    onBytes(sent);
    if (err !== null) {
      res.destroy();
      return false;
    }
    res.end();
    return true;
  } finally {
    slot.release();
  }
}

/** The same, read here (on node's pool: a regular file of the unit's) and written with backpressure. */
async function copyFd(fd: number, size: number, res: ServerResponse, onBytes: (n: number) => void): Promise<boolean> {
  const buffer = Buffer.allocUnsafe(1024 * 1024);
  let at = 0;
  try {
    while (at < size && !res.destroyed) {
      const n = await new Promise<number>((resolve, reject) =>
        readFd(fd, buffer, 0, Math.min(buffer.length, size - at), at, (err, n) => (err ? reject(err) : resolve(n))),
      );
      if (n === 0) break;
      at += n;
      onBytes(n);
      // Copied: the buffer is read into again while this is still queued.
      if (!res.write(Buffer.from(buffer.subarray(0, n)))) {
        await new Promise<void>((r) => {
          const done = () => {
            res.off("drain", done);
            res.off("close", done);
            r();
          };
          res.once("drain", done);
          res.once("close", done);
        });
      }
    }
  } catch {
    at = -1;
  } finally {
    closeFd(fd, () => {});
  }
  if (at !== size || res.destroyed) {
    res.destroy();
    return false;
  }
  res.end();
  return true;
}
