import type { IncomingMessage, ServerResponse } from "node:http";
import type { ServiceEvent } from "@ums/protocol";
import { parseDuration } from "@ums/protocol/duration";
import { AgentErrorCode } from "@ums/protocol/error-codes";
import { sendJson, validation } from "../http/respond.js";
import { parseSignal } from "../util/signals.js";
import { STOP_GRACE_MS } from "./service.js";
import { DependencyError, type Supervisor } from "./supervisor.js";

// The services routes (spec 4.6 and 4.7), served twice with the same code: under /services on the
// agent socket (ums calls them for the external API) and under /v1/services on /.unit/api.sock.
//   GET    {p}                       list            GET  {p}/{name}/logs?lines&duration  log stream
//   GET    {p}/{name}                one             POST {p}/{name}/start|restart?duration
//   PUT    {p}/{name}?duration       create/update   POST {p}/{name}/stop?timeout (grace before SIGKILL)
//   DELETE {p}/{name}                204             POST {p}/signal  {name, signal}
// Streams are NDJSON (spec 6.4); `duration` is seconds or `10s` style; 0 = no stream (PUT) / no follow.
// A DELETE answers once the service's processes are gone (SIGTERM, SIGKILL after the grace).

const MAX_FOLLOW_MS = 3600_000;
const MAX_STOP_TIMEOUT_MS = 60_000;
const DEFAULT_MONITOR_MS = 5000;

/** Handles `rest` (the path after the prefix); false when it is no services route. */
export async function serveServices(
  sup: Supervisor,
  req: IncomingMessage,
  res: ServerResponse,
  rest: string,
  q: URLSearchParams,
  /** Called after a definition was created, changed or deleted. */
  onChange: () => void = () => {},
): Promise<boolean> {
  const method = req.method ?? "GET";
  let parts: string[];
  try {
    parts = rest
      .split("/")
      .filter((p) => p !== "")
      .map(decodeURIComponent);
  } catch {
    req.resume();
    return done(sendJson(res, 400, validation(["service: the path is not valid percent-encoding"])));
  }
  if (parts.length === 0 && method === "GET") return done(sendJson(res, 200, sup.list()));
  if (parts.length === 1 && parts[0] === "signal" && method === "POST") return done(await signal(sup, req, res));
  const name = parts[0];
  if (name === undefined || parts.length > 2) return false;
  const action = parts[1];
  if (method === "PUT" && !action) return done(await put(sup, name, req, res, q, onChange));
  if (!sup.has(name)) {
    req.resume();
    return done(
      sendJson(res, 404, { error: `no service '${name}' in this unit`, code: AgentErrorCode.ServiceNotFound }),
    );
  }
  const duration = (dflt: number) => durationOf(q.get("duration"), dflt);
  if (method === "GET" && !action) return done(sendJson(res, 200, sup.describe(name)));
  if (method === "DELETE" && !action) {
    try {
      await sup.remove(name);
      onChange();
    } catch (err) {
      if (!(err instanceof DependencyError)) throw err;
      return done(sendJson(res, 409, { error: err.message, code: AgentErrorCode.ServiceNeeded }));
    }
    res.writeHead(204).end();
    return true;
  }
  const ms = duration(action === "logs" ? 0 : DEFAULT_MONITOR_MS);
  if (ms === null) return done(sendJson(res, 400, validation(["duration: must be seconds or a duration like 10s"])));
  if (method === "GET" && action === "logs") {
    const lines = q.get("lines");
    if (lines !== null && !/^\d{1,9}$/.test(lines))
      return done(sendJson(res, 400, validation(["lines: must be a non-negative integer"])));
    return done(
      await stream(sup, name, res, ms, async (send) => {
        for (const e of sup.service(name)?.log.tail(lines === null ? undefined : Number(lines)) ?? []) send(e);
      }),
    );
  }
  if (method !== "POST") return false;
  const s = sup.service(name);
  if (action === "start") return done(await stream(sup, name, res, ms, () => sup.start(name, true)));
  if (action === "stop") {
    const grace = durationOf(q.get("timeout"), STOP_GRACE_MS);
    if (grace === null || grace > MAX_STOP_TIMEOUT_MS)
      return done(sendJson(res, 400, validation(["timeout: must be seconds or a duration like 10s, at most 60s"])));
    return done(
      await stream(sup, name, res, 0, async (send) => {
        const code = await sup.stop(name, grace);
        send({ type: "stopped", exit_code: code, timestamp: Date.now() });
      }),
    );
  }
  if (action === "restart") {
    return done(
      await stream(sup, name, res, ms, async (send) => {
        if (s?.alive) send({ type: "stopped", exit_code: await s.stop(), timestamp: Date.now() });
        await sup.start(name, true);
      }),
    );
  }
  return false;
}

/** Marks a route as answered (the handlers return nothing). */
const done = (..._answered: unknown[]): true => true;

function durationOf(value: string | null, dflt: number): number | null {
  if (value === null || value === "") return dflt;
  const ms = parseDuration(value);
  return ms === null ? null : Math.min(ms, MAX_FOLLOW_MS);
}

async function put(
  sup: Supervisor,
  name: string,
  req: IncomingMessage,
  res: ServerResponse,
  q: URLSearchParams,
  onChange: () => void,
) {
  const ms = durationOf(q.get("duration"), DEFAULT_MONITOR_MS);
  const body = await jsonBody(req, res, 'body: must be a JSON ServiceRequest like {"cmd": "..."}');
  if (body === undefined) return;
  if (ms === null) return sendJson(res, 400, validation(["duration: must be seconds or a duration like 10s"]));
  const checked = await sup.put(name, body);
  if (!checked.ok) return sendJson(res, checked.status, { errors: checked.errors, code: checked.code });
  onChange();
  if (ms === 0) {
    // start() marks the service `starting` before its first wait: the answer shows it (spec 3.2).
    const started = sup.start(name, true).catch(() => {});
    sendJson(res, 200, sup.describe(name));
    return started;
  }
  await stream(sup, name, res, ms, () => sup.start(name, true));
}

/** An NDJSON stream of the service's events: `first` runs after subscribing; then `ms` of follow. */
async function stream(
  sup: Supervisor,
  name: string,
  res: ServerResponse,
  ms: number,
  first: (send: (e: ServiceEvent) => void) => Promise<void>,
): Promise<void> {
  const s = sup.service(name);
  if (!s) return;
  res.writeHead(200, { "content-type": "application/x-ndjson", "cache-control": "no-store" });
  const send = (e: ServiceEvent) => {
    if (!res.writableEnded && !res.destroyed) res.write(`${JSON.stringify(e)}\n`);
  };
  const off = s.log.subscribe(send);
  let timer: NodeJS.Timeout | undefined;
  const closed = new Promise<void>((r) => res.once("close", r));
  try {
    await first(send);
    if (ms > 0) await Promise.race([new Promise((r) => (timer = setTimeout(r, ms))), closed]);
  } catch (err) {
    send({ type: "error", data: (err as Error).message, timestamp: Date.now() });
  } finally {
    off();
    if (timer) clearTimeout(timer);
  }
  send({ type: "complete", log_files: sup.logFiles(name), timestamp: Date.now() });
  res.end();
}

async function signal(sup: Supervisor, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const body = (await jsonBody(req, res, 'body: must be JSON like {"name": "web", "signal": "TERM"}')) as
    | { name?: unknown; signal?: unknown }
    | undefined;
  if (body === undefined) return;
  const errors: string[] = [];
  if (typeof body?.name !== "string" || body.name === "") errors.push("name: is required (the service)");
  const sig = typeof body?.signal === "string" ? parseSignal(body.signal) : null;
  if (!sig) errors.push("signal: must be a signal name such as TERM, KILL or HUP");
  if (errors.length > 0 || !sig) return sendJson(res, 400, validation(errors));
  const s = sup.service(body.name as string);
  if (!s)
    return sendJson(res, 404, {
      error: `no service '${body.name}' in this unit`,
      code: AgentErrorCode.ServiceNotFound,
    });
  const pid = s.pid;
  if (!s.alive || !s.signal(sig.name))
    return sendJson(res, 409, { error: `service '${s.name}' is not running`, code: AgentErrorCode.ServiceNotRunning });
  sendJson(res, 200, { name: s.name, signal: sig.name.replace(/^SIG/, ""), pid });
}

/** The request's body parsed as JSON; undefined, after answering 400 with `error`, when it is not JSON. */
async function jsonBody(req: IncomingMessage, res: ServerResponse, error: string): Promise<unknown> {
  try {
    return JSON.parse(await readBody(req)) as unknown;
  } catch {
    sendJson(res, 400, { error, code: AgentErrorCode.BadJson });
    return undefined;
  }
}

function readBody(req: IncomingMessage, limit = 1024 * 1024): Promise<string> {
  return new Promise((resolve, reject) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (d: string) => {
      body += d;
      if (body.length > limit) {
        reject(new Error("body too large"));
        req.destroy();
      }
    });
    req.on("end", () => resolve(body));
    req.on("error", reject);
  });
}
