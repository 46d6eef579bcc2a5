import { Readable } from "node:stream";
import {
  ErrorCode,
  FsDeleteBody,
  type FsListResponse,
  FsWriteQuery,
  type FsWriteResponse,
  type FsWriteQuery as WriteQuery,
} from "@ums/protocol";
import { readAnswerError } from "../../node/errors.js";
import type { UnitLease } from "../../node/unit-node.js";
import { ApiError } from "../errors.js";
import { deleteAgentBody, listAgentQuery, OPERATIONS } from "../fs/operations.js";
import { resolveIn } from "../fs/paths.js";
import { fsJson, identity } from "../fs/routes.js";
import { ListQuery, ReadQuery } from "../fs/schemas.js";
import { validate } from "../validation.js";
import { argText, type OpArgs } from "./envelope.js";
import { failureOf, type OpDeps } from "./op-deps.js";
import type { OpContext, OpHandle, OpStarter } from "./session.js";

// The filesystem ops of the control websocket (`fs.read`, `fs.write`, `fs.list`, `fs.delete`,
// `fs.chmod`, `fs.chown`, `fs.copy`, `fs.rename`), as the Go client sends them: `args` are the /fs/*
// routes' fields as text (spec 4.4), checked by the same schemas, resolved by the same rules and run by
// the same agent calls, so the answers are the routes' own. The op's answer is one text data frame
// (the route's JSON; on failure the route's `{error, code, path}`), for fs.read followed by one binary
// frame of the bytes, then op.complete (or op.error).

/** `workingDir` when the client sends none (the unit user's home). */
export const DEFAULT_WORKING_DIR = "/home/unit";
/** A file travels in one frame: at most this big, either way (the websocket's own frame limit too). */
export const MAX_FILE_FRAME = 16 * 1024 * 1024;

/** The op's args as the route's fields: text, with the home as `workingDir` unless given. */
function fields(args: OpArgs, drop: readonly string[] = []): Record<string, unknown> {
  const out: Record<string, unknown> = { workingDir: DEFAULT_WORKING_DIR };
  for (const [k, v] of Object.entries(args)) if (!drop.includes(k)) out[k] = v;
  return out;
}

const asRootOf = (b: { asRoot?: boolean }) => b.asRoot ?? false;

/** The JSON answer of one agent call on a lease of its own. */
async function onLease<T>(deps: OpDeps, run: (lease: UnitLease) => Promise<T>): Promise<T> {
  const lease = await deps.leaseUnit();
  try {
    return await run(lease);
  } finally {
    lease.release();
  }
}

/** Runs `work` and answers its result as the op's JSON frame, or its failure. */
function answer(ctx: OpContext, deps: OpDeps, work: () => Promise<unknown>): void {
  work()
    .then(async (result) => {
      await ctx.drained();
      ctx.send(JSON.stringify(result));
      ctx.complete();
    })
    .catch((err) => fsFailed(ctx, deps, err));
}

/** An op that answers one JSON frame (`work` checks its args before it takes a lease). */
function jsonOp(work: (args: OpArgs, deps: OpDeps) => Promise<unknown>): (deps: OpDeps) => OpStarter {
  return (deps) => (ctx) => {
    answer(ctx, deps, () => work(ctx.args, deps));
    return {};
  };
}

/**
 * A failure as the Go client reads it: the route's error body (`{error, code, path}`) as the op's
 * answer frame, then op.error.
 */
function fsFailed(ctx: OpContext, deps: OpDeps, err: unknown): void {
  if (ctx.signal.aborted) return;
  const { failure, internal } = failureOf(err);
  if (internal) deps.logFault(err);
  const { error, code, path } = failure;
  ctx.send(JSON.stringify({ error, code, ...(path !== undefined && { path }) }));
  ctx.fail(failure);
}

const list = jsonOp(async (args, deps) => {
  const f = fields(args);
  if (f.path === undefined) f.path = ".";
  const q = validate<ListFields>(ListQuery, f, "querystring");
  const query = listAgentQuery(q);
  return onLease(deps, (lease) => fsJson<FsListResponse>(lease, q.asRoot, "GET", `/fs/list?${query}`));
});

type ListFields = { path: string; workingDir: string; recursive?: boolean; pattern?: string; asRoot?: boolean };

const remove = jsonOp(async (args, deps) => {
  const b = validate<FsDeleteBody>(FsDeleteBody, fields(args), "querystring");
  const body = JSON.stringify(deleteAgentBody(b));
  return onLease(deps, (lease) =>
    fsJson(lease, asRootOf(b), "POST", "/fs/delete", body, { "content-type": "application/json" }),
  );
});

/** chmod, chown, copy and rename: the routes' table (api/fs/operations.ts). */
function changeOp(name: keyof typeof OPERATIONS) {
  const o = OPERATIONS[name];
  return jsonOp(async (args, deps) => {
    const f = fields(args);
    // Ids come as text; a number is an id, anything else a name (the route's own union).
    for (const k of ["uid", "gid"])
      if (typeof f[k] === "string" && /^\d{1,10}$/.test(f[k] as string)) f[k] = Number(f[k]);
    const b = validate<{ asRoot?: boolean }>(o.body, f, "querystring");
    const body = JSON.stringify(o.agentBody(b));
    return onLease(deps, (lease) =>
      fsJson(lease, asRootOf(b), "POST", `/fs/${name}`, body, { "content-type": "application/json" }),
    );
  });
}

/** `start` and `end` of a read: the bytes [start, end) of the file (end 0 or none: to its end). */
export function readRange(args: OpArgs): { start: number; end: number | undefined } {
  const num = (k: string): number | undefined => {
    const v = argText(args, k);
    if (v === undefined || v === "") return undefined;
    if (!/^\d{1,15}$/.test(v)) throw ApiError.validation([`${k}: must be a byte offset (a non-negative integer)`]);
    return Number(v);
  };
  const start = num("start") ?? 0;
  const end = num("end") || undefined;
  if (end !== undefined && end < start) throw ApiError.validation(["end: must not be before start"]);
  return { start, end };
}

const read =
  (deps: OpDeps): OpStarter =>
  (ctx) => {
    const run = async () => {
      const { start, end } = readRange(ctx.args);
      const q = validate<{ path: string; workingDir: string; asRoot?: boolean }>(
        ReadQuery,
        fields(ctx.args, ["start", "end"]),
        "querystring",
      );
      const path = resolveIn(q.workingDir, q.path);
      const bytes = await onLease(deps, async (lease) => {
        const res = await lease.agent.fs(identity(q.asRoot), "GET", `/fs/read?${new URLSearchParams({ path })}`);
        if (res.statusCode !== 200) throw await readAnswerError(res);
        return collectRange(res, start, end, ctx.signal);
      });
      await ctx.drained();
      ctx.send(JSON.stringify({ path, size: bytes.length }));
      ctx.send(bytes);
      ctx.complete();
    };
    run().catch((err) => fsFailed(ctx, deps, err));
    return {};
  };

/** The bytes [start, end) of a stream, at most MAX_FILE_FRAME of them; stops reading at `end`. */
async function collectRange(stream: Readable, start: number, end: number | undefined, signal: AbortSignal) {
  const parts: Buffer[] = [];
  let offset = 0;
  let kept = 0;
  try {
    for await (const chunk of stream) {
      if (signal.aborted) throw new ApiError(499, ErrorCode.ControlProtocol, "released");
      const c = chunk as Buffer;
      const from = Math.max(0, start - offset);
      const to = end === undefined ? c.length : Math.min(c.length, end - offset);
      offset += c.length;
      if (to > from) {
        kept += to - from;
        if (kept > MAX_FILE_FRAME) {
          throw new ApiError(
            413,
            ErrorCode.PayloadTooLarge,
            `the file is larger than ${MAX_FILE_FRAME} bytes: read it with GET /fs/read, or in ranges (start, end)`,
          );
        }
        parts.push(c.subarray(from, to));
      }
      if (end !== undefined && offset >= end) break;
    }
  } finally {
    stream.destroy();
  }
  return Buffer.concat(parts);
}

/** fs.write: the args, then the file as the op's one binary frame. */
const write =
  (deps: OpDeps): OpStarter =>
  (ctx) => {
    let q: WriteQuery;
    try {
      const f = fields(ctx.args);
      // The Go client sends `mkdirParents=false` only to turn off what it does by default.
      if (f.mkdir === undefined && f.mkdirParents === undefined) f.mkdirParents = "true";
      q = validate<WriteQuery>(FsWriteQuery, f, "querystring");
    } catch (err) {
      fsFailed(ctx, deps, err);
      return {};
    }
    const path = resolveIn(q.workingDir, q.path);
    let taken = false;
    const handle: OpHandle = {
      data(frame) {
        if (taken) {
          fsFailed(
            ctx,
            deps,
            new ApiError(400, ErrorCode.ControlProtocol, "fs.write takes the file as one data frame"),
          );
          return;
        }
        taken = true;
        const p = new URLSearchParams({ path, mkdir: String(q.mkdir === true || q.mkdirParents === true) });
        if (q.mode) p.set("mode", q.mode);
        const headers = { "content-type": "application/octet-stream", "content-length": String(frame.length) };
        const body = Readable.from([frame]);
        answer(ctx, deps, () =>
          onLease(deps, (lease) => fsJson<FsWriteResponse>(lease, q.asRoot, "PUT", `/fs/write?${p}`, body, headers)),
        );
      },
    };
    return handle;
  };

/** The filesystem ops by name. */
export function fsOps(deps: OpDeps): Array<[string, OpStarter]> {
  return [
    ["fs.read", read(deps)],
    ["fs.write", write(deps)],
    ["fs.list", list(deps)],
    ["fs.delete", remove(deps)],
    ["fs.chmod", changeOp("chmod")(deps)],
    ["fs.chown", changeOp("chown")(deps)],
    ["fs.copy", changeOp("copy")(deps)],
    ["fs.rename", changeOp("rename")(deps)],
  ];
}
