import { resolveConfig } from "@ums/server/config";
import { doctor } from "@ums/server/host";
import { Command } from "commander";
import { withDataDir } from "../options.js";

/** `ums doctor`: checks what `ums serve` needs of this host and says what to fix (issue #20 part 7). */
export function doctorCommand(): Command {
  return withDataDir(new Command("doctor"))
    .description("check this host for ums serve: kernel, cgroups, tools, nftables, free space, subnet conflicts")
    .option("--unit-subnet <cidr>", "the unit subnet to check (env UMS_UNIT_SUBNET, default 10.209.0.0/16)")
    .option("--json", "the checks as JSON")
    .addHelpText("after", "\nExamples:\n  ums doctor\n  ums doctor --unit-subnet 10.50.0.0/16 --json\n")
    .action(async (opts: { dataDir?: string; unitSubnet?: string; json?: boolean }) => {
      const config = resolveConfig({ dataDir: opts.dataDir, unitSubnet: opts.unitSubnet });
      const checks = await doctor({ dataDir: config.dataDir, unitSubnet: config.unitSubnet });
      const failed = checks.filter((c) => !c.ok);
      if (opts.json) process.stdout.write(`${JSON.stringify({ ok: failed.length === 0, checks }, null, 2)}\n`);
      else {
        for (const c of checks) {
          const mark = !c.ok ? "FAIL" : c.warning ? "warn" : "ok  ";
          process.stdout.write(`${mark}  ${c.name}: ${c.detail}\n`);
          if (c.fix && (!c.ok || c.warning)) process.stdout.write(`      fix: ${c.fix}\n`);
        }
        process.stdout.write(
          failed.length === 0 ? "this host can run ums serve\n" : `${failed.length} check(s) failed\n`,
        );
      }
      if (failed.length > 0) process.exitCode = 1;
    });
}
