import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { chownSync, lstatSync, readdirSync, readFileSync, type Stats, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { after, before } from "node:test";
import { FS_RESERVED_PATH } from "@ums/protocol";
import { testDialects } from "./dialects.js";
import { execHttp } from "./exec-client.js";
import { type ApiResponse, startTestServer, type TestServer } from "./server.js";

// Issue 19, finding 5 and the path-escape checks: root in a unit is the attacker. The filesystem API
// (spec 4.4) must never reach the host, nor anything in the unit's /.unit but the read-only logs,
// checkpoints and policy (@ums/protocol fs-reserved.ts) — as the unit user or asRoot, whatever the
// path's spelling, whatever symlinks unit root planted, and while unit root swaps a directory for a
// symlink under a running request. All against ONE real unit.
//
// Oracles: canaries on the host side (the unit's host run dir, whose socket directory the unit sees as
// /.unit/run, the run dir above it, the data dir) are never read or changed; /.unit is unchanged; a
// path that resolves into /.unit (by a model of the planted tree) is never answered 2xx; every
// answer is 2xx or 4xx and names no host path; the server and the unit's agent keep answering.

// The suite is in three files (security/fs-escape*.test.ts), each on a server and unit of its own:
// this module is what they share (the unit's set-up, the canaries, the planted links and their model).

export const UNIT = "escape";
export const SANDBOX = "/tmp/esc";
export const RACE = "/tmp/race";
export const REQUEST_TIMEOUT_MS = 60_000;

export const rand = () => randomBytes(12).toString("hex");
/** The canary the unit can see at /.unit/run/<name> (host: the socket dir); the sandbox has a benign file of the same name. */
export const RUN_CANARY = `ums-canary-${rand()}`;
export const OWNED_CANARY = `ums-owned-${rand()}`;
export const secrets = {
  run: `run-secret-${rand()}`,
  owned: `owned-secret-${rand()}`,
  above: `above-secret-${rand()}`,
  data: `data-secret-${rand()}`,
};

/** Symlinks unit root plants in the sandbox (and the unit's own /.unit/logs), for the model below. */
export const LINKS: Record<string, string> = {
  [`${SANDBOX}/to-run`]: "/.unit/run",
  [`${SANDBOX}/to-unit`]: "/.unit",
  [`${SANDBOX}/to-sock`]: "/.unit/run/host.sock",
  [`${SANDBOX}/to-canary`]: `/.unit/run/${RUN_CANARY}`,
  [`${SANDBOX}/rel-run`]: "../../.unit/run",
  [`${SANDBOX}/chain1`]: "chain2",
  [`${SANDBOX}/chain2`]: `${SANDBOX}/chain3`,
  [`${SANDBOX}/chain3`]: "../../.unit/run",
  [`${SANDBOX}/loop1`]: "loop2",
  [`${SANDBOX}/loop2`]: "loop1",
  [`${SANDBOX}/self`]: ".",
  [`${SANDBOX}/dotdot`]: "..",
  [`${SANDBOX}/to-proc-root`]: "/proc/self/root/.unit/run",
  [`${SANDBOX}/to-proc1`]: "/proc/1/root/.unit",
  [`${SANDBOX}/to-proc1-up`]: "/proc/1/root/..",
  [`${SANDBOX}/to-logs`]: "/.unit/logs",
  [`${SANDBOX}/to-policy`]: "/.unit/policy",
  [`${SANDBOX}/to-cp`]: "/.unit/checkpoints",
  [`${SANDBOX}/to-d`]: "d",
  [`${SANDBOX}/d/up`]: "../to-run",
  [`${SANDBOX}/d/to-api`]: "/.unit/api.sock",
};
export const LINK_NAMES = Object.keys(LINKS).map((p) => p.slice(p.lastIndexOf("/") + 1));
/** Magic links of /proc that lead to the unit's root (the agent and its worker run with cwd /). */
const MAGIC: Record<string, string> = { "/proc/self/root": "/", "/proc/1/root": "/", "/proc/self/cwd": "/" };

/** The unit's shell script that (re)plants the sandbox and puts back what earlier cases may have changed. */
export function plantScript(): string {
  const links = Object.entries(LINKS)
    .filter(([p]) => p.startsWith(`${SANDBOX}/`))
    .map(([p, t]) => `ln -sfn '${t}' '${p}'`)
    .join("\n");
  return `set -e
chmod 755 / ; chown 0:0 / ; mkdir -p /tmp /root ; chmod 1777 /tmp ; chown 0:0 /tmp
rm -rf ${SANDBOX} ; mkdir -p ${SANDBOX}/d/sub
printf inside > ${SANDBOX}/d/f ; printf sandbox > ${SANDBOX}/d/${RUN_CANARY} ; mkfifo ${SANDBOX}/d/fifo
perl -MIO::Socket::UNIX -e 'IO::Socket::UNIX->new(Local => "${SANDBOX}/d/s.sock", Listen => 1) or die "$!"'
${links}
chown -hR 1000:1000 ${SANDBOX} ; chmod -R u+rwX ${SANDBOX}`;
}

/**
 * Where `path` (absolute, already normalised by the server) lands when the unit's kernel resolves it,
 * by the planted links: the real path, or "ELOOP". `followLast`: whether a symlink in the last
 * component is followed (open, stat) or acted on (unlink, rename, lstat).
 */
export function realOf(path: string, followLast: boolean, links: Record<string, string>): string {
  const todo = path.split("/").filter(Boolean);
  let cur: string[] = [];
  let hops = 0;
  while (todo.length > 0) {
    const c = todo.shift() as string;
    if (c === ".") continue;
    if (c === "..") {
      cur.pop();
      continue;
    }
    const cand = `/${[...cur, c].join("/")}`;
    const follow = todo.length > 0 || followLast;
    const magic = MAGIC[cand];
    if (follow && magic !== undefined) {
      cur = magic.split("/").filter(Boolean);
      continue;
    }
    const target = links[cand];
    if (follow && target !== undefined) {
      if (++hops > 40) return "ELOOP";
      if (target.startsWith("/")) cur = [];
      todo.unshift(...target.split("/").filter(Boolean));
      continue;
    }
    cur.push(c);
  }
  return `/${cur.join("/")}`;
}

/** How a query string spells the path: as URLSearchParams would, or with dots and slashes %-encoded. */
export type Spelling = "plain" | "dots" | "slashes";

/** A query string with `path` spelled as asked (the server decodes all three to the same path). */
export function queryOf(fields: Record<string, string | boolean>, spelling: Spelling): string {
  return Object.entries(fields)
    .map(([k, v]) => {
      let enc = encodeURIComponent(String(v));
      if (k === "path" && spelling === "dots") enc = enc.replace(/\./g, "%2e");
      if (k === "path" && spelling === "slashes") enc = enc.replace(/%2F/g, "/").replace(/\//g, "%2F");
      return `${k}=${enc}`;
    })
    .join("&");
}

/** What the checks read of an answer (a failed request is status 0 with the error as text). */
export type Answer = Pick<ApiResponse, "status" | "text" | "body">;

/** The filesystem routes of the suite's unit. */
export const ESCAPE_FS = `/v1/units/${UNIT}/fs`;

/** The suite's server and unit, and what its tests call and check them with. */
export interface EscapeUnit {
  readonly s: TestServer;
  readonly token: string;
  call(method: string, path: string, init?: { json?: unknown; body?: string }): Promise<Answer>;
  /** Runs `script` in the unit (as root unless told) and fails unless it exits 0; its stdout. */
  sh(script: string, user?: "root" | "unit"): Promise<string>;
  /** Everything of the host side a unit could reach through /.unit/run, and the canaries. */
  hostSnapshot(): Record<string, string>;
  /** /.unit as the unit sees it (its own tmpfs; the mounts in it are listed, not entered). */
  unitSnapshot(): Promise<string>;
  /** Oracles every answer meets. */
  checkAnswer(label: string, r: Answer): void;
}

/**
 * For the enclosing `describe`: a server on SQLite with the unit, made (and the host canaries planted)
 * before its first test, closed after its last. Returns the suite's handle (usable once made).
 */
export function escapeUnit(): EscapeUnit {
  const sqlite = testDialects[0];
  let s: TestServer;
  let token: string;
  let sockDir = ""; // host side of the unit's /.unit/run (docs/SECURITY.md: host-owned, bound read-only)
  let runDir = ""; // the unit's host run dir above it (the agent's socket is there)
  let hostPaths: string[] = [];
  const base = ESCAPE_FS;

  const call = (method: string, path: string, init: { json?: unknown; body?: string } = {}): Promise<Answer> =>
    s.api(method, path, {
      token,
      ...init,
      ...(init.json === undefined &&
        init.body !== undefined && { headers: { "content-type": "application/octet-stream" } }),
      timeoutMs: REQUEST_TIMEOUT_MS,
    });
  const sh = async (script: string, user: "root" | "unit" = "root") => {
    // cwd /: a case may have taken root's home away
    const r = await execHttp(s.url, token, UNIT, ["sh", "-c", script], { user, dir: "/" });
    assert.equal(r.exitCode, 0, `${script}: ${r.stderr.toString()}`);
    return r.stdout.toString();
  };

  const hostSnapshot = () => {
    const st = (p: string) => {
      const x: Stats = lstatSync(p);
      return `${x.mode.toString(8)} ${x.uid}:${x.gid} ino=${x.ino} size=${x.size} mtime=${x.isDirectory() ? "-" : x.mtimeMs}`;
    };
    const out: Record<string, string> = {};
    for (const n of readdirSync(sockDir)) out[`sock/${n}`] = st(join(sockDir, n));
    out.sockDir = st(sockDir).replace(/ size=\d+/, "");
    out.agentSocket = st(join(runDir, "agent.sock"));
    for (const p of hostPaths) out[p] = `${st(p)} ${readFileSync(p, "utf8")}`;
    return out;
  };
  const unitSnapshot = () =>
    sh("find /.unit -xdev -printf '%p %y %m %U:%G %i\\n' | sort; ls -la --time-style=+ /.unit/policy");

  const checkAnswer = (label: string, r: Answer) => {
    assert.ok(r.status >= 200 && r.status < 500, `${label}: ${r.status} ${r.text.slice(0, 500)}`);
    assert.ok(r.status < 300 || r.status >= 400, `${label}: ${r.status}`);
    for (const secret of Object.values(secrets)) assert.ok(!r.text.includes(secret), `${label} answered a host secret`);
    assert.ok(!r.text.includes(s.config.dataDir), `${label} names a host path: ${r.text.slice(0, 300)}`);
    if (r.status === 403) assert.equal(r.body?.code, FS_RESERVED_PATH, `${label}: ${r.text}`);
  };

  const unit = { call, sh, hostSnapshot, unitSnapshot, checkAnswer } as EscapeUnit; // s and token: once made
  before(async () => {
    if (!sqlite) throw new Error("no sqlite");
    s = await startTestServer(sqlite);
    token = await s.token("escape");
    const created = await s.api("POST", "/v1/units", { token, json: { name: UNIT } });
    assert.equal(created.status, 201, created.text);
    sockDir = dirname(s.server.runtime.hostSocket(created.body.id).path);
    runDir = dirname(s.server.runtime.agentSocket(created.body.id));
    // Wake the unit and both of its filesystem processes (the unit user's worker puts its socket dir in /.unit/run).
    await sh("true");
    assert.equal((await call("PUT", `${base}/write?path=/tmp/warm&workingDir=/`, { body: "w" })).status, 200);
    assert.equal((await call("GET", `${base}/read?path=/tmp/warm&workingDir=/&asRoot=true`)).status, 200);
    // Host canaries: in the directory the unit sees as /.unit/run (one owned by the unit's root, so that
    // only the read-only mount and the API's refusal keep unit root from changing it), in the run dir
    // above it, and in the data dir.
    const unitRoot = s.server.runtime.hostSocket(created.body.id).uid;
    writeFileSync(join(sockDir, RUN_CANARY), secrets.run, { mode: 0o644 });
    writeFileSync(join(sockDir, OWNED_CANARY), secrets.owned, { mode: 0o644 });
    chownSync(join(sockDir, OWNED_CANARY), unitRoot, unitRoot);
    writeFileSync(join(runDir, RUN_CANARY), secrets.above, { mode: 0o644 });
    writeFileSync(join(s.config.dataDir, RUN_CANARY), secrets.data, { mode: 0o644 });
    hostPaths = [
      join(sockDir, RUN_CANARY),
      join(sockDir, OWNED_CANARY),
      join(runDir, RUN_CANARY),
      join(s.config.dataDir, RUN_CANARY),
    ];
    await sh(plantScript());
    const logs = (await sh("readlink /.unit/logs")).trim();
    assert.ok(logs.startsWith("/"), `/.unit/logs links to ${logs}`);
    LINKS["/.unit/logs"] = logs;
    Object.assign(unit, { s, token });
  });
  after(() => s?.close());

  return unit;
}
