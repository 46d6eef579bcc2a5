import assert from "node:assert/strict";
import { after, before } from "node:test";
import { testDialects } from "./dialects.js";
import { execHttp } from "./exec-client.js";
import { type ApiResponse, startTestServer, type TestServer } from "./server.js";

// The filesystem API suite's unit (spec 4.4; api/fs/fs.test.ts and api/fs/transfer.test.ts, each on a
// server and unit of its own).

export const UNIT = "fsu";
export const HOME = "/home/unit";
/** The filesystem routes of the suite's unit. */
export const FS_BASE = `/v1/units/${UNIT}/fs`;

type Params = Record<string, string | boolean>;

/** A query string of `o`. */
export const qs = (o: Params) =>
  new URLSearchParams(Object.entries(o).map(([k, v]): [string, string] => [k, String(v)])).toString();

/** The suite's server and unit, and the calls its tests make (relative paths against the unit user's home). */
export interface FsUnit {
  readonly s: TestServer;
  readonly token: string;
  readonly unitId: string;
  /** Runs `script` in the unit (as the unit user unless told); its stdout. */
  sh(script: string, user?: "root" | "unit"): Promise<string>;
  write(path: string, body: string | Uint8Array, extra?: Params): Promise<ApiResponse>;
  read(path: string, extra?: Params): Promise<ApiResponse>;
  list(path: string, extra?: Params): Promise<ApiResponse>;
  /** POST /fs/<op> (DELETE for "delete") with `json` and the home as workingDir. */
  post(op: string, json: Record<string, unknown>): Promise<ApiResponse>;
}

/**
 * For the enclosing `describe`: a server on SQLite with the unit, made before its first test and
 * closed after its last. Returns the suite's handle (usable once made).
 */
export function fsUnit(): FsUnit {
  const sqlite = testDialects[0];
  let s: TestServer;
  let token: string;
  let unitId = "";
  const base = FS_BASE;
  const sh = async (script: string, user: "root" | "unit" = "unit") => {
    const r = await execHttp(s.url, token, UNIT, ["sh", "-c", script], { user });
    return r.stdout.toString();
  };
  const write = (path: string, body: string | Uint8Array, extra: Params = {}) =>
    s.api("PUT", `${base}/write?${qs({ path, workingDir: HOME, ...extra })}`, {
      token,
      body,
      headers: { "content-type": "application/octet-stream" },
    });
  const read = (path: string, extra: Params = {}) =>
    s.api("GET", `${base}/read?${qs({ path, workingDir: HOME, ...extra })}`, { token });
  const list = (path: string, extra: Params = {}) =>
    s.api("GET", `${base}/list?${qs({ path, workingDir: HOME, ...extra })}`, { token });
  const post = (op: string, json: Record<string, unknown>) =>
    s.api(op === "delete" ? "DELETE" : "POST", `${base}/${op}`, { token, json: { workingDir: HOME, ...json } });

  const unit = { sh, write, read, list, post } as FsUnit; // s, token and unitId: once made
  before(async () => {
    if (!sqlite) throw new Error("no sqlite");
    s = await startTestServer(sqlite);
    token = await s.token("fs");
    const created = await s.api("POST", "/v1/units", { token, json: { name: UNIT } });
    assert.equal(created.status, 201);
    unitId = created.body.id;
    Object.assign(unit, { s, token, unitId });
  });
  after(() => s?.close());

  return unit;
}
