import assert from "node:assert/strict";
import { execHttp } from "./exec-client.js";
import type { TestServer } from "./server.js";

// Helpers of the services API tests (not shipped: only *.test.ts import them).

export interface Ev {
  type: string;
  data?: string;
  exit_code?: number;
  timestamp: number;
  log_files?: Record<string, string>;
}

export interface Svc {
  args: string[];
  state: Record<string, unknown>;
}

export function events(text: string): Ev[] {
  return text
    .trim()
    .split("\n")
    .filter((l) => l !== "")
    .map((l) => JSON.parse(l));
}

/** A small HTTP server run by the unit's node (bind-mounted at /.unit/bin/node). */
export function nodeHttp(port: number, body: string, delayMs = 0): { cmd: string; args: string[] } {
  const js = `setTimeout(()=>require("http").createServer((q,r)=>r.end(${JSON.stringify(body)}+q.url)).listen(${port}),${delayMs})`;
  return { cmd: "/.unit/bin/node", args: ["-e", js] };
}

export function tools(s: TestServer, token: string) {
  const sh = async (unit: string, script: string, user?: "root") => {
    const r = await execHttp(s.url, token, unit, ["sh", "-c", script], user ? { user } : {});
    return { code: r.exitCode, out: r.stdout.toString(), err: r.stderr.toString() };
  };
  /** A PUT; with a `duration` other than 0 it asks for the NDJSON stream of the start (spec 6.4). */
  const put = (unit: string, svc: string, json: unknown, duration = "0") =>
    s.api("PUT", `/v1/units/${unit}/services/${svc}?duration=${duration}`, {
      token,
      json,
      ...(duration !== "0" && { headers: { accept: "application/x-ndjson" } }),
    });
  const get = async (unit: string, svc: string) => {
    const r = await s.api("GET", `/v1/units/${unit}/services/${svc}`, { token });
    assert.equal(r.status, 200, r.text);
    return r.body;
  };
  /** Polls the service until `pred` holds (or fails after `ms`). */
  const until = async (
    unit: string,
    svc: string,
    pred: (b: { state: Record<string, unknown> }) => boolean,
    ms = 15_000,
  ) => {
    const deadline = Date.now() + ms;
    let last: unknown;
    while (Date.now() < deadline) {
      last = await get(unit, svc);
      if (pred(last as Svc)) return last as Svc;
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.fail(`service ${svc} never reached the expected state; last: ${JSON.stringify(last)}`);
  };
  return { sh, put, get, until };
}
