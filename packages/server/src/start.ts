import type { FastifyBaseLogger } from "fastify";
import type { Logger } from "pino";
import { buildApp } from "./api/app.js";
import type { ApiInstance } from "./api/instance.js";
import type { ServerConfig } from "./config.js";
import { createLogger } from "./log.js";
import { openStore } from "./store/open.js";
import type { Store } from "./store/store.js";

export interface RunningServer {
  /** Base URL of the API, e.g. http://127.0.0.1:7070 */
  readonly url: string;
  readonly port: number;
  readonly store: Store;
  readonly app: ApiInstance;
  close(): Promise<void>;
}

/** Opens the store (migrating it), builds the API and listens. */
export async function startServer(
  config: ServerConfig,
  opts: { logger?: Logger; store?: Store } = {},
): Promise<RunningServer> {
  const logger = opts.logger ?? createLogger();
  const store =
    opts.store ??
    (await openStore({
      ...config,
      onIdleError: (err) => logger.warn({ err: err.message }, "idle database connection lost; it will be replaced"),
    }));
  let app: ApiInstance;
  try {
    app = await buildApp({ store, config, logger: logger as FastifyBaseLogger });
    await app.listen({ host: config.listenHost, port: config.listenPort });
  } catch (err) {
    if (!opts.store) await store.close();
    throw err;
  }
  const address = app.server.address();
  const port = typeof address === "object" && address ? address.port : config.listenPort;
  const host = config.listenHost.includes(":") ? `[${config.listenHost}]` : config.listenHost;
  const url = `http://${host === "0.0.0.0" ? "127.0.0.1" : host}:${port}`;
  logger.info({ url, port, dialect: store.dialect, dataDir: config.dataDir }, "ums listening");
  let closing: Promise<void> | undefined;
  return {
    url,
    port,
    store,
    app,
    close() {
      closing ??= (async () => {
        await app.close();
        if (!opts.store) await store.close();
      })();
      return closing;
    },
  };
}
