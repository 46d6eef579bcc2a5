import { readdirSync, readFileSync, readlinkSync } from "node:fs";
import { readdir, readlink } from "node:fs/promises";

// Which process owns a listening socket (the `pid` of spec 6.5): the socket inode is matched against the
// links in /proc/<pid>/fd. Reading another user's fd links needs CAP_SYS_PTRACE, which a unit's root may
// not have; a root agent then reads them as that user instead (seteuid/setegid, synchronously, switched
// back at once), which needs only CAP_SETUID/CAP_SETGID, as every session spawn does.

const SOCKET_LINK = /^socket:\[(\d+)\]$/;

/** Maps socket inodes to the lowest pid holding them open. */
export async function findSocketOwners(inodes: Set<number>, procRoot = "/proc"): Promise<Map<number, number>> {
  const owners = new Map<number, number>();
  if (inodes.size === 0) return owners;
  let entries: string[];
  try {
    entries = await readdir(procRoot);
  } catch {
    return owners;
  }
  const pids = entries
    .filter((e) => /^\d+$/.test(e))
    .map(Number)
    .sort((a, b) => a - b);
  const denied: number[] = [];
  for (const pid of pids) {
    let fds: string[];
    try {
      fds = await readdir(`${procRoot}/${pid}/fd`);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === "EACCES" || code === "EPERM") denied.push(pid);
      continue;
    }
    let refused = false;
    const targets = await Promise.all(
      fds.map((fd) =>
        readlink(`${procRoot}/${pid}/fd/${fd}`).catch((err: NodeJS.ErrnoException) => {
          // root may list the directory (DAC override) yet be refused the links (ptrace access check)
          if (err.code === "EACCES" || err.code === "EPERM") refused = true;
          return "";
        }),
      ),
    );
    if (refused) denied.push(pid);
    record(owners, inodes, pid, targets);
    if (owners.size === inodes.size) return owners;
  }
  if (denied.length > 0 && owners.size < inodes.size) readAsOwners(owners, inodes, denied, procRoot);
  return owners;
}

function record(owners: Map<number, number>, inodes: Set<number>, pid: number, targets: string[]): void {
  for (const target of targets) {
    const m = SOCKET_LINK.exec(target);
    if (!m) continue;
    const inode = Number(m[1]);
    const known = owners.get(inode);
    if (inodes.has(inode) && (known === undefined || pid < known)) owners.set(inode, pid);
  }
}

/** Real, effective and saved ids of a process when they agree (else null: such a process is skipped). */
function idsOf(pid: number, procRoot: string): { uid: number; gid: number } | null {
  let status: string;
  try {
    status = readFileSync(`${procRoot}/${pid}/status`, "utf8");
  } catch {
    return null;
  }
  const ids = (key: string) => /^\S+:\s+(\d+)\s+(\d+)\s+(\d+)/m.exec(status.slice(status.indexOf(`\n${key}:`) + 1));
  const u = ids("Uid");
  const g = ids("Gid");
  if (!u || !g || u[1] !== u[2] || u[1] !== u[3] || g[1] !== g[2] || g[1] !== g[3]) return null;
  return { uid: Number(u[1]), gid: Number(g[1]) };
}

function readAsOwners(owners: Map<number, number>, inodes: Set<number>, pids: number[], procRoot: string): void {
  if (process.geteuid?.() !== 0 || !process.seteuid || !process.setegid) return;
  const groups = new Map<string, { uid: number; gid: number; pids: number[] }>();
  for (const pid of pids) {
    const ids = idsOf(pid, procRoot);
    if (!ids || ids.uid === 0) continue;
    const key = `${ids.uid}:${ids.gid}`;
    const g = groups.get(key);
    if (g) g.pids.push(pid);
    else groups.set(key, { ...ids, pids: [pid] });
  }
  for (const g of groups.values()) {
    // Everything between the switch and the switch back is synchronous: no other work of the agent runs
    // with these credentials.
    try {
      process.setegid(g.gid);
      process.seteuid(g.uid);
      for (const pid of g.pids) {
        let fds: string[];
        try {
          fds = readdirSync(`${procRoot}/${pid}/fd`);
        } catch {
          continue;
        }
        const targets = fds.map((fd) => {
          try {
            return readlinkSync(`${procRoot}/${pid}/fd/${fd}`);
          } catch {
            return "";
          }
        });
        record(owners, inodes, pid, targets);
      }
    } catch {
      // cannot switch (no CAP_SETUID/CAP_SETGID): leave these pids unknown
    } finally {
      try {
        process.seteuid(0);
        process.setegid(0);
      } catch {
        // seteuid(0) back from a saved uid of 0 cannot fail for a root agent
      }
    }
    if (owners.size === inodes.size) return;
  }
}
