import { mkdtemp, rm } from "node:fs/promises";
import net from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

/**
 * A connected pair of Unix stream sockets on this host: `mine`, made by `connect` (so that it can
 * read into buffers of its own: `net.connect`'s `onread`), and `peer`, paused, to hand to a child
 * process as its stdout (then destroyed here: the child has its copy). A socket pair made through
 * node, which has no socketpair(2): a listener in a fresh directory only this process's user can
 * enter (`mkdtemp`, mode 0700, in the host's temp dir, which no unit sees), removed as soon as the
 * pair is connected. A second connection means something else on the host reached the listener,
 * first or too: which one is ours cannot be told, so the pair fails.
 */
export async function privateSocketPair(
  connect: (path: string) => net.Socket,
  opts: {
    /** Tests only: called once the listener is there, before `connect`. */
    onListening?: (path: string) => Promise<void>;
  } = {},
): Promise<{ mine: net.Socket; peer: net.Socket }> {
  // A Unix socket's path has at most 107 bytes: a long TMPDIR gives way to /tmp.
  const dir = await mkdtemp(join(tmpdir().length > 64 ? "/tmp" : tmpdir(), "ums-pair-"));
  const address = join(dir, "s");
  const server = net.createServer({ pauseOnConnect: true });
  let mine: net.Socket | undefined;
  let peer: net.Socket | undefined;
  let intruded = false;
  try {
    const accepted = new Promise<net.Socket>((resolve, reject) => {
      server.on("connection", (s) => {
        if (peer) {
          intruded = true;
          s.destroy();
          peer.destroy();
          return;
        }
        peer = s;
        resolve(s);
      });
      server.on("error", reject);
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(address, () => resolve());
    });
    await opts.onListening?.(address);
    const socket = connect(address);
    mine = socket;
    await Promise.all([
      accepted,
      new Promise<void>((resolve, reject) => {
        socket.once("connect", resolve);
        socket.once("error", reject);
      }),
    ]);
    if (intruded || !peer || peer.destroyed)
      throw new Error("a second connection reached a private socket pair's listener");
    return { mine: socket, peer };
  } catch (err) {
    mine?.destroy();
    peer?.destroy();
    throw err;
  } finally {
    server.close();
    await rm(dir, { recursive: true, force: true });
  }
}
