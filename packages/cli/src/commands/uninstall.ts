import { resolveConfig } from "@ums/server/config";
import { DEFAULT_UNIT_DIR, ServerRunningError, uninstall } from "@ums/server/host";
import { Command } from "commander";
import { UsageError } from "../errors.js";
import { withDataDir } from "../options.js";

/** `ums uninstall`: removes what ums put on this host, and says what it left (issue #20 part 7). */
export function uninstallCommand(): Command {
  return withDataDir(new Command("uninstall"))
    .description("remove what ums serve put on this host (units stopped, its firewall table, routes, mounts, cgroups)")
    .option("--pool-dir <dir>", "the pool, if it was given to ums serve with --pool-dir (env UMS_POOL_DIR)")
    .option("--unit-dir <dir>", "where ums install put the service file", DEFAULT_UNIT_DIR)
    .option("--purge", "also delete the data dir: the database, keys and the units' disks")
    .option("--yes", "do not ask (required when stdin is not a terminal)")
    .option("--json", "what was removed and left, as JSON")
    .addHelpText("after", "\nExamples:\n  ums uninstall --data-dir /var/lib/ums --yes\n  ums uninstall --purge --yes\n")
    .action(
      async (opts: {
        dataDir?: string;
        poolDir?: string;
        unitDir: string;
        purge?: boolean;
        yes?: boolean;
        json?: boolean;
      }) => {
        if (!opts.yes)
          throw new UsageError("this stops every unit of the server and removes its host resources: pass --yes");
        const config = resolveConfig({ dataDir: opts.dataDir, poolDir: opts.poolDir });
        try {
          const r = await uninstall({
            dataDir: config.dataDir,
            poolDir: config.poolDir,
            purge: opts.purge === true,
            unitDir: opts.unitDir,
          });
          if (opts.json) process.stdout.write(`${JSON.stringify(r, null, 2)}\n`);
          else {
            for (const x of r.removed) process.stdout.write(`removed  ${x}\n`);
            for (const x of r.left) process.stdout.write(`left     ${x}\n`);
          }
        } catch (err) {
          if (err instanceof ServerRunningError) throw new UsageError(err.message);
          throw err;
        }
      },
    );
}
