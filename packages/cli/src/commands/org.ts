import { Command } from "commander";
import { UsageError } from "../errors.js";
import { nonNegativeInt, withDataDir, withStore } from "../options.js";

/** `ums org set-limits|list`. */
export function orgCommand(): Command {
  const org = new Command("org").description("manage organizations");

  withDataDir(org.command("set-limits"))
    .description("set an organization's limits")
    .argument("<slug>", "organization slug")
    .option("--max-units <n>", "most units the organization may have (max_sprites)", nonNegativeInt("--max-units"))
    .option("--running-limit <n>", "most units running at once", nonNegativeInt("--running-limit"))
    .option("--warm-limit <n>", "most units warm (paused) at once", nonNegativeInt("--warm-limit"))
    .action(
      async (
        slug: string,
        opts: { maxUnits?: number; runningLimit?: number; warmLimit?: number; dataDir?: string },
      ) => {
        if (opts.maxUnits === undefined && opts.runningLimit === undefined && opts.warmLimit === undefined) {
          throw new UsageError("give at least one of --max-units, --running-limit, --warm-limit");
        }
        await withStore(opts, async (store) => {
          const limits = {
            ...(opts.maxUnits !== undefined && { maxUnits: opts.maxUnits }),
            ...(opts.runningLimit !== undefined && { runningLimit: opts.runningLimit }),
            ...(opts.warmLimit !== undefined && { warmLimit: opts.warmLimit }),
          };
          const updated = await store.orgs.setLimits(slug, limits);
          if (!updated)
            throw new UsageError(`no organization '${slug}'; create it with 'ums token create --org ${slug}'`);
          process.stdout.write(
            `${updated.slug}: max-units ${updated.maxUnits}, running-limit ${updated.runningLimit}, warm-limit ${updated.warmLimit}\n`,
          );
        });
      },
    );

  withDataDir(org.command("list"))
    .description("list organizations and their limits")
    .action(async (opts: { dataDir?: string }) => {
      await withStore(opts, async (store) => {
        const rows = (await store.orgs.list()).map((o) =>
          [o.slug, o.maxUnits, o.runningLimit, o.warmLimit, o.createdAt].join("\t"),
        );
        rows.unshift(["SLUG", "MAX UNITS", "RUNNING LIMIT", "WARM LIMIT", "CREATED"].join("\t"));
        process.stdout.write(`${rows.join("\n")}\n`);
      });
    });

  return org;
}
