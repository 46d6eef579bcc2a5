import { execFile } from "node:child_process";
import { createHash, createHmac, randomBytes } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createHttpsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { promisify } from "node:util";

/** Test edge only: fake providers on loopback (issue #7 tests). */
export interface Fake {
  readonly url: string;
  close(): Promise<void>;
}

/** A fake's own certificate and key (PEM): it serves HTTPS. */
export interface FakeTls {
  readonly key: string;
  readonly cert: string;
}

async function listen(
  handler: (req: IncomingMessage, res: ServerResponse, body: Buffer) => void,
  tls?: FakeTls,
): Promise<{
  server: Server;
  url: string;
}> {
  const onRequest = (req: IncomingMessage, res: ServerResponse) => {
    const parts: Buffer[] = [];
    req.on("data", (d) => parts.push(d));
    req.on("end", () => handler(req, res, Buffer.concat(parts)));
  };
  const server = tls ? createHttpsServer(tls, onRequest) : createServer(onRequest);
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { server, url: `${tls ? "https" : "http"}://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

/** A self-signed certificate for 127.0.0.1 (openssl; a day long): a fake's TLS, and what trusts it. */
export async function selfSignedCert(dir: string, name: string): Promise<FakeTls & { certFile: string }> {
  const keyFile = join(dir, `${name}.key`);
  const certFile = join(dir, `${name}.pem`);
  await promisify(execFile)("openssl", [
    ...["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"],
    ...["-keyout", keyFile, "-out", certFile, "-subj", `/CN=${name}`, "-addext", "subjectAltName=IP:127.0.0.1"],
  ]);
  return { key: await readFile(keyFile, "utf8"), cert: await readFile(certFile, "utf8"), certFile };
}

const close = (s: Server) => () =>
  new Promise<void>((r) => {
    s.close(() => r());
    s.closeAllConnections();
  });

function json(res: ServerResponse, status: number, body: unknown) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}

export interface FakeOAuth extends Fake {
  readonly clientId: string;
  readonly clientSecret: string;
  /** Every access and refresh token issued, and codes (tests grep for them). */
  readonly issued: string[];
  /** Seconds the next access tokens live. */
  expiresIn: number;
  readonly refreshes: number;
  /** Access tokens that are currently valid. */
  readonly valid: Set<string>;
}

/** An OAuth 2.0 authorization server: /authorize redirects with a code at once (consent given), /token. */
export async function fakeOAuth(): Promise<FakeOAuth> {
  const clientId = "client-abc";
  const clientSecret = `cs-${randomBytes(8).toString("hex")}`;
  const codes = new Map<string, { redirectUri: string; scope: string }>();
  const refresh = new Map<string, string>();
  const state = { issued: [] as string[], expiresIn: 3600, refreshes: 0, valid: new Set<string>() };
  const mint = (scope: string) => {
    const access = `at-${randomBytes(12).toString("hex")}`;
    const rt = `rt-${randomBytes(12).toString("hex")}`;
    state.issued.push(access, rt);
    state.valid.add(access);
    refresh.set(rt, scope);
    return { access_token: access, refresh_token: rt, token_type: "bearer", expires_in: state.expiresIn, scope };
  };
  const { server, url } = await listen((req, res, body) => {
    const u = new URL(req.url ?? "/", "http://x");
    if (u.pathname === "/authorize") {
      if (u.searchParams.get("client_id") !== clientId) return json(res, 400, { error: "invalid_client" });
      const code = `code-${randomBytes(8).toString("hex")}`;
      state.issued.push(code);
      const redirectUri = u.searchParams.get("redirect_uri") ?? "";
      codes.set(code, { redirectUri, scope: (u.searchParams.get("scope") ?? "").split(" ").join(",") });
      const back = new URL(redirectUri);
      back.searchParams.set("code", code);
      back.searchParams.set("state", u.searchParams.get("state") ?? "");
      res.writeHead(302, { location: back.href });
      return res.end();
    }
    if (u.pathname === "/token" && req.method === "POST") {
      const f = new URLSearchParams(body.toString());
      if (f.get("client_id") !== clientId || f.get("client_secret") !== clientSecret) {
        return json(res, 401, { error: "invalid_client" });
      }
      if (f.get("grant_type") === "authorization_code") {
        const c = codes.get(f.get("code") ?? "");
        if (!c || c.redirectUri !== f.get("redirect_uri")) return json(res, 400, { error: "invalid_grant" });
        codes.delete(f.get("code") ?? "");
        return json(res, 200, { ...mint(c.scope), account_id: "acct-42", account_name: "Fake Account" });
      }
      if (f.get("grant_type") === "refresh_token") {
        const scope = refresh.get(f.get("refresh_token") ?? "");
        if (scope === undefined) return json(res, 400, { error: "invalid_grant" });
        state.refreshes++;
        return json(res, 200, mint(scope));
      }
      return json(res, 400, { error: "unsupported_grant_type" });
    }
    json(res, 404, { error: "not_found" });
  });
  return Object.assign(state, { url, clientId, clientSecret, close: close(server) }) as FakeOAuth;
}

export interface Seen {
  readonly method: string;
  readonly url: string;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly bodyLength: number;
  readonly bodySha: string;
}

/** A bearer API that echoes what it received; `tokens` (when given) are the only ones it accepts. */
export async function fakeBearerApi(valid?: Set<string>, tls?: FakeTls): Promise<Fake & { seen: Seen[] }> {
  const seen: Seen[] = [];
  const { server, url } = await listen((req, res, body) => {
    const s: Seen = {
      method: req.method ?? "",
      url: req.url ?? "",
      headers: req.headers,
      bodyLength: body.length,
      bodySha: createHash("sha256").update(body).digest("hex"),
    };
    seen.push(s);
    const token = /^Bearer (.+)$/.exec(req.headers.authorization ?? "")?.[1];
    if (valid && (!token || !valid.has(token))) return json(res, 401, { error: "bad token" });
    res.writeHead(200, { "content-type": "application/json", "x-provider": "fake", "set-cookie": "p=1" });
    // What arrived, but never the credential (the caller must not learn it from an echo).
    const { method, url: path, bodyLength, bodySha } = s;
    res.end(JSON.stringify({ method, url: path, bodyLength, bodySha, authorized: true }));
  }, tls);
  return { url, seen, close: close(server) };
}

/**
 * An S3-style endpoint that verifies AWS SigV4 itself, written from the AWS documentation
 * independently of the gateway's signer: canonical request from what arrived, then the
 * derived-key HMAC chain, compared with the signature in Authorization.
 */
export async function fakeS3(accessKeyId: string, secret: string): Promise<Fake & { ok: number; bad: number }> {
  const counts = { ok: 0, bad: 0 };
  const enc = (s: string) =>
    [...Buffer.from(s, "utf8")]
      .map((b) => {
        const c = String.fromCharCode(b);
        return /[A-Za-z0-9\-._~]/.test(c) ? c : `%${b.toString(16).toUpperCase().padStart(2, "0")}`;
      })
      .join("");
  const { server, url } = await listen((req, res, body) => {
    const m =
      /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/s3\/aws4_request, SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$/.exec(
        req.headers.authorization ?? "",
      );
    const fail = (why: string) => {
      counts.bad++;
      res.writeHead(403, { "content-type": "application/xml" });
      res.end(`<Error><Code>SignatureDoesNotMatch</Code><Message>${why}</Message></Error>`);
    };
    if (!m || m[1] !== accessKeyId) return fail("no or foreign credential");
    const [, , date = "", region = "", signedHeaders = "", signature = ""] = m;
    const [rawPath = "", rawQuery = ""] = (req.url ?? "").split("?");
    const path = rawPath
      .split("/")
      .map((s) => enc(decodeURIComponent(s)))
      .join("/");
    const query = rawQuery
      .split("&")
      .filter(Boolean)
      .map((kv) => kv.split("=").map((x) => enc(decodeURIComponent(x ?? ""))))
      .map(([k = "", v = ""]) => `${k}=${v}`)
      .sort()
      .join("&");
    const names = signedHeaders.split(";");
    const headers = names.map((n) => `${n}:${String(req.headers[n] ?? "").trim()}\n`).join("");
    const payload = String(req.headers["x-amz-content-sha256"]);
    if (payload !== "UNSIGNED-PAYLOAD" && payload !== createHash("sha256").update(body).digest("hex")) {
      return fail("payload hash");
    }
    const canonical = [req.method, path, query, headers, signedHeaders, payload].join("\n");
    const amzDate = String(req.headers["x-amz-date"]);
    const scope = `${date}/${region}/s3/aws4_request`;
    const toSign = `AWS4-HMAC-SHA256\n${amzDate}\n${scope}\n${createHash("sha256").update(canonical).digest("hex")}`;
    let k: Buffer = createHmac("sha256", `AWS4${secret}`).update(date).digest();
    for (const part of [region, "s3", "aws4_request"]) k = createHmac("sha256", k).update(part).digest();
    const want = createHmac("sha256", k).update(toSign).digest("hex");
    if (want !== signature || !names.includes("host")) return fail("signature");
    counts.ok++;
    res.writeHead(200, { "content-type": "text/plain", etag: '"fake"' });
    res.end(`ok ${req.method} ${rawPath} ${body.length}`);
  });
  return Object.assign(counts, { url, close: close(server) });
}

/** The `github` provider of a connectors config, its OAuth server and API being the fakes. */
export function fakeGithub(oauth: FakeOAuth, api: Fake): Record<string, string> {
  return {
    apiBaseUrl: api.url,
    authorizeUrl: `${oauth.url}/authorize`,
    tokenUrl: `${oauth.url}/token`,
    clientId: oauth.clientId,
    clientSecret: oauth.clientSecret,
  };
}

/** Writes `config` to `dir`/connectors.json (the file `connectorsConfig` names); returns its path. */
export async function writeConnectorsConfig(dir: string, config: unknown): Promise<string> {
  const file = join(dir, "connectors.json");
  await writeFile(file, JSON.stringify(config));
  return file;
}
