import { existsSync } from "node:fs";
import { join } from "node:path";

// The agent's side of a read sent as a descriptor (fd-send.c, built into dist/ beside the agent's entry
// point, which units see at /.unit/agent): loaded at the first large read that may use it.

type Send = (sock: number, fd: number) => number;
let loaded: Send | null | undefined;

/**
 * send(sock, fd): 0 once `fd` went on the Unix socket `sock` (SCM_RIGHTS, one byte "F"), else -errno.
 * Null when the addon is not there (a build without a compiler, or an agent run from elsewhere).
 */
export function fdSender(entry: string = process.argv[1] ?? ""): Send | null {
  if (loaded !== undefined) return loaded;
  loaded = null;
  const file = join(entry, "..", "ums-fd-send.node");
  if (!existsSync(file)) return null;
  try {
    const m = { exports: {} as { send?: Send } };
    process.dlopen(m, file);
    loaded = m.exports.send ?? null;
  } catch {
    loaded = null; // a node that cannot load it (another ABI): reads go as bytes
  }
  return loaded;
}

/** The descriptor of a connected socket's handle (node's internal `_handle.fd`), or -1. */
export function socketFd(socket: unknown): number {
  const fd = (socket as { _handle?: { fd?: unknown } })._handle?.fd;
  return typeof fd === "number" ? fd : -1;
}
