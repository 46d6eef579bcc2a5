// `ums template create|list|info|rm` (issue #18): organization templates, through the SDK. A unit
// starts from one with `ums create NAME --template T`.

import { type TemplateInfo, Unit } from "@ums/sdk";
import { Command } from "commander";
import { UsageError } from "../errors.js";
import { resolveConnection } from "../user/connect.js";
import { examples, withContext, withJson } from "../user/options.js";
import { age, printJson, table } from "../user/output.js";

/** `UNIT` or `UNIT@CHECKPOINT`. */
function parseSource(value: string): { unit: string; checkpoint?: string } {
  const m = /^([^@\s]+)(?:@([^@\s]+))?$/.exec(value);
  if (!m?.[1]) throw new UsageError(`--from must be UNIT or UNIT@CHECKPOINT (e.g. web@v3), got '${value}'`);
  return { unit: m[1], ...(m[2] && { checkpoint: m[2] }) };
}

const templateJson = (t: TemplateInfo): Record<string, unknown> => JSON.parse(JSON.stringify(t));

export function templateCommand(): Command {
  const cmd = new Command("template").description("publish, list, show and delete the organization's templates");

  withJson(withContext(cmd.command("create")))
    .description(
      "publish a unit's checkpoint (files, services, policies) as a template (a new checkpoint unless named)",
    )
    .argument("<name>", "the template's name")
    .requiredOption("--from <unit[@checkpoint]>", "the unit, and the checkpoint to publish", parseSource)
    .option("-d, --description <text>", "what the template holds")
    .action(
      async (
        name: string,
        opts: { from: { unit: string; checkpoint?: string }; description?: string; json?: boolean },
        self: Command,
      ) => {
        const { client } = await resolveConnection(self);
        let checkpoint = opts.from.checkpoint;
        if (checkpoint === undefined) {
          const unit = await Unit.connect(opts.from.unit, { client });
          checkpoint = (await unit.checkpoints.create({ comment: `template ${name}` })).id;
        }
        const t = await client.templates.create(name, {
          unit: opts.from.unit,
          checkpoint,
          description: opts.description,
        });
        if (opts.json) return printJson(templateJson(t));
        process.stdout.write(`created template ${t.name} from ${t.source.unit}@${t.source.checkpoint}\n`);
      },
    );

  withJson(withContext(cmd.command("list")))
    .description("the organization's templates")
    .action(async (opts: { json?: boolean }, self: Command) => {
      const { client } = await resolveConnection(self);
      const list = await client.templates.list();
      if (opts.json) return printJson(list.map(templateJson));
      const now = Date.now();
      process.stdout.write(
        table(
          ["NAME", "FROM", "CREATED", "DESCRIPTION"],
          list.map((t) => [t.name, `${t.source.unit}@${t.source.checkpoint}`, age(t.createdAt, now), t.description]),
        ),
      );
    });

  withJson(withContext(cmd.command("info")))
    .description("a template's fields")
    .argument("<name>", "the template")
    .action(async (name: string, opts: { json?: boolean }, self: Command) => {
      const { client } = await resolveConnection(self);
      const t = await client.templates.get(name);
      if (opts.json) return printJson(templateJson(t));
      const rows: [string, string][] = [
        ["name", t.name],
        ["id", t.id],
        ["organization", t.organization],
        ["from", `${t.source.unit}@${t.source.checkpoint}`],
        ["description", t.description || "-"],
        ["version", t.environmentVersion ?? "-"],
        ["created", t.createdAt.toISOString()],
      ];
      const width = Math.max(...rows.map(([k]) => k.length));
      process.stdout.write(rows.map(([k, v]) => `${`${k}:`.padEnd(width + 2)}${v}\n`).join(""));
    });

  withContext(cmd.command("rm"))
    .description("delete a template (units made from it keep working)")
    .argument("<name>", "the template")
    .action(async (name: string, _opts: unknown, self: Command) => {
      const { client } = await resolveConnection(self);
      await client.templates.delete(name);
      process.stdout.write(`deleted template ${name}\n`);
    });

  return examples(cmd, [
    "ums template create py-dev --from web@v3 -d 'python and our tools'",
    "ums template create node-dev --from web",
    "ums template list",
    "ums create worker-1 --template py-dev",
    "ums template rm py-dev",
  ]);
}
