/**
 * DNS names and the domain patterns of network policy rules (spec 2.10). Names compare
 * case-insensitively (RFC 4343) and without the root's trailing dot; labels are 1–63 characters
 * of letters, digits, hyphen and underscore (RFC 1035 section 2.3.1, plus `_` as in service
 * names), not starting or ending with a hyphen; a whole name is at most 253 characters.
 */
const LABEL = /^(?!-)[a-z0-9_-]{1,63}(?<!-)$/;

/** A query name as the resolver compares it: lower case, no trailing dot. */
export function normalizeName(name: string): string {
  return name.toLowerCase().replace(/\.$/, "");
}

export function isValidName(name: string): boolean {
  return name.length > 0 && name.length <= 253 && name.split(".").every((l) => LABEL.test(l));
}

export type DomainPattern =
  | { readonly kind: "any" }
  | { readonly kind: "exact"; readonly name: string }
  /** `*.suffix`: every name below `suffix` (not `suffix` itself). */
  | { readonly kind: "wildcard"; readonly suffix: string };

/** Parses a rule's `domain`; a string that says what is wrong when it is not a pattern. */
export function parsePattern(raw: string): DomainPattern | string {
  const p = normalizeName(raw.trim());
  if (p === "*") return { kind: "any" };
  if (p.startsWith("*.")) {
    const suffix = p.slice(2);
    if (!isValidName(suffix)) return `'${raw}' is not '*.' followed by a DNS name`;
    return { kind: "wildcard", suffix };
  }
  if (p.includes("*")) return `'${raw}': a wildcard is only allowed as the whole first label, as in *.example.com`;
  if (!isValidName(p)) return `'${raw}' is not a DNS name (labels of letters, digits, '-' and '_', dot-separated)`;
  return { kind: "exact", name: p };
}

/**
 * How specific a pattern is when it matches `name`, or -1 when it does not: an exact name beats
 * any wildcard, a longer wildcard suffix beats a shorter one, and `*` comes last.
 */
export function specificity(pattern: DomainPattern, name: string): number {
  switch (pattern.kind) {
    case "any":
      return 0;
    case "exact":
      return pattern.name === name ? 1000 : -1;
    case "wildcard":
      return name.endsWith(`.${pattern.suffix}`) ? 1 + pattern.suffix.split(".").length : -1;
  }
}

export function patternText(pattern: DomainPattern): string {
  return pattern.kind === "any" ? "*" : pattern.kind === "exact" ? pattern.name : `*.${pattern.suffix}`;
}
