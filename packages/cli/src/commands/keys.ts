import { resolveConfig } from "@ums/server/config";
import { addKeyVersion, loadSecretBox, resealAll } from "@ums/server/keys";
import { Command } from "commander";
import { withDataDir, withStore } from "../options.js";

/**
 * `ums keys rotate`: a new master key version (in `<data-dir>/master.key`; with UMS_MASTER_KEY,
 * add the new `<version>:<key>` there first), then every connector secret re-encrypted under it.
 * Safe while the server runs: it reloads the key file when it meets the new version.
 */
export function keysCommand(): Command {
  const keys = new Command("keys").description("manage the master key that encrypts connector secrets");
  withDataDir(keys.command("rotate"))
    .description("add a master key version and re-encrypt every connector secret under it")
    .option(
      "--reencrypt-only",
      "re-encrypt under the current version without adding one (finishes an interrupted rotation)",
    )
    .action(async (opts: { dataDir?: string; reencryptOnly?: boolean }) => {
      const { dataDir } = resolveConfig({ dataDir: opts.dataDir });
      const box =
        opts.reencryptOnly || process.env.UMS_MASTER_KEY ? await loadSecretBox(dataDir) : await addKeyVersion(dataDir);
      const changed = await withStore(opts, (store) => resealAll(store, box));
      process.stdout.write(`master key version ${box.currentVersion}; ${changed} connector secret(s) re-encrypted\n`);
    });
  return keys;
}
