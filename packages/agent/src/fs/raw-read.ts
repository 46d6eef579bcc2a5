import type { FileHandle } from "node:fs/promises";
import type { IncomingMessage } from "node:http";
import { isAbsolute } from "node:path";
import type { Duplex } from "node:stream";
import { rejectUpgrade, validation } from "../http/respond.js";
import { fdSender, socketFd } from "../native/fd-send.js";
import { statusOf, toFsError } from "./errors.js";
import { openForRead } from "./ops.js";

// The host's file reads (issue 4: 1 GiB at the speed of the disk, with flat memory). On a connection
// handed to the process with the identity asked for (router.ts), the host sends
//   GET /fs/read?path=<absolute> with `Connection: Upgrade`, `Upgrade: ums-fs-bytes`
// and gets either an ordinary JSON error answer (the file cannot be opened: `{error, code, path}`), or
//   101 Switching Protocols, `X-Ums-Size: <bytes>` (regular files)
// followed by the file's bytes alone, then the end of the connection. No HTTP framing and no per-chunk
// buffers on either side: the file is read into two buffers that take turns, and the host relays the
// bytes from one buffer of its own (server src/agent/relay.ts). A failure mid-file cuts the connection
// short, which the host tells from the size.
//
// Issue #16: a host that can send a file itself asks with `fd=1` in the query. Then a regular file of
// FD_MIN bytes or more is answered
//   101 Switching Protocols, `Upgrade: ums-fs-fd`, `X-Ums-Size: <bytes>`
// and nothing more until the host writes one byte ("g": it has stopped reading the connection, so the
// descriptor's byte cannot be read and dropped by a read of its own); then the opened file's descriptor
// goes in one byte ("F") with SCM_RIGHTS (native/fd-send.c), and the connection ends. The host trusts
// nothing of that descriptor (packages/server/src/native/fd-read.c). Smaller files, other objects, or
// an agent without the addon answer with the bytes as above.

export const RAW_READ = "ums-fs-bytes";
export const FD_READ = "ums-fs-fd";
const CHUNK = 1024 * 1024;
/** Below this a descriptor's exchange (one more round trip, two threads on the host) gains nothing. */
export const FD_MIN = 1024 * 1024;
/** How long the host has to say "go" after the 101. */
const GO_WAIT_MS = 30_000;

/** Whether `req` asks for a raw read: GET /fs/read upgraded to ums-fs-bytes. */
export function isRawRead(req: IncomingMessage): boolean {
  const url = new URL(req.url ?? "/", "http://fs");
  return req.method === "GET" && url.pathname === "/fs/read" && req.headers.upgrade?.toLowerCase() === RAW_READ;
}

/** Handles an upgrade request on an fs connection: a raw read, or a refusal. */
export function fsUpgrade(req: IncomingMessage, socket: Duplex): void {
  socket.on("error", () => {});
  if (!isRawRead(req)) {
    rejectUpgrade(socket, 400, validation([`upgrade: only GET /fs/read upgrades, to ${RAW_READ}`]));
    return;
  }
  rawReadAt(req.url ?? "/", socket);
}

/**
 * The raw read `url` (GET /fs/read?path=…, its request already read) asks for, on `socket`: the
 * read of a connection handed over whole (the host's one-step read, router.ts `read`), or of an
 * upgrade on an fs connection.
 */
export function rawReadAt(url: string, socket: Duplex): void {
  socket.on("error", () => {});
  const path = new URL(url, "http://fs").searchParams.get("path") ?? "";
  if (!isAbsolute(path) || path.includes("\0")) {
    rejectUpgrade(socket, 400, validation(["path: must be an absolute path"]));
    return;
  }
  const offered = new URL(url, "http://fs").searchParams.get("fd") === "1";
  rawRead(path, socket, offered).catch(() => socket.destroy());
}

async function rawRead(path: string, socket: Duplex, fdOffered: boolean): Promise<void> {
  let fh: FileHandle;
  let size: number | undefined;
  try {
    ({ fh, size } = await openForRead(path));
  } catch (err) {
    const e = toFsError(err, path);
    return void rejectUpgrade(socket, statusOf(e.code), { error: e.message, code: e.code, path: e.path });
  }
  const send = fdOffered && size !== undefined && size >= FD_MIN ? fdSender() : null;
  if (send && socketFd(socket) >= 0) {
    try {
      await sendDescriptor(fh, size as number, socket, send);
    } finally {
      await fh.close().catch(() => {});
    }
    return;
  }
  try {
    socket.write(
      "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n" +
        `Upgrade: ${RAW_READ}\r\n${size !== undefined ? `X-Ums-Size: ${size}\r\n` : ""}\r\n`,
    );
    await sendFile(fh, socket, size);
    socket.end();
  } finally {
    await fh.close().catch(() => {});
  }
}

/** The read as its descriptor (top of this file): the 101, the host's "go", then the descriptor. */
async function sendDescriptor(
  fh: FileHandle,
  size: number,
  socket: Duplex,
  send: (sock: number, fd: number) => number,
): Promise<void> {
  socket.write(
    `HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ${FD_READ}\r\nX-Ums-Size: ${size}\r\n\r\n`,
  );
  const go = await new Promise<boolean>((resolve) => {
    const done = (ok: boolean) => {
      clearTimeout(timer);
      socket.off("data", onData);
      socket.off("close", onClose);
      socket.pause();
      resolve(ok);
    };
    const onData = (chunk: Buffer) => done(chunk.length === 1 && chunk[0] === 0x67);
    const onClose = () => done(false);
    const timer = setTimeout(() => done(false), GO_WAIT_MS);
    socket.on("data", onData);
    socket.once("close", onClose);
    socket.resume();
  });
  const sock = socketFd(socket);
  if (!go || sock < 0 || send(sock, fh.fd) !== 0) {
    socket.destroy();
    return;
  }
  socket.end();
}

/**
 * Reads the next chunk while the last one is being written; each buffer is reused once its write is
 * done. At most `size` bytes (the size announced) go out: a file that grows during the read is sent as
 * it was when opened; one that shrinks ends early, which the host tells from the size.
 */
async function sendFile(fh: FileHandle, socket: Duplex, size: number | undefined): Promise<void> {
  const buffers = [Buffer.allocUnsafe(CHUNK), Buffer.allocUnsafe(CHUNK)];
  let turn = 0;
  let left = size ?? Number.POSITIVE_INFINITY;
  let written: Promise<void> = Promise.resolve();
  written.catch(() => {});
  for (;;) {
    const buffer = buffers[turn] as Buffer;
    const { bytesRead } = left > 0 ? await fh.read(buffer, 0, Math.min(CHUNK, left), null) : { bytesRead: 0 };
    left -= bytesRead;
    await written;
    if (bytesRead === 0) return;
    written = new Promise<void>((resolve, reject) =>
      socket.write(buffer.subarray(0, bytesRead), (err) => (err ? reject(err) : resolve())),
    );
    written.catch(() => {});
    turn ^= 1;
  }
}
