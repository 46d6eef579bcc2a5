import { createCipheriv, createDecipheriv, randomBytes } from "node:crypto";

/**
 * Secrets at rest (issue #7): AES-256-GCM (NIST SP 800-38D) with a fresh 96-bit nonce per seal,
 * the connector id as additional authenticated data (a sealed secret moved to another row does
 * not open), and the master key's version in the envelope so keys can rotate:
 * `v<version>.<nonce>.<ciphertext>.<tag>`, base64url parts.
 */
export class SecretBox {
  constructor(
    private readonly keys: ReadonlyMap<number, Buffer>,
    readonly currentVersion: number,
  ) {
    if (!keys.has(currentVersion)) throw new Error(`master key version ${currentVersion} is missing`);
    for (const [v, k] of keys) if (k.length !== 32) throw new Error(`master key version ${v} is not 32 bytes`);
  }

  seal(plaintext: string, aad: string): string {
    const key = this.keys.get(this.currentVersion) as Buffer;
    const nonce = randomBytes(12);
    const cipher = createCipheriv("aes-256-gcm", key, nonce);
    cipher.setAAD(Buffer.from(aad));
    const ct = Buffer.concat([cipher.update(plaintext, "utf8"), cipher.final()]);
    const parts = [nonce, ct, cipher.getAuthTag()].map((b) => b.toString("base64url"));
    return `v${this.currentVersion}.${parts.join(".")}`;
  }

  /** Throws (without any of the secret in the message) when the envelope does not open. */
  open(envelope: string, aad: string): string {
    const m = /^v(\d{1,9})\.([\w-]+)\.([\w-]*)\.([\w-]+)$/.exec(envelope);
    const key = m && this.keys.get(Number(m[1]));
    if (!m || !key) throw new Error(`sealed secret uses an unknown master key version or format`);
    const decipher = createDecipheriv("aes-256-gcm", key, Buffer.from(m[2] as string, "base64url"));
    decipher.setAAD(Buffer.from(aad));
    decipher.setAuthTag(Buffer.from(m[4] as string, "base64url"));
    try {
      return Buffer.concat([decipher.update(Buffer.from(m[3] as string, "base64url")), decipher.final()]).toString(
        "utf8",
      );
    } catch {
      throw new Error("sealed secret failed authentication (wrong master key or tampered data)");
    }
  }

  static versionOf(envelope: string): number | undefined {
    const m = /^v(\d{1,9})\./.exec(envelope);
    return m ? Number(m[1]) : undefined;
  }

  /** A key derived for another purpose (HKDF would do too; HMAC-SHA256 of a label is a PRF). */
  currentKey(): Buffer {
    return this.keys.get(this.currentVersion) as Buffer;
  }
}
