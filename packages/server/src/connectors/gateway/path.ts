/**
 * Gateway path normalisation (issue #7, spec 2.11): the provider path a rule is checked against
 * is exactly the path forwarded, so `..`, `%2e%2e`, `//` and encoded slashes cannot make the
 * provider see a path other than the one the policy saw. Each segment is percent-decoded once
 * (RFC 3986 §2.1); dot segments (RFC 3986 §3.3), encoded `/` or `\`, NUL and segments that still
 * carry an encoded dot or slash after decoding (double encoding) are refused rather than resolved;
 * empty segments (`//`) collapse.
 */
export type NormalizedPath =
  | {
      readonly ok: true;
      /** Decoded segments joined by `/`, no trailing slash: what rules match. */
      readonly match: string;
      /** Re-encoded path with the original trailing slash: what is forwarded. */
      readonly forward: string;
    }
  | { readonly ok: false; readonly reason: string };

const UNSAFE_DECODED = /%(?:2e|2f|5c|25)/i;

/** RFC 3986 pchar: unreserved, sub-delims, `:` and `@` stay; everything else is percent-encoded. */
export function encodeSegment(segment: string): string {
  return encodeURIComponent(segment).replace(/%(3A|40|21|24|26|27|28|29|2A|2B|2C|3B|3D)/g, (_, h: string) =>
    String.fromCharCode(Number.parseInt(h, 16)),
  );
}

/**
 * A path whose segments are all plain pchars (no `%`), none empty and none starting with `.` (so no
 * dot segment): decoding and encoding leave it as it is. Most calls' paths are such.
 */
const PLAIN = /^(?:\/[A-Za-z0-9\-_~!$&'()*+,;=:@][A-Za-z0-9\-._~!$&'()*+,;=:@]*)*\/?$/;

export function normalizeGatewayPath(raw: string): NormalizedPath {
  const path = raw === "" ? "/" : raw;
  // Issue #16 part 3 (every call): the same answer as the segment by segment way below, without it.
  if (PLAIN.test(path)) {
    return { ok: true, match: path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path, forward: path };
  }
  return normalizeBySegments(path);
}

/** The general case of normalizeGatewayPath (exported for its test against the shortcut). */
export function normalizeBySegments(path: string): NormalizedPath {
  if (!path.startsWith("/")) return { ok: false, reason: "the provider path must start with '/'" };
  if (path.includes("\\")) return { ok: false, reason: "the provider path may not contain '\\'" };
  const segments: string[] = [];
  for (const seg of path.split("/")) {
    if (seg === "") continue;
    let decoded: string;
    try {
      decoded = decodeURIComponent(seg);
    } catch {
      return { ok: false, reason: "the provider path has an invalid percent-encoding" };
    }
    if (decoded === "." || decoded === "..") {
      return { ok: false, reason: "the provider path may not contain '.' or '..' segments (also encoded)" };
    }
    if (/[/\\\0]/.test(decoded)) {
      return { ok: false, reason: "the provider path may not contain encoded '/', '\\' or NUL" };
    }
    if (UNSAFE_DECODED.test(decoded)) {
      return { ok: false, reason: "the provider path may not contain double-encoded '.', '/', '\\' or '%'" };
    }
    segments.push(decoded);
  }
  const match = `/${segments.join("/")}`;
  const trailing = segments.length > 0 && path.endsWith("/") ? "/" : "";
  return { ok: true, match, forward: `/${segments.map(encodeSegment).join("/")}${trailing}` };
}
