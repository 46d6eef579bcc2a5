import { access, constants, readFile, writeFile } from "node:fs/promises";

// runc gives every container a session keyring of its own (runc(8), `--no-new-keyring`), and the
// kernel charges keys to their owner's uid: all units' roots are one host uid (the image's id shift),
// so every running unit costs that uid a key. The kernel's default quota for a uid other than root is
// 200 keys and 20000 bytes (Documentation/security/keys/core.rst, /proc/sys/kernel/keys/maxkeys and
// maxbytes): boots failed at about 200 running units on one host ("disk quota exceeded" from runc).
// Units themselves cannot make keys (the seccomp filter refuses keyctl, add_key and request_key).

/** What `ums serve` makes sure the quota is at least: room for thousands of units. */
export const KEY_QUOTA = { maxkeys: 20_000, maxbytes: 2_000_000 } as const;

const file = (name: keyof typeof KEY_QUOTA) => `/proc/sys/kernel/keys/${name}`;

export interface KeyQuota {
  readonly maxkeys: number;
  readonly maxbytes: number;
}

/** The quota now (0 where it cannot be read: no keys support in the kernel). */
export async function readKeyQuota(): Promise<KeyQuota> {
  const read = async (name: keyof typeof KEY_QUOTA) =>
    Number((await readFile(file(name), "utf8").catch(() => "0")).trim()) || 0;
  return { maxkeys: await read("maxkeys"), maxbytes: await read("maxbytes") };
}

/** The settings below KEY_QUOTA, as `name: now -> wanted`. */
export function keyQuotaShortfall(q: KeyQuota): string[] {
  return (Object.keys(KEY_QUOTA) as (keyof typeof KEY_QUOTA)[])
    .filter((name) => q[name] < KEY_QUOTA[name])
    .map((name) => `kernel.keys.${name}: ${q[name]} -> ${KEY_QUOTA[name]}`);
}

/**
 * Raises the key quota to KEY_QUOTA where it is lower; never lowers it (an operator's higher value
 * stays). Returns what it raised. Fails with a message naming the sysctl when it cannot write it.
 */
export async function raiseKeyQuota(): Promise<string[]> {
  const now = await readKeyQuota();
  const raised: string[] = [];
  for (const name of Object.keys(KEY_QUOTA) as (keyof typeof KEY_QUOTA)[]) {
    if (now[name] >= KEY_QUOTA[name]) continue;
    try {
      await writeFile(file(name), String(KEY_QUOTA[name]));
    } catch (err) {
      throw new Error(
        `cannot raise kernel.keys.${name} from ${now[name]} to ${KEY_QUOTA[name]} (${(err as Error).message}); ` +
          `units would stop booting at about ${now.maxkeys} running units: run as root, or sysctl -w kernel.keys.${name}=${KEY_QUOTA[name]}`,
      );
    }
    raised.push(`kernel.keys.${name}: ${now[name]} -> ${KEY_QUOTA[name]}`);
  }
  return raised;
}

/** Whether this process could raise the quota (for `ums doctor`, which changes nothing). */
export async function canRaiseKeyQuota(): Promise<boolean> {
  return access(file("maxkeys"), constants.W_OK).then(
    () => true,
    () => false,
  );
}
