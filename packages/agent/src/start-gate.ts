import { Socket } from "node:net";

/**
 * The host finishes setting a unit up while its agent starts (the unit's link and disk limit:
 * server runtime/runc/boot.ts) and says when it is done by closing its end of a socket passed to
 * the agent as descriptor `UMS_AGENT_GATE_FD`. Resolves then, or at once without one. Anything the
 * socket carries is ignored; an error counts as the end (the host is gone: nothing to wait for).
 */
export function startGate(fdVar: string | undefined): Promise<void> {
  const fd = fdVar === undefined || fdVar === "" ? Number.NaN : Number(fdVar);
  if (!Number.isInteger(fd) || fd < 0) return Promise.resolve();
  return new Promise((resolve) => {
    let socket: Socket;
    try {
      socket = new Socket({ fd, readable: true, writable: false });
    } catch {
      return resolve();
    }
    const done = () => {
      socket.destroy();
      resolve();
    };
    socket.on("data", () => {});
    socket.once("end", done);
    socket.once("close", done);
    socket.once("error", done);
  });
}
