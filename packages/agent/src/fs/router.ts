import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { AgentErrorCode } from "@ums/protocol/error-codes";
import type { AgentConfig } from "../config.js";
import { rejectUpgrade, validation } from "../http/respond.js";
import { handleFs } from "./http.js";
import { fsUpgrade, isRawRead, RAW_READ, rawReadAt } from "./raw-read.js";
import { FsWorker, SWITCHING } from "./worker.js";

// Routes /fs/* requests to the process with the identity asked for (query `as=root|user`, default user):
// the agent itself when that identity is its own (root, or a test agent running as the unit user), else
// the unit user's worker process (worker.ts).
//   - plain requests: /fs/{op} handled here, or proxied to the worker;
//   - GET /fs/connect?as=… with `Upgrade: ums-fs`: answered 101, then the connection itself goes to the
//     process with that identity, which serves HTTP/1.1 /fs/{op} requests on it (the host's path: the
//     bytes of a read or write then never pass through the agent when a worker does the work), and
//     raw reads (GET /fs/read upgraded to ums-fs-bytes, raw-read.ts);
//   - GET /fs/read?as=…&path=… with `Upgrade: ums-fs-bytes` on the agent's own socket: a raw read in
//     one exchange instead of two (the connection and the read), the connection handed over with the
//     read to do on it; the process with the identity asked for answers it (`read`).

export class FsRouter {
  private worker: FsWorker | null = null;
  private readonly local: Server;

  constructor(
    private readonly config: AgentConfig,
    private readonly entry: string = process.argv[1] ?? "",
  ) {
    this.local = createServer((req, res) => {
      const url = new URL(req.url ?? "/", "http://agent");
      const op = /^\/fs\/([a-z]+)$/.exec(url.pathname)?.[1] ?? "";
      handleFs(req, res, op, url.searchParams).catch(() => res.destroy());
    });
    this.local.on("upgrade", fsUpgrade);
  }

  /** Whether this process itself has the identity (an agent that is not root works as itself). */
  private isLocal(asRoot: boolean): boolean {
    const myUid = process.getuid?.() ?? 0;
    const targetUid = asRoot ? 0 : this.config.user.uid;
    return targetUid === myUid || myUid !== 0;
  }

  private getWorker(): FsWorker {
    this.worker ??= new FsWorker(this.config.user.uid, this.config.user.gid, this.config.runDir, this.entry);
    return this.worker;
  }

  async handle(req: IncomingMessage, res: ServerResponse, op: string, q: URLSearchParams): Promise<void> {
    if (this.isLocal(q.get("as") === "root")) return handleFs(req, res, op, q);
    return this.getWorker().forward(req, res);
  }

  /** GET /fs/connect (upgrade): hands the connection to the process with the identity asked for. */
  connect(req: IncomingMessage, socket: Duplex, head: Buffer, q: URLSearchParams): void {
    const as = q.get("as") ?? "user";
    if (as !== "user" && as !== "root") {
      rejectUpgrade(socket, 400, validation(["as: must be user or root"]));
      return;
    }
    if ((req.headers.upgrade ?? "").toLowerCase() !== "ums-fs" || head.length > 0) {
      rejectUpgrade(socket, 400, validation(["upgrade: must be ums-fs, with no data before the 101"]));
      return;
    }
    const sock = socket as Socket;
    // Whoever serves the connection writes the 101; the client sends its request only after it, so the
    // connection can change hands before any of its bytes has been read here.
    if (this.isLocal(as === "root")) {
      sock.write(SWITCHING);
      // The agent's HTTP server read this connection in C++ until the upgrade and left it marked as
      // read so (node's `_consumed`, set on the handle, never cleared): unmarked, the fs server's parser
      // reads it the same way, instead of through a new JS buffer per 64 KiB read (a 1 GiB write as
      // root cost twice the worker's CPU before).
      const handle = (sock as unknown as { _handle?: { _consumed?: boolean } })._handle;
      if (handle?._consumed) handle._consumed = false;
      this.local.emit("connection", sock);
      sock.resume();
    } else this.workerFor(socket)?.adopt(sock);
  }

  /**
   * GET /fs/read?as=…&path=… (upgrade to ums-fs-bytes) on the agent's socket: the raw read, done by
   * the process with the identity asked for (the unit user's worker gets the connection and the
   * read's URL; it checks the path as it checks any raw read's).
   */
  read(req: IncomingMessage, socket: Duplex, head: Buffer, q: URLSearchParams): void {
    const as = q.get("as") ?? "user";
    if (as !== "user" && as !== "root") {
      rejectUpgrade(socket, 400, validation(["as: must be user or root"]));
      return;
    }
    if (!isRawRead(req) || head.length > 0) {
      rejectUpgrade(socket, 400, validation([`upgrade: must be ${RAW_READ}, with no data before the 101`]));
      return;
    }
    if (this.isLocal(as === "root")) rawReadAt(req.url ?? "/", socket);
    else this.workerFor(socket)?.adopt(socket as Socket, { read: req.url ?? "/" });
  }

  /** The unit user's worker, for an upgraded connection; refused (500) when it cannot start. */
  private workerFor(socket: Duplex): FsWorker | undefined {
    try {
      return this.getWorker();
    } catch (err) {
      // Its socket's directory could not be made (see FsWorker): an answer, not a connection left hanging.
      const error = `the unit user's filesystem process could not start: ${(err as Error).message}`;
      rejectUpgrade(socket, 500, { error, code: AgentErrorCode.Internal });
      return undefined;
    }
  }

  close(): void {
    this.worker?.close();
    this.worker = null;
    this.local.close();
    this.local.closeAllConnections();
  }
}
