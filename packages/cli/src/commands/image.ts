import { resolveConfig } from "@ums/server/config";
import { Command, Option } from "commander";
import { withDataDir } from "../options.js";
import { examples, withContext, withJson } from "../user/options.js";
import { addImageUserCommands, buildRecipe } from "./images.js";

/** One progress line: `[ 12%] step: message`. */
export function progressLine(p: { step: string; message: string; percent?: number }, lastPercent: number): string {
  const percent = Math.round(p.percent ?? lastPercent);
  return `[${String(percent).padStart(3)}%] ${p.step}: ${p.message}`;
}

interface BuildOpts {
  force?: boolean;
  variant: "full" | "test";
  dataDir?: string;
  poolDevice?: string;
  json?: boolean;
}

/**
 * `ums image`: `build` (with a recipe FILE, the user's: an organization image built on the server;
 * without, the host's: builds, or finds cached, the base image) and the user's `list`, `import`,
 * `info`, `rm` (images.ts).
 */
export function imageCommand(): Command {
  const image = new Command("image").description("list, import, build (from a recipe) and delete images");
  addImageUserCommands(image);

  withContext(withJson(withDataDir(image.command("build"))))
    .description(
      "with FILE: build an organization image from a recipe (JSON: docs/IMAGES.md) on the server; without: build the host's base image into <data-dir>/pool (cached: a no-op when it is built)",
    )
    .argument("[file]", "an image recipe (JSON; - for stdin)")
    .option("--force", "rebuild even when the image is already built")
    .addOption(
      new Option("--variant <variant>", "full: the image units get (named base); test: a small one (named test)")
        .choices(["full", "test"])
        .default("full"),
    )
    .option(
      "--pool-device <dev>",
      "btrfs block device for the pool instead of <data-dir>/pool.img (env UMS_POOL_DEVICE)",
    )
    .action(async (file: string | undefined, opts: BuildOpts, self: Command) => {
      if (file !== undefined) return buildRecipe(file, opts, self);
      const { dataDir } = resolveConfig({ dataDir: opts.dataDir });
      const ac = new AbortController();
      const onSignal = () => ac.abort();
      process.once("SIGINT", onSignal);
      process.once("SIGTERM", onSignal);
      try {
        // Only the runtime's storage and image code: no HTTP server, no database drivers.
        const { buildImage, defaultImageName, openPool } = await import("@ums/server/runtime");
        const device = opts.poolDevice ?? (process.env.UMS_POOL_DEVICE || undefined);
        const pool = await openPool({ dataDir, ...(device ? { device } : {}) });
        let last = 0;
        const path = await buildImage({
          pool,
          name: defaultImageName(opts.variant),
          variant: opts.variant,
          force: opts.force ?? false,
          signal: ac.signal,
          onProgress: (p) => {
            process.stderr.write(`${progressLine(p, last)}\n`);
            last = p.percent ?? last;
          },
        });
        process.stdout.write(`${path}\n`);
      } catch (err) {
        if (ac.signal.aborted) {
          process.stderr.write("ums: image build interrupted; nothing was left behind\n");
          process.exit(130);
        }
        throw err;
      } finally {
        process.off("SIGINT", onSignal);
        process.off("SIGTERM", onSignal);
      }
    });

  return examples(image, [
    "ums image list",
    "ums image build py-tools.json          # a recipe: packages, files, steps, env, user",
    "docker save my-app:latest -o my-app.tar && ums image import my-app.tar --name my-app",
    "ums create api --image my-app",
    "sudo ums image build --variant full   # on the host: the base image",
  ]);
}
