import { randomBytes } from "node:crypto";
import { chmod, open, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { syncDir, writeFileDurably } from "../../util/durable-file.js";
import { SecretBox } from "./crypto.js";

/**
 * The master key ring: `<data-dir>/master.key` (JSON `{current, keys: {<version>: <base64>}}`,
 * mode 0600, created on first start) or `UMS_MASTER_KEY` (`<base64>` or `1:<base64>,2:<base64>`;
 * the highest version seals). Keys are 32 random bytes (AES-256).
 */
export interface KeyRing {
  readonly current: number;
  readonly keys: Record<string, string>;
}

export function masterKeyPath(dataDir: string): string {
  return join(dataDir, "master.key");
}

export function parseEnvKeys(value: string): KeyRing {
  const keys: Record<string, string> = {};
  const items = value
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  for (const [i, item] of items.entries()) {
    const m = /^(?:(\d{1,6}):)?([A-Za-z0-9+/_-]+=*)$/.exec(item);
    const version = m?.[1] ? Number(m[1]) : i + 1;
    if (!m || Buffer.from(m[2] as string, "base64").length !== 32) {
      throw new Error(`UMS_MASTER_KEY entry ${i + 1} is not [<version>:]<base64 of 32 bytes>`);
    }
    keys[String(version)] = m[2] as string;
  }
  if (items.length === 0) throw new Error("UMS_MASTER_KEY is empty");
  return { current: Math.max(...Object.keys(keys).map(Number)), keys };
}

async function writeRing(path: string, ring: KeyRing): Promise<void> {
  await writeFileDurably(path, `${JSON.stringify(ring)}\n`, { tmp: `${path}.tmp-${process.pid}`, mode: 0o600 });
}

async function readRing(path: string): Promise<KeyRing | undefined> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw err;
  }
  const ring = JSON.parse(text) as KeyRing;
  if (!Number.isInteger(ring.current) || typeof ring.keys?.[String(ring.current)] !== "string") {
    throw new Error(`${path} is not a ums master key file`);
  }
  if (((await stat(path)).mode & 0o077) !== 0) await chmod(path, 0o600);
  return ring;
}

function boxOf(ring: KeyRing): SecretBox {
  const keys = new Map(Object.entries(ring.keys).map(([v, k]) => [Number(v), Buffer.from(k, "base64")] as const));
  return new SecretBox(keys, ring.current);
}

/** Loads the key ring, creating `master.key` (0600) when there is neither file nor env key. */
export async function loadSecretBox(dataDir: string, env: NodeJS.ProcessEnv = process.env): Promise<SecretBox> {
  if (env.UMS_MASTER_KEY) return boxOf(parseEnvKeys(env.UMS_MASTER_KEY));
  const path = masterKeyPath(dataDir);
  let ring = await readRing(path);
  if (!ring) {
    ring = { current: 1, keys: { "1": randomBytes(32).toString("base64") } };
    // "wx": two servers starting at once on one data dir must not each make a key.
    try {
      // Durable before anything is sealed with it: a key lost to a crash loses every secret.
      const fh = await open(path, "wx", 0o600);
      try {
        await fh.writeFile(`${JSON.stringify(ring)}\n`);
        await fh.sync();
      } finally {
        await fh.close();
      }
      await syncDir(dataDir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      ring = (await readRing(path)) as KeyRing;
    }
  }
  return boxOf(ring);
}

/**
 * Adds a new key version to `master.key` and makes it current (old versions stay to open what
 * they sealed until re-encryption finishes). With UMS_MASTER_KEY the operator adds the version.
 */
export async function addKeyVersion(dataDir: string, env: NodeJS.ProcessEnv = process.env): Promise<SecretBox> {
  if (env.UMS_MASTER_KEY) return boxOf(parseEnvKeys(env.UMS_MASTER_KEY));
  const path = masterKeyPath(dataDir);
  const ring = (await readRing(path)) ?? { current: 0, keys: {} };
  const next = ring.current + 1;
  const updated = { current: next, keys: { ...ring.keys, [String(next)]: randomBytes(32).toString("base64") } };
  await writeRing(path, updated);
  return boxOf(updated);
}
