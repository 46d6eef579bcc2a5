import type {} from "@fastify/websocket";
import { Type } from "@sinclair/typebox";
import { checkTunnelTarget, DEFAULT_TUNNEL_HOST, ErrorBody } from "@ums/protocol";
import type { FastifyRequest } from "fastify";
import type { AgentTunnel } from "../../agent/tunnel.js";
import type { UnitLease, UnitNode } from "../../node/unit-node.js";
import { NO_CONSOLE_COOKIE } from "../console/session.js";
import type { Dialect } from "../dialect.js";
import { ApiError } from "../errors.js";
import type { ApiInstance } from "../instance.js";
import { commonErrors, UnitParams } from "../schemas.js";
import { leaseUnit, wakeFor } from "../unit-access/lease.js";
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
    tunnelLease?: { lease: UnitLease; release: () => void; taken: boolean; dialing?: Promise<AgentTunnel> };
  }
}

/**
 * The tunnel's target in the upgrade's query, an addition to the `{host, port}` message: the agent
 * starts connecting while the upgrade completes (one round trip less). Without `port` the first
 * message names the target, as the public clients send it.
 */
const TunnelQuery = Type.Object({
  host: Type.Optional(Type.String({ maxLength: 300, description: `default ${DEFAULT_TUNNEL_HOST}; needs port` })),
  port: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535 })),
});

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
    config: NO_CONSOLE_COOKIE,
    schema: {
      tags,
      summary:
        'TCP tunnel into the unit (websocket): send {"host","port"}, get {"status":"connected","target"}, then binary messages',
      description:
        "The connection is made by the unit's agent inside the unit (host default localhost: the unit's own " +
        'loopback; its egress policy applies). A failure answers {"status":"error",…,"code"} and closes. ' +
        "An empty binary message ends the client's side; the websocket closes when the target ends its own. " +
        "With ?port= (and ?host=) in the upgrade's query the connection is made while the upgrade completes: " +
        'no first message is sent, the "connected" answer (or the error) comes first.',
      params: UnitParams,
      querystring: TunnelQuery,
      response: { ...commonErrors, 404: ErrorBody, 429: ErrorBody, 502: ErrorBody, 504: ErrorBody },
    },
    preHandler: async (req) => {
      if (!req.ws) return websocketOnly(req, units, "open a tunnel");
      const target = queryTarget(req.query as { host?: string; port?: number });
      const unit = await units.require(req.auth.org, (req.params as { name: string }).name);
      const give = tunnels.reserve(unit);
      let lease: UnitLease;
      try {
        lease = await wakeFor(req, node, req.auth.org, unit);
      } catch (err) {
        give();
        throw err;
      }
      // Both are once already (the lease by the UnitLease contract).
      const release = () => {
        lease.release();
        give();
      };
      const dialing = target && lease.agent.tunnel(target.host, target.port);
      // Its refusal is the client's answer (open.ts); a client gone before the upgrade ends leaves it here.
      dialing?.catch(() => {});
      const hold = { lease, taken: false, release, dialing };
      req.tunnelLease = hold;
      // A client that leaves before its upgrade completes never reaches the wsHandler.
      const socket = req.raw.socket;
      const abandon = () => {
        if (hold.taken) return;
        hold.taken = true;
        // A dial that failed was answered by nobody: nothing to close.
        dialing?.then((t) => t.socket.destroy()).catch(() => {});
        hold.release();
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
      openTunnel(client, hold.lease, hold.release, req.log, hold.dialing);
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

/** The target in the query, checked before anything is leased or dialed (400 naming the field). */
function queryTarget(q: { host?: string; port?: number }): { host: string; port: number } | undefined {
  if (q.port === undefined) {
    if (q.host !== undefined) throw ApiError.validation(["port: is required with host"]);
    return undefined;
  }
  const target = checkTunnelTarget(q.host, q.port);
  if (!target.ok) throw ApiError.validation(target.errors);
  return target.value;
}
