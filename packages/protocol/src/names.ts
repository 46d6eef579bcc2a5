/**
 * Unit names (spec 2.1 says only "unique within the organization"; section 8 leaves the rules open).
 *
 * A unit's name is the first part of the DNS label `<name>-<random>` in its URL (RFC 1035 §2.3.1,
 * RFC 1123 §2.1), so it must be a valid label itself and leave room for the suffix:
 * - 1 to 54 characters (a label is at most 63: 54 + "-" + 8 random characters);
 * - lowercase ASCII letters, digits and hyphens only;
 * - starts with a letter, does not end with a hyphen;
 * - no two hyphens in a row (labels with "--" at positions 3–4 are reserved for IDNA, RFC 5891 §4.2.3.1).
 * Organization slugs follow the same rules.
 */
export const UNIT_NAME_MAX_LENGTH = 54;
export const URL_SUFFIX_LENGTH = 8;
export const UNIT_NAME_PATTERN = "^[a-z](?:-?[a-z0-9])*$";
export const UNIT_NAME_RULES =
  "1-54 characters: lowercase letters, digits and single hyphens, starting with a letter and not ending with a hyphen";

/** Returns what is wrong with `name`, or undefined when it is a valid unit name. */
export function unitNameProblem(name: string): string | undefined {
  if (name.length === 0) return "must not be empty";
  if (name.length > UNIT_NAME_MAX_LENGTH) {
    return `is ${name.length} characters long; the most is ${UNIT_NAME_MAX_LENGTH}`;
  }
  if (!/^[a-z]/.test(name)) return "must start with a lowercase letter (a-z)";
  const bad = /[^a-z0-9-]/.exec(name);
  if (bad) {
    return `contains ${JSON.stringify(bad[0])}; only lowercase letters, digits and hyphens are allowed`;
  }
  if (name.includes("--")) return "must not contain two hyphens in a row";
  if (name.endsWith("-")) return "must not end with a hyphen";
  return undefined;
}

/** Prefix filters may be any beginning of a valid name (and may end with a hyphen). */
export function namePrefixProblem(prefix: string): string | undefined {
  if (prefix.length > UNIT_NAME_MAX_LENGTH) {
    return `is ${prefix.length} characters long; no unit name is longer than ${UNIT_NAME_MAX_LENGTH}`;
  }
  if (prefix === "") return undefined;
  if (!prefix.endsWith("-")) return unitNameProblem(prefix);
  const head = prefix.slice(0, -1);
  if (head.endsWith("-")) return "must not contain two hyphens in a row";
  return head === "" ? "must start with a lowercase letter (a-z)" : unitNameProblem(head);
}
