import { createHash, createHmac } from "node:crypto";

/**
 * AWS Signature Version 4 (AWS General Reference, "Signature Version 4 signing process";
 * S3 variant: single URI encoding, `x-amz-content-sha256`). The gateway streams bodies, so the
 * payload is signed as `UNSIGNED-PAYLOAD` unless a hash is given.
 */
export interface SigV4Opts {
  readonly method: string;
  /** Host header value (with port when not the scheme default). */
  readonly host: string;
  /** The request path as sent (percent-encoded). */
  readonly path: string;
  /** The raw query string without `?`. */
  readonly query: string;
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly region: string;
  readonly service: string;
  readonly now?: Date;
  readonly payloadHash?: string;
  /** Further headers to sign (lower-case names), e.g. content-type. */
  readonly headers?: Readonly<Record<string, string>>;
}

/** RFC 3986 unreserved characters stay, all else is %XX upper-case (AWS "UriEncode"). */
export function awsUriEncode(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

const decode = (s: string) => {
  try {
    return decodeURIComponent(s.replace(/\+/g, "%20"));
  } catch {
    return s;
  }
};

export function canonicalQuery(query: string): string {
  if (!query) return "";
  return query
    .split("&")
    .filter(Boolean)
    .map((p) => {
      const i = p.indexOf("=");
      const k = i < 0 ? p : p.slice(0, i);
      const v = i < 0 ? "" : p.slice(i + 1);
      return [awsUriEncode(decode(k)), awsUriEncode(decode(v))] as const;
    })
    .sort(([a, av], [b, bv]) => (a < b ? -1 : a > b ? 1 : av < bv ? -1 : av > bv ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join("&");
}

export function canonicalUri(path: string): string {
  return path
    .split("/")
    .map((s) => awsUriEncode(decode(s.replace(/\+/g, "%2B"))))
    .join("/");
}

const sha256 = (s: string) => createHash("sha256").update(s).digest("hex");
const hmac = (key: Buffer | string, s: string) => createHmac("sha256", key).update(s).digest();

/** Returns the headers to add: authorization, x-amz-date, x-amz-content-sha256. */
export function signSigV4(o: SigV4Opts): Record<string, string> {
  const amzDate = (o.now ?? new Date())
    .toISOString()
    .replace(/[-:]/g, "")
    .replace(/\.\d{3}/, "");
  const date = amzDate.slice(0, 8);
  const payloadHash = o.payloadHash ?? "UNSIGNED-PAYLOAD";
  const headers: Record<string, string> = {
    ...Object.fromEntries(Object.entries(o.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v])),
    host: o.host,
    "x-amz-content-sha256": payloadHash,
    "x-amz-date": amzDate,
  };
  const names = Object.keys(headers).sort();
  const canonicalHeaders = names.map((n) => `${n}:${String(headers[n]).trim().replace(/\s+/g, " ")}\n`).join("");
  const signedHeaders = names.join(";");
  const request = [
    o.method.toUpperCase(),
    canonicalUri(o.path),
    canonicalQuery(o.query),
    canonicalHeaders,
    signedHeaders,
    payloadHash,
  ].join("\n");
  const scope = `${date}/${o.region}/${o.service}/aws4_request`;
  const toSign = ["AWS4-HMAC-SHA256", amzDate, scope, sha256(request)].join("\n");
  const key = hmac(hmac(hmac(hmac(`AWS4${o.secretAccessKey}`, date), o.region), o.service), "aws4_request");
  const signature = createHmac("sha256", key).update(toSign).digest("hex");
  return {
    authorization: `AWS4-HMAC-SHA256 Credential=${o.accessKeyId}/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`,
    "x-amz-date": amzDate,
    "x-amz-content-sha256": payloadHash,
  };
}
