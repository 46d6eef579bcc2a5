import {
  FsChmodBody,
  FsChmodResponse,
  FsChownBody,
  FsChownResponse,
  FsCopyBody,
  FsCopyResponse,
  FsDeleteBody,
  FsDeleteResponse,
  FsListResponse,
  FsRenameBody,
  FsRenameResponse,
} from "@ums/protocol";
import { readJson } from "../../node/errors.js";
import { ApiError } from "../errors.js";
import type { ApiInstance } from "../instance.js";
import { UnitParams } from "../schemas.js";
import { validate } from "../validation.js";
import { resolveIn } from "./paths.js";
import { type FsRoom, identity } from "./routes.js";
import { fsErrors, ListQuery } from "./schemas.js";

/** Spec 4.4: listing and the JSON operations (chmod, chown, copy, rename, delete). */
export function fsOperationRoutes(app: ApiInstance, room: FsRoom): void {
  const tags = ["filesystem"];

  app.get(
    "/v1/units/:name/fs/list",
    {
      schema: {
        tags,
        summary: "List a directory (a file lists as its one entry)",
        params: UnitParams,
        querystring: ListQuery,
        response: { 200: FsListResponse, ...fsErrors },
      },
    },
    async (req) => {
      const q = req.query;
      const path = resolveIn(q.workingDir, q.path);
      const lease = await room.lease(req);
      try {
        const p = new URLSearchParams({ path, recursive: String(q.recursive ?? false) });
        if (q.pattern) p.set("pattern", q.pattern);
        const res = await lease.agent.fs(identity(q.asRoot), "GET", `/fs/list?${p}`);
        return await readJson<FsListResponse>(res);
      } finally {
        lease.release();
      }
    },
  );

  app.post(
    "/v1/units/:name/fs/chmod",
    {
      schema: {
        tags,
        summary: "Change permissions",
        params: UnitParams,
        body: FsChmodBody,
        response: { 200: FsChmodResponse, ...fsErrors },
      },
    },
    async (req) => {
      const b = req.body;
      return (await room.jsonOp(req, "chmod", b.asRoot, {
        path: resolveIn(b.workingDir, b.path),
        mode: b.mode,
        recursive: b.recursive ?? false,
      })) as FsChmodResponse;
    },
  );

  app.post(
    "/v1/units/:name/fs/chown",
    {
      schema: {
        tags,
        summary: "Change owner and group (ids or names; at least one of uid and gid)",
        params: UnitParams,
        body: FsChownBody,
        response: { 200: FsChownResponse, ...fsErrors },
      },
    },
    async (req) => {
      const b = req.body;
      if (b.uid === undefined && b.gid === undefined) throw ApiError.validation(["uid: uid or gid is required"]);
      return (await room.jsonOp(req, "chown", b.asRoot, {
        path: resolveIn(b.workingDir, b.path),
        ...(b.uid !== undefined && { uid: b.uid }),
        ...(b.gid !== undefined && { gid: b.gid }),
        recursive: b.recursive ?? false,
      })) as FsChownResponse;
    },
  );

  app.post(
    "/v1/units/:name/fs/copy",
    {
      schema: {
        tags,
        summary: "Copy a file, or a directory with recursive (into dest when dest is a directory)",
        params: UnitParams,
        body: FsCopyBody,
        response: { 200: FsCopyResponse, ...fsErrors },
      },
    },
    async (req) => {
      const b = req.body;
      return (await room.jsonOp(req, "copy", b.asRoot, {
        source: resolveIn(b.workingDir, b.source, "source"),
        dest: resolveIn(b.workingDir, b.dest, "dest"),
        recursive: b.recursive ?? false,
        preserveAttrs: b.preserveAttrs ?? false,
      })) as FsCopyResponse;
    },
  );

  app.post(
    "/v1/units/:name/fs/rename",
    {
      schema: {
        tags,
        summary: "Rename (move) a path",
        params: UnitParams,
        body: FsRenameBody,
        response: { 200: FsRenameResponse, ...fsErrors },
      },
    },
    async (req) => {
      const b = req.body;
      return (await room.jsonOp(req, "rename", b.asRoot, {
        source: resolveIn(b.workingDir, b.source, "source"),
        dest: resolveIn(b.workingDir, b.dest, "dest"),
      })) as FsRenameResponse;
    },
  );

  // A JSON body, or the same fields as query parameters (clients that send no body with a DELETE).
  app.delete(
    "/v1/units/:name/fs/delete",
    {
      schema: {
        tags,
        summary: "Delete a path (JSON body, or the same fields as query parameters)",
        params: UnitParams,
        response: { 200: FsDeleteResponse, ...fsErrors },
      },
    },
    async (req) => {
      const hasBody = req.body !== undefined && req.body !== null;
      const b = hasBody
        ? validate<FsDeleteBody>(FsDeleteBody, req.body, "body")
        : validate<FsDeleteBody>(FsDeleteBody, { ...(req.query as object) }, "querystring");
      return (await room.jsonOp(req, "delete", b.asRoot, {
        path: resolveIn(b.workingDir, b.path),
        recursive: b.recursive ?? false,
      })) as FsDeleteResponse;
    },
  );
}
