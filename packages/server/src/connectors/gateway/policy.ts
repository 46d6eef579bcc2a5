import type { AccessPolicy } from "@ums/protocol";

/** The calling unit as the policy sees it. */
export interface Caller {
  readonly name: string;
  readonly labels: readonly string[];
}

export type PolicyDecision =
  | { readonly allowed: true }
  | { readonly allowed: false; readonly reason: string; readonly missingLabels?: readonly string[] };

/** A rule's path without `//` and trailing `/` (the `*` kept), like the paths it is matched with. */
function canonicalRule(rule: string): { prefix: boolean; path: string } {
  const prefix = rule.endsWith("*");
  const body = (prefix ? rule.slice(0, -1) : rule).replace(/\/{2,}/g, "/");
  return { prefix, path: prefix ? body : body.replace(/(.)\/$/, "$1") };
}

/**
 * Spec 2.11 patterns: an exact path, or a prefix ending in `*`. A prefix ending in `/` (`/a/*`)
 * also matches the bare `/a` when blocking. Blocking rules compare case-insensitively (some
 * providers route paths without regard to case, so `/ADMIN` must not slip past a block of
 * `/admin/*`); allowing rules compare exactly. Both err on the side of denying.
 */
export function ruleMatches(rule: string, path: string, blocking = false): boolean {
  const caseInsensitive = blocking;
  const r = canonicalRule(rule);
  const p = caseInsensitive ? path.toLowerCase() : path;
  const rp = caseInsensitive ? r.path.toLowerCase() : r.path;
  if (!r.prefix) return p === rp;
  if (p.startsWith(rp)) return true;
  return blocking && rp.endsWith("/") && rp.length > 1 && p === rp.slice(0, -1);
}

/**
 * Spec 2.11: an empty or missing policy denies; `allow_all`, `name_prefix` or `sprite_labels`
 * let units in (`name_prefix` and `sprite_labels` are always required when set, all labels
 * listed); then `blocked_endpoints` are checked before `allowed_endpoints` (absent: any path).
 * `path` is the normalised match path (path.ts).
 */
export function evaluatePolicy(policy: AccessPolicy | undefined, caller: Caller, path: string): PolicyDecision {
  const p = policy ?? {};
  const { allow_all, name_prefix, sprite_labels } = p;
  const admits = allow_all === true || name_prefix !== undefined || (sprite_labels?.length ?? 0) > 0;
  if (!admits) {
    return {
      allowed: false,
      reason: "the connector's access policy lets no unit use it (set allow_all, name_prefix or sprite_labels)",
    };
  }
  if (name_prefix !== undefined && !caller.name.startsWith(name_prefix)) {
    return { allowed: false, reason: `unit '${caller.name}' does not have the name prefix '${name_prefix}'` };
  }
  const missing = (sprite_labels ?? []).filter((l) => !caller.labels.includes(l));
  if (missing.length > 0) {
    return {
      allowed: false,
      reason: `unit '${caller.name}' lacks the label(s) ${missing.map((l) => `'${l}'`).join(", ")}`,
      missingLabels: missing,
    };
  }
  const blocked = (p.blocked_endpoints ?? []).find((r) => ruleMatches(r, path, true));
  if (blocked) return { allowed: false, reason: `path '${path}' is blocked by '${blocked}'` };
  const allowed = p.allowed_endpoints;
  if (allowed && !allowed.some((r) => ruleMatches(r, path))) {
    return { allowed: false, reason: `path '${path}' matches none of the allowed_endpoints` };
  }
  return { allowed: true };
}
