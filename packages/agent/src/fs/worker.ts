import { type ChildProcess, spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { createServer, Agent as HttpAgent, type IncomingMessage, request, type ServerResponse } from "node:http";
import { connect, createServer as createNetServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import { AgentErrorCode } from "@ums/protocol/error-codes";
import { sendJson } from "../http/respond.js";
import { privateRunSubdir } from "../util/run-dir.js";
import { handleFs } from "./http.js";
import { fsUpgrade, rawReadAt } from "./raw-read.js";

// Filesystem operations run with the identity asked for: the unit user (uid/gid 1000) unless `asRoot`.
//
// Why a long-lived worker process per identity, and not seteuid or a process per request:
// - seteuid/setegid switch the credentials of the whole process (glibc applies them to every thread),
//   and node runs fs calls on its libuv thread pool: while one request holds euid 1000, another request's
//   open() on a pool thread would run with the wrong identity. Not safe in an agent serving many requests.
// - a process per request costs a node start-up (~40 ms and ~40 MB) on every list or stat.
// So the agent (the unit's root) does `asRoot` work itself, and hands everything else to one worker
// process started with the unit user's uid/gid (no supplementary groups): the kernel checks every open,
// mkdir, chmod… against that identity, exactly as for a process of the unit user.
//
// The worker is the same bundle started with `--fs-worker`, serving the same HTTP handler (http.ts). The
// agent reaches it over a private Unix socket that only the agent can connect to (a 0700 directory of
// the agent's): each accepted connection is handed, unread (pauseOnConnect), to the worker over the IPC
// channel, so the worker never needs a socket path of its own and no other process of the unit can reach
// it. Request and response bodies are piped with backpressure, so a 1 GiB file goes through with flat
// memory. The worker is started on first use and again after it dies.
//
// The host does not even pay for that proxy hop on its own requests: it opens each filesystem
// connection with `GET /fs/connect?as=user|root` (Upgrade: ums-fs); the agent answers 101 and hands the
// raw connection to the process with that identity (the worker, over IPC; or its own fs HTTP server),
// and the host then speaks plain HTTP on it to that process directly (router.ts).

export class FsWorker {
  private child: ChildProcess | null = null;
  private readonly dir: string;
  private readonly listener: Server;
  private readonly sockPath: string;
  private readonly agent: HttpAgent;
  private listening: Promise<void>;
  private closed = false;

  constructor(
    private readonly uid: number,
    private readonly gid: number,
    runDir: string,
    private readonly entry: string,
  ) {
    this.dir = privateRunSubdir(runDir, ".fs-worker-");
    this.sockPath = join(this.dir, `${uid}.sock`);
    this.listener = createNetServer({ pauseOnConnect: true }, (s) => this.handOver(s));
    this.listening = new Promise((resolve, reject) => {
      this.listener.once("error", reject);
      this.listener.listen(this.sockPath, () => resolve());
    });
    this.listening.catch(() => {});
    this.agent = new HttpAgent({ keepAlive: true, maxSockets: 64 });
    (this.agent as unknown as { createConnection: () => Socket }).createConnection = () => connect(this.sockPath);
  }

  /** Connections waiting for a new worker to say it is ready (IPC messages sent earlier could be lost). */
  private waiting: { socket: Socket; kind: Handover }[] = [];
  private ready = false;

  private ensureChild(): ChildProcess {
    if (this.child && this.child.exitCode === null && this.child.connected) return this.child;
    this.ready = false;
    const child = spawn(process.execPath, [this.entry, "--fs-worker"], {
      uid: this.uid,
      gid: this.gid,
      cwd: "/",
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: "/", LANG: "C.UTF-8" },
      stdio: ["ignore", "ignore", "inherit", "ipc"],
    });
    child.on("error", () => {});
    child.on("message", (msg) => {
      if (msg !== "ready" || this.child !== child) return;
      this.ready = true;
      for (const w of this.waiting.splice(0)) this.send(child, w.socket, w.kind);
    });
    child.on("exit", () => {
      if (this.child !== child) return;
      this.child = null;
      for (const w of this.waiting.splice(0)) w.socket.destroy();
    });
    this.child = child;
    return child;
  }

  /**
   * Gives an already open connection to the worker: an upgraded /fs/connect, on which it serves HTTP
   * (it writes the 101 itself: the client sends nothing before it, so no byte is read here), or one
   * whose request was a raw read (`{read: url}`, router.ts `read`), which it does.
   */
  adopt(socket: Socket, kind: Exclude<Handover, "conn"> = "upgrade"): void {
    // Stop reading at the handle, not just the stream: until the handle is sent and closed here, this
    // process must not take bytes meant for the worker.
    socket.pause();
    (socket as unknown as { _handle?: { readStop?: () => number } })._handle?.readStop?.();
    this.handOver(socket, kind);
  }

  private handOver(socket: Socket, kind: Handover = "conn"): void {
    if (this.closed) return void socket.destroy();
    const child = this.ensureChild();
    if (this.ready) this.send(child, socket, kind);
    else this.waiting.push({ socket, kind });
  }

  private send(child: ChildProcess, socket: Socket, kind: Handover): void {
    try {
      child.send(kind, socket, (err) => {
        if (err) socket.destroy();
      });
    } catch {
      socket.destroy();
    }
  }

  /** Passes one HTTP request through to the worker and its answer back, streaming both ways. */
  async forward(req: IncomingMessage, res: ServerResponse): Promise<void> {
    await this.listening;
    const headers = { ...req.headers };
    delete headers.connection;
    const out = request({ agent: this.agent, method: req.method, path: req.url, headers }, (answer) => {
      const h = { ...answer.headers };
      delete h.connection;
      delete h["keep-alive"];
      res.writeHead(answer.statusCode ?? 500, h);
      answer.pipe(res);
      answer.on("error", () => res.destroy());
      answer.on("aborted", () => res.destroy());
    });
    out.on("error", (err) => {
      if (!res.headersSent) {
        sendJson(res, 500, { error: `filesystem worker failed: ${err.message}`, code: AgentErrorCode.Internal });
      } else res.destroy();
    });
    res.on("close", () => {
      if (!res.writableFinished) out.destroy();
    });
    req.pipe(out);
  }

  close(): void {
    this.closed = true;
    this.agent.destroy();
    this.listener.close();
    this.child?.kill("SIGTERM");
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/**
 * What a connection handed to the worker is for: plain requests (`conn`), an upgraded /fs/connect
 * (`upgrade`: the worker writes the 101), or the raw read whose request the agent read (`{read}`).
 */
type Handover = "conn" | "upgrade" | { read: string };

/** The answer to GET /fs/connect, written by the process that serves the connection. */
export const SWITCHING = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: ums-fs\r\n\r\n";

/** The `--fs-worker` process: serves handleFs on connections handed over by the agent. */
export function runFsWorker(): void {
  if (!process.send) {
    process.stderr.write("--fs-worker must be started by the agent\n");
    process.exit(2);
  }
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? "/", "http://worker");
    const op = /^\/fs\/([a-z]+)$/.exec(url.pathname)?.[1] ?? "";
    handleFs(req, res, op, url.searchParams).catch(() => res.destroy());
  });
  server.keepAliveTimeout = 60_000;
  server.on("upgrade", fsUpgrade);
  process.on("message", (msg, handle) => {
    if ((msg === "conn" || msg === "upgrade") && handle) {
      const s = handle as Socket;
      if (msg === "upgrade") s.write(SWITCHING);
      server.emit("connection", s);
      s.resume();
    } else if (handle && typeof (msg as { read?: unknown })?.read === "string") {
      rawReadAt((msg as { read: string }).read, handle as Socket);
    }
  });
  process.send?.("ready");
  // The agent is gone (or restarts it): leave with it.
  process.on("disconnect", () => process.exit(0));
  process.on("uncaughtException", (err) => process.stderr.write(`fs worker: ${err.stack ?? err}\n`));
}
