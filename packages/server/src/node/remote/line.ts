import type { Socket } from "node:net";

/** A connection that ended, or sent more than allowed, before its line. */
export class NoLineError extends Error {
  constructor(readonly ended: boolean) {
    super(ended ? "the connection ended before its line" : "a line is too long");
  }
}

/**
 * The first line (`\n`-terminated, UTF-8) on `socket`, read in paused mode: the bytes after it stay
 * in the socket (unshifted) for whoever reads it next, and a `data` listener or a pipe added later
 * starts it flowing as usual. Lines longer than `max` bytes reject.
 */
export function readLine(socket: Socket, max: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const done = () => {
      socket.off("readable", onReadable);
      socket.off("end", onEnd);
      socket.off("close", onEnd);
    };
    const onReadable = () => {
      for (let chunk = socket.read() as Buffer | null; chunk !== null; chunk = socket.read() as Buffer | null) {
        const nl = chunk.indexOf(10);
        if (nl >= 0) {
          done();
          if (nl + 1 < chunk.length) socket.unshift(chunk.subarray(nl + 1));
          chunks.push(chunk.subarray(0, nl));
          resolve(Buffer.concat(chunks).toString("utf8"));
          return;
        }
        chunks.push(chunk);
        size += chunk.length;
        if (size > max) {
          done();
          reject(new NoLineError(false));
          return;
        }
      }
    };
    const onEnd = () => {
      done();
      reject(new NoLineError(true));
    };
    socket.on("readable", onReadable);
    socket.once("end", onEnd);
    socket.once("close", onEnd);
    // An end read before this call (its events went by unheard; an ended socket has nothing left
    // to read), or a socket already destroyed: no line will come.
    if (socket.readableEnded || socket.destroyed) onEnd();
  });
}
