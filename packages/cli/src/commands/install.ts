import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { resolveConfig } from "@ums/server/config";
import { DEFAULT_UNIT_DIR, installService } from "@ums/server/host";
import { Command } from "commander";
import { withDataDir } from "../options.js";

/** The launcher (bin/ums at the repository's root) the service runs. */
const UMS_BIN = resolve(fileURLToPath(import.meta.url), "../../../../../bin/ums");

/** `ums install`: a systemd service for `ums serve` (issue #20 part 7). */
export function installCommand(): Command {
  return withDataDir(new Command("install"))
    .description("install ums serve as a systemd service (ums.service), enabled and started")
    .option("--unit-dir <dir>", "where the unit file goes", DEFAULT_UNIT_DIR)
    .option("--listen <host:port>", "the address the service listens on")
    .option("--no-start", "write the unit file only")
    .addHelpText(
      "after",
      "\nExamples:\n  ums install --data-dir /var/lib/ums\n  ums install --data-dir /var/lib/ums --listen 0.0.0.0:7070\n",
    )
    .action(async (opts: { dataDir?: string; unitDir: string; listen?: string; start: boolean }) => {
      const config = resolveConfig({ dataDir: opts.dataDir ?? "/var/lib/ums", listen: opts.listen });
      const r = await installService({
        bin: UMS_BIN,
        dataDir: config.dataDir,
        args: opts.listen ? ["--listen", opts.listen] : [],
        unitDir: opts.unitDir,
        start: opts.start,
      });
      process.stdout.write(`wrote ${r.file}\n${r.systemd}\n`);
    });
}
