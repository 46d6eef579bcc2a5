// `ums image list|import|info|rm` (issue #18): the images units start from, through the SDK. A unit
// starts from one with `ums create NAME --image I`. (`ums image build` is the host's: image.ts.)

import { createReadStream } from "node:fs";
import { readFile, stat } from "node:fs/promises";
import { Readable } from "node:stream";
import type { ImageInfo, ImageRecipe } from "@ums/sdk";
import type { Command } from "commander";
import { UsageError } from "../errors.js";
import { resolveConnection } from "../user/connect.js";
import { readStdin } from "../user/input.js";
import { withContext, withJson } from "../user/options.js";
import { age, printJson, table } from "../user/output.js";

const imageJson = (i: ImageInfo): Record<string, unknown> => JSON.parse(JSON.stringify(i));

function size(bytes: number): string {
  if (bytes >= 1024 ** 3) return `${(bytes / 1024 ** 3).toFixed(1)} GiB`;
  if (bytes >= 1024 ** 2) return `${(bytes / 1024 ** 2).toFixed(1)} MiB`;
  return `${Math.round(bytes / 1024)} KiB`;
}

/** Adds the user subcommands to `ums image`. */
export function addImageUserCommands(cmd: Command): void {
  withJson(withContext(cmd.command("list")))
    .description("the images units can start from: the host's base image and the organization's")
    .action(async (opts: { json?: boolean }, self: Command) => {
      const { client } = await resolveConnection(self);
      const list = await client.images.list();
      if (opts.json) return printJson(list.map(imageJson));
      const now = Date.now();
      process.stdout.write(
        table(
          ["NAME", "KIND", "SIZE", "USER", "CREATED", "VERSION"],
          list.map((i) => [i.name, i.kind, size(i.bytes), i.config.user.name, age(i.createdAt, now), i.version]),
        ),
      );
    });

  withJson(withContext(cmd.command("import")))
    .description("import a `docker save` or OCI image layout archive (a .tar file, or - for stdin) as an image")
    .argument("<file>", "the archive")
    .requiredOption("--name <name>", "the image's name")
    .option(
      "--replace",
      "under a name the organization has: a newer build of that image ('ums upgrade' moves units to it)",
    )
    .action(async (file: string, opts: { name: string; replace?: boolean; json?: boolean }, self: Command) => {
      const { client } = await resolveConnection(self);
      if (file !== "-") {
        const st = await stat(file).catch(() => undefined);
        if (!st?.isFile())
          throw new UsageError(`${file} is not a file: give a .tar from 'docker save' or an OCI layout`);
      }
      // Read in 1 MiB chunks: with the default 64 KiB, sending a 200 MiB archive over loopback cost
      // the client and the server together more than twice the CPU time.
      const input = file === "-" ? process.stdin : createReadStream(file, { highWaterMark: 1024 * 1024 });
      const body = Readable.toWeb(input) as ReadableStream<Uint8Array>;
      const image = await client.images.import(opts.name, body, {
        timeoutMs: 0,
        replace: !!opts.replace,
        onProgress: (m) => process.stderr.write(`${m}\n`),
      });
      if (opts.json) return printJson(imageJson(image));
      process.stdout.write(`imported image ${image.name} (${size(image.bytes)}, user ${image.config.user.name})\n`);
    });

  withJson(withContext(cmd.command("info")))
    .description("an image's fields")
    .argument("<name>", "the image")
    .action(async (name: string, opts: { json?: boolean }, self: Command) => {
      const { client } = await resolveConnection(self);
      const i = await client.images.get(name);
      if (opts.json) return printJson(imageJson(i));
      const rows: [string, string][] = [
        ["name", i.name],
        ["id", i.id],
        ["kind", i.kind],
        ["organization", i.organization ?? "-"],
        ["version", i.version],
        ["size", size(i.bytes)],
        ["user", `${i.config.user.name} (${i.config.user.uid}:${i.config.user.gid}, home ${i.config.user.home})`],
        ["workdir", i.config.workingDir ?? "-"],
        ["env", i.config.env.join(" ") || "-"],
        ["source", i.source ?? "-"],
        ["created", i.createdAt.toISOString()],
      ];
      const width = Math.max(...rows.map(([k]) => k.length));
      process.stdout.write(rows.map(([k, v]) => `${`${k}:`.padEnd(width + 2)}${v}\n`).join(""));
    });

  withContext(cmd.command("rm"))
    .description("delete an image (refused while units or templates made from it exist)")
    .argument("<name>", "the image")
    .action(async (name: string, _opts: unknown, self: Command) => {
      const { client } = await resolveConnection(self);
      await client.images.delete(name);
      process.stdout.write(`deleted image ${name}\n`);
    });
}

/** `ums image build FILE`: an organization image from a recipe (JSON), built on the server with its progress. */
export async function buildRecipe(file: string, opts: { json?: boolean }, self: Command): Promise<void> {
  let text: string;
  try {
    text = file === "-" ? (await readStdin()).toString("utf8") : await readFile(file, "utf8");
  } catch (err) {
    throw new UsageError(`cannot read the recipe ${file}: ${(err as Error).message}`);
  }
  let recipe: ImageRecipe;
  try {
    recipe = JSON.parse(text) as ImageRecipe;
  } catch (err) {
    throw new UsageError(`the recipe ${file} is not JSON: ${(err as Error).message}`);
  }
  const { client } = await resolveConnection(self);
  const image = await client.images.build(recipe, {
    timeoutMs: 0,
    onProgress: (m) => process.stderr.write(`${m}\n`),
  });
  if (opts.json) return printJson(imageJson(image));
  process.stdout.write(
    `${image.cached ? "cached" : "built"} image ${image.name} (${size(image.bytes)}, user ${image.config.user.name})\n`,
  );
}
