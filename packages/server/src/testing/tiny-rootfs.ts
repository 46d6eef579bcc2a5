import { execFileSync } from "node:child_process";
import { readFileSync, realpathSync } from "node:fs";
import { join } from "node:path";
import { hostPaths } from "../runtime/host.js";
import type { TarItem } from "../runtime/image/oci/test-archives.js";

// A small glibc root filesystem made of this host's own files (a few commands and the libraries
// they and the unit agent's node need), as the items of a tar layer: an image the tests build
// themselves and import, with no registry. Merged /usr, like Debian: /bin, /lib and /lib64 are links.

const COMMANDS = ["sh", "id", "env", "pwd", "cat", "ls", "stat", "echo", "touch", "mkdir"];

/** The shared libraries a host file needs (ldd), by the names it loads them (sonames, the loader's path). */
function libraries(file: string): string[] {
  const out = execFileSync("ldd", [file], { encoding: "utf8" });
  return [...out.matchAll(/(\/\S+) \(0x/g)].map((m) => m[1] as string);
}

/** `usr/lib/x86_64-linux-gnu/x` for a host file at `/lib/x86_64-linux-gnu/x` or `/usr/lib/...` (its content is read through links). */
const inUsr = (real: string) => (real.startsWith("/usr/") ? real.slice(1) : `usr${real}`);

export interface TinyRootfsOpts {
  /** Extra /etc/passwd lines (root's is there). */
  passwd?: string[];
  group?: string[];
}

export function tinyRootfs(opts: TinyRootfsOpts = {}): TarItem[] {
  const host = hostPaths();
  const files = new Map<string, string>(); // image path -> host real path
  const binaries = COMMANDS.map((c) => realpathSync(execFileSync("which", [c], { encoding: "utf8" }).trim()));
  for (const b of binaries) files.set(inUsr(b), b);
  const needy = [...binaries, host.node, join(host.agentDir, "libums-statfs.so")];
  if (host.nodePty) needy.push(join(host.nodePty, "build", "Release", "pty.node"));
  for (const f of needy) {
    try {
      for (const lib of libraries(f)) files.set(inUsr(lib), lib);
    } catch {}
  }
  const items: TarItem[] = [];
  const dirs = new Set<string>();
  const dir = (d: string, mode = 0o755, uid = 0) => {
    if (dirs.has(d)) return;
    const parent = d.split("/").slice(0, -1).join("/");
    if (parent) dir(parent);
    dirs.add(d);
    items.push({ name: `${d}/`, type: "directory", mode, uid, gid: uid });
  };
  for (const [path, real] of [...files].sort()) {
    dir(path.split("/").slice(0, -1).join("/"));
    items.push({ name: path, data: readFileSync(real), mode: 0o755 });
  }
  const sh = binaries[0] as string;
  if (!sh.endsWith("/sh")) items.push({ name: "usr/bin/sh", type: "symlink", linkname: sh.split("/").pop() as string });
  items.push(
    { name: "bin", type: "symlink", linkname: "usr/bin" },
    { name: "lib", type: "symlink", linkname: "usr/lib" },
    { name: "lib64", type: "symlink", linkname: "usr/lib64" },
  );
  dir("etc");
  dir("tmp", 0o1777);
  dir("root", 0o700);
  items.push(
    { name: "etc/passwd", data: ["root:x:0:0:root:/root:/bin/sh", ...(opts.passwd ?? []), ""].join("\n") },
    { name: "etc/group", data: ["root:x:0:", ...(opts.group ?? []), ""].join("\n") },
  );
  return items;
}
