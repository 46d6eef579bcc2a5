import { readFileSync } from "node:fs";
import tls from "node:tls";
import { type Cidr, parseRanges } from "../gateway/target-address.js";
import { PROVIDERS } from "./providers.js";
import type { OAuthEndpoints, ProviderDef } from "./types.js";

/** Per-provider overrides from the connectors config file (how tests point a provider at a fake). */
export interface ProviderOverride {
  readonly apiBaseUrl?: string;
  readonly authorizeUrl?: string;
  readonly tokenUrl?: string;
  readonly defaultScopes?: readonly string[];
  /** OAuth client credentials of this server's registration with the provider. */
  readonly clientId?: string;
  readonly clientSecret?: string;
  /** sigv4: the region to sign for. */
  readonly region?: string;
}

/** The connectors config file (`--connectors-config` / UMS_CONNECTORS_CONFIG). */
export interface ConnectorsConfig {
  readonly providers?: Readonly<Record<string, ProviderOverride>>;
  /** Platform-managed keys for `provision`, by provider key. */
  readonly platformKeys?: Readonly<Record<string, string>>;
  /** Lets user-given base URLs (custom_api, …) point at loopback and private addresses (tests only). */
  readonly allowPrivateBaseUrls?: boolean;
  /**
   * CIDRs user-given base URLs may reach although they are not global unicast (tests: the fake
   * internet's documentation ranges). Nothing else but global unicast is ever reached.
   */
  readonly allowBaseUrlRanges?: readonly string[];
  /**
   * A PEM file of certificates the gateway trusts for providers besides Node's bundled roots (a
   * provider behind a private CA; tests: the fake provider's own).
   */
  readonly caFile?: string;
}

export interface OAuthClient extends OAuthEndpoints {
  readonly clientId: string;
  readonly clientSecret: string;
}

export interface ResolvedProvider extends ProviderDef {
  /** Present when the provider has OAuth and this server has client credentials for it. */
  readonly client?: OAuthClient;
}

function readPem(path: string): string {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (err) {
    throw new Error(`connectors config caFile '${path}' cannot be read: ${(err as Error).message}`);
  }
  if (!text.includes("-----BEGIN CERTIFICATE-----")) {
    throw new Error(`connectors config caFile '${path}' holds no PEM certificate`);
  }
  return text;
}

function checkUrl(where: string, value: unknown): string {
  if (typeof value !== "string") throw new Error(`${where} must be a URL string`);
  let u: URL;
  try {
    u = new URL(value);
  } catch {
    throw new Error(`${where} '${value}' is not a URL`);
  }
  if (u.protocol !== "https:" && u.protocol !== "http:") throw new Error(`${where} must be http(s)`);
  return value.replace(/\/+$/, "");
}

/** The registry as this server sees it: the data of providers.ts with the config's overrides. */
export class ProviderRegistry {
  private readonly byKey = new Map<string, ResolvedProvider>();
  private readonly platformKeys: ReadonlyMap<string, string>;
  readonly allowPrivateBaseUrls: boolean;
  readonly allowedBaseUrlRanges: readonly Cidr[];
  /** The certificates providers' TLS is checked against, when the config adds some (else Node's roots). */
  readonly ca: readonly string[] | undefined;

  constructor(config: ConnectorsConfig = {}, defs: readonly ProviderDef[] = PROVIDERS) {
    const known = new Set(defs.map((d) => d.key));
    for (const key of [...Object.keys(config.providers ?? {}), ...Object.keys(config.platformKeys ?? {})]) {
      if (!known.has(key)) throw new Error(`connectors config names unknown provider '${key}'`);
    }
    for (const def of defs) {
      const o = config.providers?.[def.key] ?? {};
      const at = (f: string) => `connectors config providers.${def.key}.${f}`;
      const apiBaseUrl = o.apiBaseUrl !== undefined ? checkUrl(at("apiBaseUrl"), o.apiBaseUrl) : def.apiBaseUrl;
      const auth = def.auth.kind === "sigv4" && o.region ? { ...def.auth, region: o.region } : def.auth;
      const oauth: OAuthEndpoints | undefined = def.oauth && {
        authorizeUrl:
          o.authorizeUrl !== undefined ? checkUrl(at("authorizeUrl"), o.authorizeUrl) : def.oauth.authorizeUrl,
        tokenUrl: o.tokenUrl !== undefined ? checkUrl(at("tokenUrl"), o.tokenUrl) : def.oauth.tokenUrl,
        defaultScopes: o.defaultScopes ?? def.oauth.defaultScopes,
        scopeSeparator: def.oauth.scopeSeparator,
      };
      const client: OAuthClient | undefined =
        oauth && o.clientId && o.clientSecret
          ? { ...oauth, clientId: o.clientId, clientSecret: o.clientSecret }
          : undefined;
      this.byKey.set(
        def.key,
        Object.freeze({ ...def, apiBaseUrl, auth, ...(oauth && { oauth }), ...(client && { client }) }),
      );
    }
    this.allowPrivateBaseUrls = config.allowPrivateBaseUrls === true;
    const ranges = config.allowBaseUrlRanges ?? [];
    if (!Array.isArray(ranges)) throw new Error("connectors config allowBaseUrlRanges must be a list of CIDRs");
    this.allowedBaseUrlRanges = parseRanges(ranges, "connectors config allowBaseUrlRanges");
    this.platformKeys = new Map(Object.entries(config.platformKeys ?? {}));
    if (config.caFile !== undefined && typeof config.caFile !== "string") {
      throw new Error("connectors config caFile must be the path of a PEM file");
    }
    this.ca = config.caFile ? [...tls.rootCertificates, readPem(config.caFile)] : undefined;
  }

  get(key: string): ResolvedProvider | undefined {
    return this.byKey.get(key);
  }

  list(): ResolvedProvider[] {
    return [...this.byKey.values()];
  }

  platformKey(key: string): string | undefined {
    return this.platformKeys.get(key);
  }
}

/** Reads the connectors config file; undefined path: no overrides. */
export function loadConnectorsConfig(path: string | undefined): ConnectorsConfig {
  if (!path) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, "utf8"));
  } catch (err) {
    throw new Error(`connectors config ${path}: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) {
    throw new Error(`connectors config ${path} must be a JSON object {providers, platformKeys}`);
  }
  return parsed as ConnectorsConfig;
}
