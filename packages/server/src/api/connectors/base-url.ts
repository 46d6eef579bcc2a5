import { isIP } from "node:net";
import { isPrivateAddress } from "../../connectors/private-address.js";
import type { ResolvedProvider } from "../../connectors/registry/registry.js";
import { ApiError } from "../errors.js";

/**
 * Spec 4.8 `base_api_url`: required and HTTPS for the managed key-value database (immutable: no
 * route changes it), required for `custom_api`, optional for the S3 store, ignored by fixed-host
 * providers. A literal private address is refused unless the server allows it (tests).
 */
export function checkBaseApiUrl(
  p: ResolvedProvider,
  raw: string | undefined,
  allowPrivate: boolean,
): string | undefined {
  if (p.baseUrl === "fixed") return undefined;
  if (raw === undefined) {
    if (p.baseUrl === "optional") return undefined;
    throw ApiError.validation([`base_api_url: required for provider '${p.key}'`]);
  }
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw ApiError.validation(["base_api_url: is not an absolute URL"]);
  }
  const bad = (why: string) => ApiError.validation([`base_api_url: ${why}`]);
  if (p.baseUrl === "required_https" && u.protocol !== "https:") throw bad(`must be https for provider '${p.key}'`);
  if (u.protocol !== "https:" && u.protocol !== "http:") throw bad("must be an http or https URL");
  if (u.username || u.password) throw bad("may not carry credentials; send them as api_key");
  if (u.search || u.hash) throw bad("may not have a query or fragment");
  const host = u.hostname.replace(/^\[|\]$/g, "");
  if (
    !allowPrivate &&
    (host === "localhost" || host.endsWith(".localhost") || (isIP(host) && isPrivateAddress(host)))
  ) {
    throw bad("may not point at a loopback, private or link-local address");
  }
  return `${u.origin}${u.pathname.replace(/\/+$/, "")}`;
}
