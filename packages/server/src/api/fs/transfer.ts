import { IncomingMessage } from "node:http";
import { Type } from "@sinclair/typebox";
import { FsWriteQuery, FsWriteResponse } from "@ums/protocol";
import { metrics } from "../../metrics/server-metrics.js";
import type { ApiInstance } from "../instance.js";
import { UnitParams } from "../schemas.js";
import { firstCall } from "../unit-access/lease.js";
import { resolveIn } from "./paths.js";
import { type FsRoom, identity } from "./routes.js";
import { fsErrors, fsRoute, ReadQuery } from "./schemas.js";

/** Spec 4.4: a file's bytes, read and written as streams (never buffered here). */
export function fsTransferRoutes(app: ApiInstance, room: FsRoom): void {
  const tags = ["filesystem"];

  app.get(
    "/:name/fs/read",
    {
      schema: {
        tags,
        summary: "Read a file: its raw bytes, streamed",
        params: UnitParams,
        querystring: ReadQuery,
        response: {
          200: Type.Unknown({ description: "The file's raw bytes (application/octet-stream)" }),
          ...fsErrors,
        },
      },
    },
    async (req, reply) => {
      const q = req.query;
      const path = resolveIn(q.workingDir, q.path);
      const lease = await room.lease(req);
      const release = () => lease.release();
      const read = await firstCall(lease, () => lease.agent.read(identity(q.asRoot), path));
      if (read instanceof IncomingMessage) {
        // An agent from before raw reads (a unit that has run since before this server was updated)
        // answers the upgrade request as an ordinary one: the bytes come in its response.
        reply.raw.once("close", release);
        read.on("data", (chunk: Buffer) => metrics.fs("read", chunk.length));
        reply.header("content-type", "application/octet-stream");
        const length = read.headers["content-length"];
        if (length !== undefined) reply.header("content-length", length);
        return reply.send(read);
      }
      // The bytes go from the agent's connection to the client's as they come (agent/relay.ts), so the
      // reply is ours from here; it is logged as the onResponse hook logs the others.
      reply.hijack();
      const start = performance.now();
      reply.raw.writeHead(200, {
        "content-type": "application/octet-stream",
        ...(read.size !== undefined && { "content-length": read.size }),
      });
      const complete = await read.relayTo(reply.raw, (n) => metrics.fs("read", n));
      release();
      req.log.info(
        {
          method: req.method,
          url: req.originalUrl,
          status: 200,
          ms: Math.round((performance.now() - start) * 100) / 100,
          complete,
        },
        "request",
      );
    },
  );

  // Writes take the raw body as a stream: no parser of this scope reads it.
  app.register(async (scope) => {
    const raw = scope as unknown as ApiInstance;
    raw.removeAllContentTypeParsers();
    raw.addContentTypeParser("*", (_req, _payload, done) => done(null));
    raw.put(
      "/:name/fs/write",
      fsRoute(
        "Write a file from the raw request body (streamed); creates it, or replaces it whole once the body has arrived complete (a written temporary file renamed over it: a cut-short upload leaves the file as it was; a file with other hard links, or a mount point, is written in place)",
        FsWriteQuery,
        FsWriteResponse,
      ),
      async (req) => {
        const q = req.query;
        const path = resolveIn(q.workingDir, q.path);
        const p = new URLSearchParams({
          path,
          mkdir: String(q.mkdir === true || q.mkdirParents === true),
        });
        if (q.mode) p.set("mode", q.mode);
        const headers: Record<string, string> = { "content-type": "application/octet-stream" };
        const length = req.headers["content-length"];
        if (length !== undefined) headers["content-length"] = length;
        const written = await room.call<FsWriteResponse>(req, q.asRoot, "PUT", `/fs/write?${p}`, req.raw, headers);
        metrics.fs("write", written.size);
        return written;
      },
    );
  });
}
