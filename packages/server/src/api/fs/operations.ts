import type { TSchema } from "@sinclair/typebox";
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
import { ApiError } from "../errors.js";
import type { ApiInstance } from "../instance.js";
import { UnitParams } from "../schemas.js";
import { validate } from "../validation.js";
import { resolveIn } from "./paths.js";
import type { FsRoom } from "./routes.js";
import { fsErrors, fsRoute, ListQuery } from "./schemas.js";

/** The two paths of a copy or a rename, resolved. */
const sourceAndDest = (b: { workingDir: string; source: string; dest: string }) => ({
  source: resolveIn(b.workingDir, b.source, "source"),
  dest: resolveIn(b.workingDir, b.dest, "dest"),
});

/** Fields every JSON operation's body has (spec 4.4). */
interface OpBody {
  readonly workingDir: string;
  readonly asRoot?: boolean;
  readonly recursive?: boolean;
}

/**
 * One JSON operation: its body schema, its answer, and the body the agent gets (paths resolved
 * against `workingDir`, defaults filled in; packages/agent/src/fs/router.ts).
 */
export interface JsonOperation {
  readonly summary: string;
  readonly body: TSchema;
  readonly response: TSchema;
  // biome-ignore lint/suspicious/noExplicitAny: each operation's body is typed by its own schema.
  readonly agentBody: (b: any) => object;
}

export const OPERATIONS: Readonly<Record<"chmod" | "chown" | "copy" | "rename", JsonOperation>> = {
  chmod: {
    summary: "Change permissions",
    body: FsChmodBody,
    response: FsChmodResponse,
    agentBody: (b: FsChmodBody) => ({
      path: resolveIn(b.workingDir, b.path),
      mode: b.mode,
      recursive: b.recursive ?? false,
    }),
  },
  chown: {
    summary: "Change owner and group (ids or names; at least one of uid and gid)",
    body: FsChownBody,
    response: FsChownResponse,
    agentBody: (b: FsChownBody) => {
      if (b.uid === undefined && b.gid === undefined) throw ApiError.validation(["uid: uid or gid is required"]);
      return {
        path: resolveIn(b.workingDir, b.path),
        ...(b.uid !== undefined && { uid: b.uid }),
        ...(b.gid !== undefined && { gid: b.gid }),
        recursive: b.recursive ?? false,
      };
    },
  },
  copy: {
    summary: "Copy a file, or a directory with recursive (into dest when dest is a directory)",
    body: FsCopyBody,
    response: FsCopyResponse,
    agentBody: (b: FsCopyBody) => ({
      ...sourceAndDest(b),
      recursive: b.recursive ?? false,
      preserveAttrs: b.preserveAttrs ?? false,
    }),
  },
  rename: {
    summary: "Rename (move) a path",
    body: FsRenameBody,
    response: FsRenameResponse,
    agentBody: sourceAndDest,
  },
};

/** Delete's body for the agent (its fields come as a JSON body or as query parameters). */
export const deleteAgentBody = (b: FsDeleteBody) => ({
  path: resolveIn(b.workingDir, b.path),
  recursive: b.recursive ?? false,
});

/** List's query for the agent. */
export function listAgentQuery(q: { path: string; workingDir: string; recursive?: boolean; pattern?: string }): string {
  const p = new URLSearchParams({ path: resolveIn(q.workingDir, q.path), recursive: String(q.recursive ?? false) });
  if (q.pattern) p.set("pattern", q.pattern);
  return p.toString();
}

/** Spec 4.4: listing and the JSON operations (chmod, chown, copy, rename, delete). */
export function fsOperationRoutes(app: ApiInstance, room: FsRoom): void {
  const tags = ["filesystem"];

  app.get(
    "/:name/fs/list",
    fsRoute("List a directory (a file lists as its one entry)", ListQuery, FsListResponse),
    async (req) => {
      const q = req.query;
      return room.call<FsListResponse>(req, q.asRoot, "GET", `/fs/list?${listAgentQuery(q)}`);
    },
  );

  for (const [op, o] of Object.entries(OPERATIONS)) {
    app.post(
      `/:name/fs/${op}`,
      {
        schema: {
          tags,
          summary: o.summary,
          params: UnitParams,
          body: o.body,
          response: { 200: o.response, ...fsErrors },
        },
      },
      async (req) => {
        const b = req.body as OpBody;
        return room.jsonOp(req, op, b.asRoot, o.agentBody(b));
      },
    );
  }

  // A JSON body, or the same fields as query parameters (clients that send no body with a DELETE).
  app.delete(
    "/:name/fs/delete",
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
      return (await room.jsonOp(req, "delete", b.asRoot, deleteAgentBody(b))) as FsDeleteResponse;
    },
  );
}
