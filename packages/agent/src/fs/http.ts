import { createReadStream } from "node:fs";
import { mkdir } from "node:fs/promises";
import type { IncomingMessage, ServerResponse } from "node:http";
import { dirname, isAbsolute } from "node:path";
import { pipeline } from "node:stream/promises";
import { AgentErrorCode } from "@ums/protocol/error-codes";
import { sendJson, validation } from "../http/respond.js";
import { fsFailure, statusOf, toFsError } from "./errors.js";
import { Guard } from "./guard.js";
import { chmodOp, chownOp, copyOp, deleteOp, list, octal, openForRead, parseMode, renameOp } from "./ops.js";
import { writeFileFrom } from "./write.js";

// The agent's filesystem routes (the host validated the request and resolved `workingDir`; paths are
// absolute here). They run in whichever process has the identity asked for (see worker.ts):
//   GET  /fs/list?path&recursive          → {path, entries, count}
//   GET  /fs/read?path                    → the bytes, streamed, with content-length
//   PUT  /fs/write?path&mode&mkdir        → body streamed into the file, replaced whole (write.ts) → {path, size, mode}
//   POST /fs/chmod {path, mode, recursive}
//   POST /fs/chown {path, uid, gid, recursive}
//   POST /fs/copy {source, dest, recursive, preserveAttrs}
//   POST /fs/delete {path, recursive}
//   POST /fs/rename {source, dest}
// Identity is the query `as=root|user`, decided by the caller of this handler. Errors: fs failures
// `{error, code: <errno>, path}` with statusOf(code); bad input 400 `{errors, code: "UMS_VALIDATION"}`.

const JSON_LIMIT = 1024 * 1024;

class BadRequest extends Error {
  constructor(readonly errors: string[]) {
    super(errors.join("; "));
  }
}

function absPath(value: unknown, field: string): string {
  if (typeof value !== "string" || value === "") throw new BadRequest([`${field}: is required`]);
  if (!isAbsolute(value)) throw new BadRequest([`${field}: must be an absolute path`]);
  if (value.includes("\0")) throw new BadRequest([`${field}: must not contain NUL bytes`]);
  return value;
}

const flag = (v: unknown): boolean => v === true || v === "true" || v === "1";

async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  let size = 0;
  const parts: Buffer[] = [];
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > JSON_LIMIT) throw new BadRequest(["body: is too large"]);
    parts.push(chunk as Buffer);
  }
  if (size === 0) return {};
  try {
    const v = JSON.parse(Buffer.concat(parts).toString("utf8")) as unknown;
    if (v && typeof v === "object" && !Array.isArray(v)) return v as Record<string, unknown>;
  } catch {}
  throw new BadRequest(["body: must be a JSON object"]);
}

export function sendFsError(res: ServerResponse, err: unknown, path: string): void {
  if (err instanceof BadRequest) {
    sendJson(res, 400, validation(err.errors));
    return;
  }
  const e = toFsError(err, path);
  if (res.headersSent) {
    res.destroy(e);
    return;
  }
  sendJson(res, statusOf(e.code), { error: e.message, code: e.code, path: e.path });
}

/** Handles one /fs/* request in this process, with this process's identity. */
export async function handleFs(
  req: IncomingMessage,
  res: ServerResponse,
  op: string,
  q: URLSearchParams,
): Promise<void> {
  let at = q.get("path") ?? "";
  try {
    const method = req.method ?? "GET";
    if (method === "GET" && op === "list") {
      at = absPath(q.get("path"), "path");
      return sendJson(res, 200, await list(at, flag(q.get("recursive")), q.get("pattern")));
    }
    if (method === "GET" && op === "read") {
      at = absPath(q.get("path"), "path");
      return await readOp(at, res);
    }
    if (method === "PUT" && op === "write") {
      at = absPath(q.get("path"), "path");
      const modeText = q.get("mode");
      const mode = modeText ? parseMode(modeText) : null;
      if (modeText && mode === null) throw new BadRequest(["mode: must be an octal permission string such as 0644"]);
      return sendJson(res, 200, await writeOp(at, req, mode, flag(q.get("mkdir")) || flag(q.get("mkdirParents"))));
    }
    if (method !== "POST")
      return sendJson(res, 404, { error: `no route for ${method} /fs/${op}`, code: AgentErrorCode.NotFound });
    const body = await readJson(req);
    at = typeof body.path === "string" ? body.path : typeof body.source === "string" ? body.source : "";
    switch (op) {
      case "chmod": {
        const mode = typeof body.mode === "string" ? parseMode(body.mode) : null;
        const path = absPath(body.path, "path");
        if (mode === null) throw new BadRequest(["mode: must be an octal permission string such as 0644"]);
        return sendJson(res, 200, await chmodOp(path, mode, flag(body.recursive)));
      }
      case "chown": {
        const path = absPath(body.path, "path");
        const owner = (v: unknown, f: string) => {
          if (v === undefined || v === null) return undefined;
          if (typeof v === "number" || typeof v === "string") return v;
          throw new BadRequest([`${f}: must be an integer or a name`]);
        };
        const uid = owner(body.uid, "uid");
        const gid = owner(body.gid, "gid");
        if (uid === undefined && gid === undefined) throw new BadRequest(["uid: uid or gid is required"]);
        return sendJson(res, 200, await chownOp(path, uid, gid, flag(body.recursive)));
      }
      case "copy":
        return sendJson(
          res,
          200,
          await copyOp(
            absPath(body.source, "source"),
            absPath(body.dest, "dest"),
            flag(body.recursive),
            flag(body.preserveAttrs),
          ),
        );
      case "delete":
        return sendJson(res, 200, await deleteOp(absPath(body.path, "path"), flag(body.recursive)));
      case "rename":
        return sendJson(res, 200, await renameOp(absPath(body.source, "source"), absPath(body.dest, "dest")));
      default:
        return sendJson(res, 404, { error: `no route for ${method} /fs/${op}`, code: AgentErrorCode.NotFound });
    }
  } catch (err) {
    sendFsError(res, err, at);
  }
}

async function readOp(path: string, res: ServerResponse): Promise<void> {
  const { fh, size } = await openForRead(path);
  try {
    const headers: Record<string, string | number> = { "content-type": "application/octet-stream" };
    if (size !== undefined) headers["content-length"] = size;
    res.writeHead(200, headers);
    // The stream owns the handle from here (autoClose), and closes it on end, error or destroy.
    const stream = createReadStream("", { fd: fh.fd, autoClose: false, highWaterMark: 256 * 1024 });
    await pipeline(stream, res).finally(() => fh.close().catch(() => {}));
  } catch (err) {
    await fh.close().catch(() => {});
    throw err;
  }
}

/** PUT /fs/write: the body becomes the file's content whole, or the file is left as it was (write.ts). */
async function writeOp(
  path: string,
  req: IncomingMessage,
  mode: number | null,
  mkdirParents: boolean,
): Promise<{ path: string; size: number; mode: string }> {
  const g = new Guard();
  if (mkdirParents) await g.mkdirs(dirname(path), (p) => mkdir(p));
  const { dir, name } = await g.parent(path, "open", { rootCode: "EISDIR" });
  try {
    const st = await writeFileFrom(g, dir, name, path, req, mode);
    return { path, size: st.size, mode: octal(st.mode) };
  } catch (err) {
    throw fsFailure(err, path, "write");
  } finally {
    await dir.close();
  }
}
