import type {} from "@fastify/websocket";
import { ErrorBody, ErrorCode } from "@ums/protocol";
import type { FastifyRequest } from "fastify";
import type { UnitLease, UnitNode } from "../../node/unit-node.js";
import type { Dialect } from "../dialect.js";
import { ApiError } from "../errors.js";
import type { ApiInstance } from "../instance.js";
import { commonErrors, UnitParams } from "../schemas.js";
import { leaseUnit } from "../unit-access/lease.js";
import { holdUnitWebsocket, joinHeldSocket } from "../unit-access/websockets.js";
import type { UnitService } from "../units/service.js";
import type { TunnelCount } from "./count.js";
import { openTunnel } from "./open.js";

export interface TunnelDeps {
  /** Which of the API's two dialects these routes answer in (api/dialect.ts); both are the same here. */
  readonly dialect: Dialect;
  readonly units: UnitService;
  readonly node: UnitNode;
  /** Open tunnels per unit (one count for both dialects). */
  readonly tunnels: TunnelCount;
}

declare module "fastify" {
  interface FastifyRequest {
    /** The unit a tunnel's upgrade leased, until its wsHandler takes it over (tunnelHold). */
    tunnelLease?: { lease: UnitLease; release: () => void; taken: boolean };
  }
}

/** The unit and its agent serve these as websockets only; a plain GET still finds the unit first (404). */
async function websocketOnly(req: FastifyRequest, units: UnitService, what: string): Promise<never> {
  await units.require(req.auth.org, (req.params as { name: string }).name);
  throw ApiError.validation([`${what} with a websocket upgrade (Connection: Upgrade)`]);
}

/**
 * The TCP tunnel (`/proxy`, packages/protocol/src/tunnel.ts, what the public clients' port forwarding
 * uses) and the port watch (spec 6.5). A tunnel's connection is made by the unit's agent inside the
 * unit, never by the host (docs/SECURITY.md: the host never connects to an address a unit chose).
 */
export function tunnelRoutes(app: ApiInstance, { units, node, tunnels }: TunnelDeps): void {
  const tags = ["tunnels"];
  app.route({
    method: "GET",
    url: "/:name/proxy",
    schema: {
      tags,
      summary:
        'TCP tunnel into the unit (websocket): send {"host","port"}, get {"status":"connected","target"}, then binary messages',
      description:
        "The connection is made by the unit's agent inside the unit (host default localhost: the unit's own " +
        'loopback; its egress policy applies). A failure answers {"status":"error",…,"code"} and closes. ' +
        "An empty binary message ends the client's side; the websocket closes when the target ends its own.",
      params: UnitParams,
      response: { ...commonErrors, 404: ErrorBody, 429: ErrorBody, 502: ErrorBody, 504: ErrorBody },
    },
    preHandler: async (req) => {
      if (!req.ws) return websocketOnly(req, units, "open a tunnel");
      const unit = await units.require(req.auth.org, (req.params as { name: string }).name);
      if (!tunnels.take(unit.id)) {
        throw new ApiError(
          429,
          ErrorCode.TunnelLimit,
          `unit '${unit.name}' has ${tunnels.max} open tunnels, the most one unit may have; close one first`,
        );
      }
      const give = tunnels.giver(unit.id);
      let lease: UnitLease;
      try {
        lease = await node.wake(req.auth.org, unit);
      } catch (err) {
        give();
        throw err;
      }
      const release = once(() => {
        lease.release();
        give();
      });
      const hold = { lease, taken: false, release };
      req.tunnelLease = hold;
      // A client that leaves before its upgrade completes never reaches the wsHandler.
      const socket = req.raw.socket;
      const abandon = () => {
        if (!hold.taken) hold.release();
      };
      if (socket.destroyed) abandon();
      else socket.once("close", abandon);
    },
    handler: async () => {
      throw ApiError.validation(["open a tunnel with a websocket upgrade (Connection: Upgrade)"]);
    },
    wsHandler: (client, req) => {
      const hold = req.tunnelLease;
      if (!hold || hold.taken) return client.terminate();
      hold.taken = true;
      openTunnel(client, hold.lease, hold.release, req.log);
    },
  });

  app.route({
    method: "GET",
    url: "/:name/ports/watch",
    schema: {
      tags,
      summary:
        'Listening ports (websocket): {"type":"ports","ports":[…]} first, then port_opened / port_closed (spec 6.5)',
      params: UnitParams,
      response: { ...commonErrors, 404: ErrorBody, 502: ErrorBody, 504: ErrorBody },
    },
    preHandler: async (req) => {
      if (!req.ws) return websocketOnly(req, units, "watch ports");
      await holdUnitWebsocket(req, await leaseUnit(req, units, node), "/ports/watch");
    },
    handler: async () => {
      throw ApiError.validation(["watch ports with a websocket upgrade (Connection: Upgrade)"]);
    },
    wsHandler: joinHeldSocket,
  });
}

function once(fn: () => void): () => void {
  let done = false;
  return () => {
    if (done) return;
    done = true;
    fn();
  };
}
