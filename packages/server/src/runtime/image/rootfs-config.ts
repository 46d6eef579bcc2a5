import { access, chmod, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { run } from "../exec/host-command.js";

// The build's configure step: what the image holds beyond the Debian packages (the user, sudo,
// the placeholders the runtime fills at boot) and the list of what was installed.

/** The user units run commands as by default. */
export const UNIT_USER = Object.freeze({ name: "unit", uid: 1000, gid: 1000, home: "/home/unit", shell: "/bin/bash" });

/** The hostname the image ships in /etc/hostname and /etc/hosts until the runtime writes the unit's name. */
export const PLACEHOLDER_HOSTNAME = "unit";

async function exists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

/** Plain file writes inside the rootfs (the build owns it; nothing in it is a link we did not make). */
async function put(root: string, rel: string, content: string, mode = 0o644): Promise<void> {
  const path = join(root, rel);
  await rm(path, { force: true });
  await writeFile(path, content, { mode });
  await chmod(path, mode);
}

export const PLACEHOLDER_HOSTS = [
  "127.0.0.1\tlocalhost",
  `127.0.1.1\t${PLACEHOLDER_HOSTNAME}`,
  "::1\tlocalhost ip6-localhost ip6-loopback",
  "ff02::1\tip6-allnodes",
  "ff02::2\tip6-allrouters",
  "",
].join("\n");

/** Step b: the user, sudo, the placeholders the runtime fills at boot, and less weight. */
export async function configureRootfs(root: string): Promise<void> {
  const u = UNIT_USER;
  await run("chroot", [root, "groupadd", "--gid", String(u.gid), u.name]);
  await run("chroot", [
    root,
    "useradd",
    "--uid",
    String(u.uid),
    "--gid",
    String(u.gid),
    "--create-home",
    "--home-dir",
    u.home,
    "--shell",
    u.shell,
    "--comment",
    "unit user",
    u.name,
  ]);
  await mkdir(join(root, "etc/sudoers.d"), { recursive: true, mode: 0o755 });
  await put(root, "etc/sudoers.d/unit", `${u.name} ALL=(ALL) NOPASSWD:ALL\n`, 0o440);
  if (await exists(join(root, "usr/sbin/visudo"))) {
    await run("chroot", [root, "visudo", "--check", "--quiet", "--file", "/etc/sudoers.d/unit"]);
  }
  // The runtime writes the unit's name into these two before every boot.
  await put(root, "etc/hostname", `${PLACEHOLDER_HOSTNAME}\n`);
  await put(root, "etc/hosts", PLACEHOLDER_HOSTS);
  // The runtime binds or writes the unit's resolver here.
  await put(root, "etc/resolv.conf", "");
  // Mount point of the runtime's /.unit (agent, node, init, agent socket).
  await mkdir(join(root, ".unit"), { mode: 0o755 });
  await chmod(join(root, ".unit"), 0o755);
  if (await exists(join(root, "usr/sbin/locale-gen"))) {
    await put(root, "etc/locale.gen", "en_US.UTF-8 UTF-8\n");
    await run("chroot", [root, "locale-gen"]);
  }
  await put(root, "etc/default/locale", "LANG=C.UTF-8\n");
  // apt lists and caches: `apt-get update` brings them back when a unit needs them.
  await rm(join(root, "var/lib/apt/lists"), { recursive: true, force: true });
  await mkdir(join(root, "var/lib/apt/lists/partial"), { recursive: true, mode: 0o700 });
  for (const f of ["pkgcache.bin", "srcpkgcache.bin"]) await rm(join(root, "var/cache/apt", f), { force: true });
  await rm(join(root, "var/log/apt/eipp.log.xz"), { force: true });
}

/** Installed packages and versions, from dpkg's status file. */
export async function installedPackages(root: string): Promise<Record<string, string>> {
  const text = await readFile(join(root, "var/lib/dpkg/status"), "utf8");
  const out: Record<string, string> = {};
  for (const para of text.split(/\n\n+/)) {
    const name = /^Package: (.+)$/m.exec(para)?.[1];
    const version = /^Version: (.+)$/m.exec(para)?.[1];
    const status = /^Status: (.+)$/m.exec(para)?.[1];
    if (name && version && status?.endsWith(" installed")) out[name] = version;
  }
  return Object.fromEntries(Object.entries(out).sort(([a], [b]) => (a < b ? -1 : 1)));
}
