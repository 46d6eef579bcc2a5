import { ApiError } from "../../errors/api-error.js";
import { type Cidr, checkHost, rangeLabel } from "../gateway/target-address.js";
import type { ResolvedProvider } from "../registry/registry.js";

/**
 * Spec 4.8 `base_api_url`: required and HTTPS for the managed key-value database (immutable: no
 * route changes it), required for `custom_api`, optional for the S3 store, ignored by fixed-host
 * providers. Its host must be public (issue #19 finding 7): an address literal in any form that is
 * not global unicast, and `localhost` names, are refused here, without a lookup, unless the server
 * allows private targets (tests). A name is taken as it is: the gateway resolves and checks it at
 * every connection (connectors/gateway/pinned-target.ts), which is the check that counts.
 */
export function checkBaseApiUrl(
  p: ResolvedProvider,
  raw: string | undefined,
  targets: { readonly allowPrivateBaseUrls: boolean; readonly allowedBaseUrlRanges: readonly Cidr[] },
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
  if (!targets.allowPrivateBaseUrls) {
    const host = checkHost(u.hostname, targets.allowedBaseUrlRanges);
    if (host.kind === "refused") throw bad(`${host.reason}; give the provider's public host name`);
    if (host.kind === "address" && host.checked.refused) {
      throw bad(
        `${host.checked.address} is a ${rangeLabel(host.checked.refused)} address; the gateway reaches only public (global unicast) addresses`,
      );
    }
  }
  return `${u.origin}${u.pathname.replace(/\/+$/, "")}`;
}
