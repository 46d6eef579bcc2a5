import { statSync } from "node:fs";
import type { ConnectorRecord } from "../../store/records.js";
import type { Store } from "../../store/store.js";
import { requestToken, type TokenSet } from "../oauth/token.js";
import type { ProviderRegistry } from "../registry/registry.js";
import { SecretBox } from "./crypto.js";
import { loadSecretBox, masterKeyPath } from "./master-key.js";

/** A connector's credentials; sealed as one JSON document (crypto.ts), never returned or logged. */
export interface Secrets {
  readonly apiKey?: string;
  readonly accessToken?: string;
  readonly refreshToken?: string;
  /** sprites_admin: the ums token minted for the connector's organization. */
  readonly umsToken?: string;
}

/**
 * The master key ring of a running server. `ums keys rotate` may add a key version while the
 * server runs: an envelope under a version this process does not know reloads the ring once.
 */
export class Keys {
  private constructor(
    private box: SecretBox,
    private readonly dataDir: string,
    private mtimeMs: number,
  ) {}

  static async load(dataDir: string): Promise<Keys> {
    const box = await loadSecretBox(dataDir);
    return new Keys(box, dataDir, Keys.fileTime(dataDir));
  }

  private static fileTime(dataDir: string): number {
    if (process.env.UMS_MASTER_KEY) return 0;
    try {
      return statSync(masterKeyPath(dataDir)).mtimeMs;
    } catch {
      return 0;
    }
  }

  /** Seals under the newest key version: a rotation that ran meanwhile is picked up first. */
  private async fresh(force = false): Promise<void> {
    const t = Keys.fileTime(this.dataDir);
    if (force || t !== this.mtimeMs) {
      this.box = await loadSecretBox(this.dataDir);
      this.mtimeMs = t;
    }
  }

  get current(): SecretBox {
    return this.box;
  }

  async seal(secrets: Secrets, connectorId: string): Promise<{ secret: string; keyVersion: number }> {
    await this.fresh();
    return { secret: this.box.seal(JSON.stringify(secrets), connectorId), keyVersion: this.box.currentVersion };
  }

  /** Opened secrets by envelope (a changed secret is a new envelope); bounded. */
  private readonly opened = new Map<string, Secrets>();

  async open(rec: ConnectorRecord): Promise<Secrets> {
    const key = `${rec.id}\0${rec.secret}`;
    const hit = this.opened.get(key);
    if (hit) return hit;
    const v = SecretBox.versionOf(rec.secret);
    if (v !== undefined && v > this.box.currentVersion) await this.fresh(true);
    const secrets = JSON.parse(this.box.open(rec.secret, rec.id)) as Secrets;
    if (this.opened.size >= 10_000) this.opened.clear();
    this.opened.set(key, secrets);
    return secrets;
  }
}

const REFRESH_EARLY_MS = 60_000;

/** Credentials ready to use: an OAuth access token about to expire is refreshed first (RFC 6749 §6). */
export class Credentials {
  private readonly refreshing = new Map<string, Promise<Secrets>>();

  constructor(
    private readonly store: Store,
    private readonly keys: Keys,
    private readonly registry: ProviderRegistry,
    /** Told when a refresh changed a connector (caches of it are stale). */
    private readonly changed: (id: string) => void = () => {},
  ) {}

  async forUse(rec: ConnectorRecord, now = Date.now()): Promise<Secrets> {
    const secrets = await this.keys.open(rec);
    if (rec.connectionType === "provisioned") {
      const key = this.registry.platformKey(rec.provider);
      return key ? { apiKey: key } : {};
    }
    const expiring = rec.tokenExpiresAt !== null && Date.parse(rec.tokenExpiresAt) - REFRESH_EARLY_MS <= now;
    if (!expiring || !secrets.refreshToken) return secrets;
    let p = this.refreshing.get(rec.id);
    if (!p) {
      p = this.refresh(rec, secrets).finally(() => this.refreshing.delete(rec.id));
      this.refreshing.set(rec.id, p);
    }
    return p;
  }

  private async refresh(rec: ConnectorRecord, old: Secrets): Promise<Secrets> {
    const client = this.registry.get(rec.provider)?.client;
    if (!client || !old.refreshToken) return old;
    const t: TokenSet = await requestToken(client, { grant_type: "refresh_token", refresh_token: old.refreshToken });
    // RFC 6749 §6: the provider may keep the old refresh token.
    const fresh: Secrets = { accessToken: t.accessToken, refreshToken: t.refreshToken ?? old.refreshToken };
    await this.store.connectors.update(rec.orgId, rec.id, {
      ...(await this.keys.seal(fresh, rec.id)),
      tokenExpiresAt: t.expiresAt ?? null,
      ...(t.scopes !== undefined && { scopes: t.scopes }),
      updatedAt: new Date().toISOString(),
    });
    this.changed(rec.id);
    return fresh;
  }
}
