import { renameSync, writeFileSync } from "node:fs";

/**
 * /etc/hostname and /etc/hosts name the unit (the image ships placeholders; a fork or a rename
 * gets its own name at its next boot). Each file is written beside itself and renamed over, so a
 * reader never sees half of one, and whatever the unit left there (a link included) is replaced.
 */
export function writeIdentity(name: string, etc = "/etc"): void {
  const hosts = `127.0.0.1\tlocalhost\n127.0.1.1\t${name}\n::1\tlocalhost ip6-localhost ip6-loopback\n`;
  for (const [file, content] of [
    ["hostname", `${name}\n`],
    ["hosts", hosts],
  ] as const) {
    const tmp = `${etc}/.${file}.ums-tmp`;
    writeFileSync(tmp, content, { mode: 0o644 });
    renameSync(tmp, `${etc}/${file}`);
  }
}
