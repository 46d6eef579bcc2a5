// `ums checkpoint create|list|restore|delete` and `ums fork` (spec 4.2, 3.3): progress from the
// NDJSON stream goes to stderr, the result to stdout.

import { type CheckpointEvent, Unit } from "@ums/sdk";
import { Command } from "commander";
import { resolveConnection, unitName } from "../user/connect.js";
import { examples, withContext, withJson } from "../user/options.js";
import { printJson, table } from "../user/output.js";

/** One line per progress event (spec 6.1), on stderr: stdout keeps only the result. */
function showEvent(quiet: boolean | undefined) {
  return (e: CheckpointEvent) => {
    if (!quiet && e.type !== "complete" && "data" in e) process.stderr.write(`${e.type}: ${e.data}\n`);
  };
}

export function checkpointCommand(): Command {
  const cp = new Command("checkpoint").description("save, list, restore and delete a unit's checkpoints");

  withJson(withContext(cp.command("create")))
    .description("take a checkpoint of the unit's files and policies")
    .argument("[name]", "the unit (default: the one 'ums use' chose)")
    .option("-m, --comment <text>", "a description kept with it")
    .option("-q, --quiet", "no progress lines")
    .action(async (name: string | undefined, opts: { comment?: string; quiet?: boolean; json?: boolean }, self) => {
      const r = await resolveConnection(self);
      const unit = await Unit.connect(unitName(name, r), { client: r.client });
      const info = await unit.checkpoints.create({
        comment: opts.comment,
        onEvent: showEvent(opts.quiet || opts.json),
      });
      if (opts.json) return printJson(info);
      process.stdout.write(`${info.id}\n`);
    });

  withJson(withContext(cp.command("list")))
    .description("the unit's checkpoints, oldest first")
    .argument("[name]", "the unit (default: the one 'ums use' chose)")
    .action(async (name: string | undefined, opts: { json?: boolean }, self) => {
      const r = await resolveConnection(self);
      const unit = await Unit.connect(unitName(name, r), { client: r.client });
      const list = await unit.checkpoints.list();
      if (opts.json) return printJson(list);
      process.stdout.write(
        table(
          ["ID", "CREATED", "ACTIVE", "AUTO", "COMMENT"],
          list.map((c) => [c.id, c.create_time, c.active ? "*" : "", c.is_auto ? "yes" : "", c.comment]),
        ),
      );
    });

  withJson(withContext(cp.command("restore")))
    .description("put the unit back to a checkpoint (the state before is saved as a new one first)")
    .argument("<name>", "the unit")
    .argument("<id>", "the checkpoint, e.g. v3")
    .option("-q, --quiet", "no progress lines")
    .action(async (name: string, id: string, opts: { quiet?: boolean; json?: boolean }, self) => {
      const r = await resolveConnection(self);
      const unit = await Unit.connect(name, { client: r.client });
      const res = await unit.checkpoints.restore(id, { onEvent: showEvent(opts.quiet || opts.json), timeoutMs: 0 });
      if (opts.json) return printJson(res);
      process.stdout.write(`restored ${res.restored}${res.backup ? ` (the state before is ${res.backup})` : ""}\n`);
    });

  withContext(cp.command("delete"))
    .description("delete a checkpoint (not the one the unit is on)")
    .argument("<name>", "the unit")
    .argument("<id>", "the checkpoint")
    .action(async (name: string, id: string, _opts: unknown, self) => {
      const r = await resolveConnection(self);
      const unit = await Unit.connect(name, { client: r.client });
      await unit.checkpoints.remove(id);
      process.stdout.write(`deleted checkpoint ${id} of ${name}\n`);
    });

  return examples(cp, [
    "ums checkpoint create web -m 'before upgrade'",
    "ums checkpoint list web",
    "ums checkpoint restore web v3",
    "ums checkpoint delete web v1",
  ]);
}

export function forkCommand(): Command {
  const cmd = withJson(withContext(new Command("fork")))
    .description("a new unit starting from a checkpoint of NAME (a new checkpoint unless --checkpoint)")
    .argument("<name>", "the unit to fork")
    .argument("<new-name>", "the new unit")
    .option("--checkpoint <id>", "fork this checkpoint instead of taking one now")
    .action(async (name: string, newName: string, opts: { checkpoint?: string; json?: boolean }, self: Command) => {
      const r = await resolveConnection(self);
      let id = opts.checkpoint;
      if (id === undefined) {
        const unit = await Unit.connect(name, { client: r.client });
        id = (await unit.checkpoints.create({ comment: `fork to ${newName}` })).id;
      }
      const fork = await Unit.create(newName, { client: r.client, from: { unit: name, checkpoint: id } });
      if (opts.json) return printJson({ ...fork.info(), from: { unit: name, checkpoint: id } });
      process.stdout.write(`created ${fork.name} from ${name}@${id}  ${fork.url}\n`);
    });
  return examples(cmd, ["ums fork web web-try", "ums fork web web-old --checkpoint v2"]);
}
