import type { Server } from "node:http";
import type { FastifyBaseLogger } from "fastify";
import type { ServerConfig } from "../../config.js";
import type { FastConnection } from "../../http/fast/listener.js";
import { FastListener } from "../../http/fast/listener.js";
import type { RequestHead } from "../../http/wire/head.js";
import { metrics } from "../../metrics/server-metrics.js";
import type { UnitNode } from "../../node/unit-node.js";
import type { Store } from "../../store/store.js";
import { type Admitted, type ApiProxyAdmission, admit } from "./fast-admission.js";
import { UnitExchange } from "./unit-exchange.js";

export interface FastPathDeps {
  readonly store: Store;
  readonly config: ServerConfig;
  readonly node: UnitNode;
  readonly cookieKey: Buffer;
  readonly logger: FastifyBaseLogger;
}

/**
 * Issue #16 part 2 (docs/ARCHITECTURE.md section 3, "The fast paths"): requests for a unit's URL,
 * and reads through `/v1/units/{name}/<path>`, forwarded on the connection's own bytes
 * (http/fast/listener.ts) instead of through Node's HTTP objects and fastify, which cost more than
 * half of each proxied request. Every connection to the API's port starts here. A request `admit`
 * takes (a plain, authenticated request for a unit's HTTP target) is forwarded by a `UnitExchange`;
 * at the first one it does not take, the connection is handed to Node's HTTP server and stays
 * there: the API, logins, errors and websockets are answered as before.
 */
export class FastPath extends FastListener<Admitted> {
  /** Reads through `/v1/units/{name}/<path>` too, once the API's routes exist (set by app.ts). */
  api: ApiProxyAdmission | undefined;

  constructor(readonly deps: FastPathDeps) {
    super("unit URL fast path", deps.logger, deps.config.connectionLimits.headersTimeoutMs);
  }

  /** Takes the server's connections; undefined when Node's listener is not where it is expected. */
  static install(server: Server, deps: FastPathDeps): FastPath | undefined {
    const fast = new FastPath(deps);
    return fast.installOn(server) ? fast : undefined;
  }

  admit(head: RequestHead): Promise<Admitted | undefined> {
    return admit(head, this.deps, this.api);
  }

  exchange(conn: FastConnection<Admitted>, head: RequestHead, admitted: Admitted): UnitExchange {
    return new UnitExchange(conn, head, admitted, this);
  }

  /** One line per forwarded request, as the API's own (`proxied`: forwarded to a unit). */
  logged(method: string, url: string, route: string, status: number, startedAt: number, complete: boolean): void {
    const seconds = (performance.now() - startedAt) / 1000;
    if (this.deps.config.metrics) metrics.request(method, route, status, seconds);
    this.deps.logger.info(
      { method, url, status, ms: Math.round(seconds * 100_000) / 100, proxied: true, fast: true, complete },
      "request",
    );
  }
}
