import { chmodSync, lstatSync, mkdirSync, unlinkSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { dirname } from "node:path";
import type { Duplex } from "node:stream";
import { AgentErrorCode } from "@ums/protocol/error-codes";
import type { AgentConfig } from "./config.js";
import { serveHttpExec } from "./exec/http-run.js";
import { killSession } from "./exec/kill.js";
import { SessionTable } from "./exec/registry.js";
import { parseExecQuery } from "./exec/request.js";
import { ExecSockets } from "./exec/ws.js";
import { FsRouter } from "./fs/router.js";
import { FsWatchSockets } from "./fs/watch.js";
import { notFound, rejectUpgrade, sendJson, sessionNotFound, validation } from "./http/respond.js";
import { PortWatcher } from "./ports/watch.js";
import { PortSockets } from "./ports/ws.js";
import { serveServiceEvents } from "./services/events.js";
import { serveServices } from "./services/http.js";
import type { Supervisor } from "./services/supervisor.js";
import { Tunnels } from "./tunnel/tunnel.js";
import { log } from "./util/log.js";
import { resolveUser } from "./util/users.js";
import { AGENT_VERSION } from "./version.js";

// The agent's HTTP + websocket API on its Unix socket (docs/ARCHITECTURE.md sections 1 and 3: the host reaches the
// agent over this socket and passes client websocket messages through 1:1):
//   GET  /health                 → {"ok","pid","version","sessions":{"total","attached"}}
//   GET  /exec  (upgrade)        → new exec session (query: cmd, path, tty, stdin, cols, rows, env, dir, user,
//                                  max_run_after_disconnect); with `id` and no `cmd`: attach to that session
//   GET  /exec/{id} (upgrade)    → attach to a live session
//   GET  /exec                   → session list (spec 2.8)
//   POST /exec                   → a non-TTY session as one plain HTTP request (exec/http-run.ts): the body
//                                  is stdin, the answer the frames, each after its length
//   POST /exec/{id}/kill         → kill stream (spec 4.3, 6.3)
//   /fs/{list,read,write,chmod,chown,copy,delete,rename} → filesystem operations (spec 4.4, fs/http.ts)
//   GET  /fs/watch (upgrade)     → file watch websocket (fs/watch.ts)
//   GET  /fs/connect?as= (upgrade: ums-fs) → the connection goes to the fs process of that identity (fs/router.ts)
//   GET  /fs/read?as=&path= (upgrade: ums-fs-bytes) → a raw read by the fs process of that identity (fs/router.ts)
//   GET  /service-events         → NDJSON: services that crashed or were restarted, as it happens (services/events.ts)
//   /services…                   → the unit's services (spec 4.6, services/http.ts), when it has a supervisor
//   GET  /ports/watch (upgrade)  → listening ports, then port_opened/port_closed (spec 6.5, ports/ws.ts)
//   GET  /tunnel?host=&port= (upgrade: ums-tcp) → a TCP connection from inside the unit (tunnel/tunnel.ts)

export interface Agent {
  server: Server;
  sessions: SessionTable;
  close(): Promise<void>;
}

export function createAgent(config: AgentConfig, services?: Supervisor): Agent {
  const sessions = new SessionTable(config);
  const ports = new PortWatcher(config.portPollMs);
  const sockets = new ExecSockets(config, sessions, ports);
  const fsRouter = new FsRouter(config);
  const fsWatch = new FsWatchSockets(config.pingIntervalMs);
  const portSockets = new PortSockets(config, ports);
  const tunnels = new Tunnels();

  const server = createServer((req, res) => {
    handleRequest(req, res).catch((err) => {
      if (!res.headersSent)
        sendJson(res, 500, { error: `internal error: ${(err as Error).message}`, code: AgentErrorCode.Internal });
      else {
        // The answer had begun: it can only be cut short, and the host sees no reason. The log (the
        // unit's agent.log on the host) has it.
        log("a request failed after its answer began", { url: req.url, error: (err as Error).stack ?? String(err) });
        res.destroy();
      }
    });
  });

  // The host is this server's only client, and a request may stream for as long as its process runs
  // (a plain HTTP exec's stdin, a large upload): no cap on the time a request's body takes.
  server.requestTimeout = 0;

  async function handleRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://agent");
    const path = url.pathname.replace(/\/+$/, "") || "/";
    const method = req.method ?? "GET";
    if (method === "GET" && path === "/health") {
      return sendJson(res, 200, { ok: true, pid: process.pid, version: AGENT_VERSION, sessions: sessions.counts() });
    }
    if (method === "GET" && path === "/exec") return sendJson(res, 200, sessions.list());
    if (method === "POST" && path === "/exec") {
      const parsed = parseExecQuery(url.searchParams);
      if (!parsed.ok) return sendJson(res, 400, validation(parsed.errors));
      if (parsed.value.tty) return sendJson(res, 400, validation(["tty: a TTY session needs a websocket (GET /exec)"]));
      const user = resolveUser(config, parsed.value.user);
      if (!user) return sendJson(res, 400, validation([`user: unknown user ${JSON.stringify(parsed.value.user)}`]));
      const refused = sessions.refusal(parsed.value);
      if (refused !== null) return sendJson(res, 409, { error: refused, code: AgentErrorCode.SessionLimit });
      return serveHttpExec(sessions, parsed.value, user, req, res);
    }
    const kill = /^\/exec\/([^/]+)\/kill$/.exec(path);
    if (method === "POST" && kill) {
      const id = kill[1] as string;
      const session = /^\d+$/.test(id) ? sessions.get(Number(id)) : undefined;
      if (!session) return sendJson(res, 404, sessionNotFound(id));
      req.resume();
      return killSession(session, url.searchParams, res);
    }
    const fsOp = /^\/fs\/([a-z]+)$/.exec(path)?.[1];
    if (fsOp && fsOp !== "watch") return fsRouter.handle(req, res, fsOp, url.searchParams);
    if (method === "GET" && path === "/service-events") return serveServiceEvents(req, res);
    if (services && (path === "/services" || path.startsWith("/services/"))) {
      if (await serveServices(services, req, res, path.slice("/services".length), url.searchParams)) return;
    }
    return sendJson(res, 404, notFound(`no route for ${method} ${path}`));
  }

  server.on("upgrade", (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on("error", () => {});
    const url = new URL(req.url ?? "/", "http://agent");
    const path = url.pathname.replace(/\/+$/, "") || "/";
    const q = url.searchParams;
    if (req.method === "GET" && path === "/fs/watch") return fsWatch.upgrade(req, socket, head);
    if (req.method === "GET" && path === "/fs/connect") return fsRouter.connect(req, socket, head, q);
    if (req.method === "GET" && path === "/fs/read") return fsRouter.read(req, socket, head, q);
    if (req.method === "GET" && path === "/ports/watch") return portSockets.upgrade(req, socket, head);
    if (req.method === "GET" && path === "/tunnel") return tunnels.upgrade(req, socket, head, q);
    const attachId = /^\/exec\/([^/]+)$/.exec(path)?.[1] ?? (path === "/exec" && !q.has("cmd") ? q.get("id") : null);
    if (req.method !== "GET" || (path !== "/exec" && !/^\/exec\/[^/]+$/.test(path))) {
      return rejectUpgrade(socket, 404, notFound(`no websocket route for ${req.method} ${path}`));
    }
    if (attachId !== null && attachId !== undefined) {
      const session = /^\d+$/.test(attachId) ? sessions.get(Number(attachId)) : undefined;
      if (!session) return rejectUpgrade(socket, 404, sessionNotFound(attachId));
      return sockets.upgrade(req, socket, head, { kind: "attach", session });
    }
    const parsed = parseExecQuery(q);
    if (!parsed.ok) return rejectUpgrade(socket, 400, validation(parsed.errors));
    const user = resolveUser(config, parsed.value.user);
    if (!user)
      return rejectUpgrade(socket, 400, validation([`user: unknown user ${JSON.stringify(parsed.value.user)}`]));
    const refused = sessions.refusal(parsed.value);
    if (refused !== null) return rejectUpgrade(socket, 409, { error: refused, code: AgentErrorCode.SessionLimit });
    return sockets.upgrade(req, socket, head, { kind: "new", request: parsed.value, user });
  });

  return {
    server,
    sessions,
    close: () =>
      new Promise<void>((resolve) => {
        sessions.terminateAll();
        sockets.close();
        fsWatch.close();
        portSockets.close();
        tunnels.close();
        fsRouter.close();
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** Listens on an inherited descriptor (the host made the socket) or on a Unix socket path. */
export function listen(server: Server, where: { fd: number } | { path: string }): Promise<void> {
  if ("path" in where) return listenUnix(server, where.path);
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen({ fd: where.fd }, () => {
      server.off("error", reject);
      resolve();
    });
  });
}

/** Listens on the Unix socket: a stale socket file is removed first, the new one is made 0600. */
export function listenUnix(server: Server, socketPath: string): Promise<void> {
  mkdirSync(dirname(socketPath), { recursive: true });
  try {
    if (lstatSync(socketPath).isSocket()) unlinkSync(socketPath);
  } catch {
    // no stale socket
  }
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(socketPath, () => {
      server.off("error", reject);
      chmodSync(socketPath, 0o600);
      resolve();
    });
  });
}
