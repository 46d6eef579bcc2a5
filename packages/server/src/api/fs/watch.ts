import { ErrorBody } from "@ums/protocol";
import { ApiError } from "../errors.js";
import type { ApiInstance } from "../instance.js";
import { UnitParams } from "../schemas.js";
import { holdUnitWebsocket, joinHeldSocket } from "../unit-access/websockets.js";
import type { FsRoom } from "./routes.js";

/** Spec 4.4: file watch, a websocket joined to the agent's. */
export function fsWatchRoute(app: ApiInstance, room: FsRoom): void {
  const tags = ["filesystem"];
  app.route({
    method: "GET",
    url: "/:name/fs/watch",
    schema: {
      tags,
      summary:
        'File watch (websocket): send {"type":"subscribe","path","recursive"}; receive {"type":"event","event","path"}',
      params: UnitParams,
      response: { 404: ErrorBody },
    },
    preHandler: async (req) => {
      if (!req.ws) {
        // A unit that is not the caller's answers 404 whatever the request (security/cross-org.test.ts).
        await room.deps.units.require(req.auth.org, (req.params as { name: string }).name);
        throw ApiError.validation(["watch with a websocket upgrade (Connection: Upgrade)"]);
      }
      await holdUnitWebsocket(req, await room.lease(req), "/fs/watch");
    },
    handler: async () => {
      throw ApiError.validation(["watch with a websocket upgrade (Connection: Upgrade)"]);
    },
    wsHandler: joinHeldSocket,
  });
}
