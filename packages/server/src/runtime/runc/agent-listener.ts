import { rename, rm } from "node:fs/promises";
import { createServer } from "node:net";

/**
 * The agent's socket is made by the host, never by the unit (docs/SECURITY.md, "The boundary rule"):
 * a listening Unix socket bound at a host-owned path that no unit can see, handed to the unit's PID 1
 * as an inherited descriptor (runc `--preserve-fds`), on which the agent accepts. The host connects to
 * that path; nothing in any unit can replace or redirect it.
 *
 * The socket is bound at `<path>.new` and renamed to `path` once the unit holds it, because closing
 * our copy unlinks the path it was bound at (libuv's pipe close). The host's copy accepts nothing:
 * nobody connects before the hand-over, and anything that did would be dropped.
 */
export async function withAgentListener<T>(path: string, use: (fd: number) => Promise<T>): Promise<T> {
  const bound = `${path}.new`;
  await rm(bound, { force: true });
  const server = createServer((socket) => socket.destroy());
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ path: bound }, () => {
      server.off("error", reject);
      resolve();
    });
  });
  // Our copy accepts nothing on purpose; an error on it must not reach the process as unhandled.
  server.on("error", () => {});
  try {
    const fd = (server as unknown as { _handle?: { fd?: number } })._handle?.fd;
    if (typeof fd !== "number" || fd < 0) throw new Error("the agent's listening socket has no descriptor to pass");
    const result = await use(fd);
    await rename(bound, path);
    return result;
  } finally {
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await rm(bound, { force: true });
  }
}
