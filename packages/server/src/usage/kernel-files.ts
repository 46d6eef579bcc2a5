import { closeSync, constants, openSync, readSync } from "node:fs";

/**
 * Reads small kernel files (cgroup v1, sysfs) synchronously into one reused buffer: no promise,
 * no allocation per file but the parsed number. Opened with O_NOFOLLOW: a symlink in the last
 * component is refused. Callers pass only kernel paths the host owns (runtime `usageSources`),
 * never a path in a unit's rootfs: root in a unit is the attacker.
 */
export class KernelFiles {
  private readonly buf = Buffer.allocUnsafe(16 * 1024);
  /** Bytes of the last `read`. */
  private len = 0;

  /** Reads the file into the buffer; false when it cannot be read (the unit went, quotas off). */
  read(path: string): boolean {
    let fd: number;
    try {
      fd = openSync(path, constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK);
    } catch {
      this.len = 0;
      return false;
    }
    try {
      let n = 0;
      for (;;) {
        const got = readSync(fd, this.buf, n, this.buf.length - n, null);
        if (got <= 0) break;
        n += got;
        if (n === this.buf.length) break;
      }
      this.len = n;
      return true;
    } catch {
      this.len = 0;
      return false;
    } finally {
      closeSync(fd);
    }
  }

  /** The file's first number (a decimal integer), undefined if it holds none. */
  number(path: string): number | undefined {
    if (!this.read(path)) return undefined;
    return this.parseAt(0);
  }

  /** In the last file read: the number after the line that starts with `key ` (memory.stat style). */
  field(key: string): number | undefined {
    const text = this.buf.toString("latin1", 0, this.len);
    const at = text.startsWith(`${key} `) ? 0 : text.indexOf(`\n${key} `);
    if (at < 0) return undefined;
    return this.parseAt(at + key.length + (at === 0 ? 1 : 2));
  }

  private parseAt(start: number): number | undefined {
    let i = start;
    while (i < this.len && (this.buf[i] === 0x20 || this.buf[i] === 0x09)) i++;
    let v = 0;
    let digits = 0;
    for (; i < this.len; i++) {
      const c = this.buf[i] as number;
      if (c < 0x30 || c > 0x39) break;
      v = v * 10 + (c - 0x30);
      digits++;
    }
    return digits > 0 ? v : undefined;
  }
}
