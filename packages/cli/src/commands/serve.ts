import { createLogger, resolveConfig, startServer } from "@ums/server";
import { Command } from "commander";
import { withDataDir } from "../options.js";

/** `ums serve`: the control plane in the foreground until SIGTERM or SIGINT. */
export function serveCommand(): Command {
  return withDataDir(new Command("serve"))
    .description("run the ums server")
    .option("--listen <host:port>", "address to listen on (env UMS_LISTEN, default 127.0.0.1:7070)")
    .option(
      "--unit-host <host>",
      "units are reached at <name>-<random>.<host> (env UMS_UNIT_HOST, default units.localhost)",
    )
    .option(
      "--unit-url-scheme <scheme>",
      "scheme of unit URLs as clients see them (env UMS_UNIT_URL_SCHEME, default http)",
    )
    .option(
      "--unit-url-port <port>",
      "port of unit URLs as clients see them (env UMS_UNIT_URL_PORT, default the listen port)",
    )
    .action(
      async (opts: {
        dataDir?: string;
        listen?: string;
        unitHost?: string;
        unitUrlScheme?: string;
        unitUrlPort?: string;
      }) => {
        const config = resolveConfig(opts);
        const logger = createLogger();
        const server = await startServer(config, { logger });
        process.stderr.write(
          `ums serving on ${server.url} (data: ${config.dataDir}, database: ${server.store.dialect})\n`,
        );
        await new Promise<void>((resolve) => {
          const stop = (signal: string) => {
            logger.info({ signal }, "shutting down");
            server.close().then(resolve, (err) => {
              logger.error({ err }, "shutdown failed");
              process.exitCode = 1;
              resolve();
            });
          };
          process.once("SIGTERM", () => stop("SIGTERM"));
          process.once("SIGINT", () => stop("SIGINT"));
        });
      },
    );
}
