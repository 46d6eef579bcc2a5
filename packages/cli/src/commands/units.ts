// `ums create|list|info|delete|use`: units of the token's organization (spec 4.1), through the SDK.

import { createInterface } from "node:readline/promises";
import { Unit, type UnitInfo } from "@ums/sdk";
import { Command } from "commander";
import { UsageError } from "../errors.js";
import { saveConfig } from "../user/config-file.js";
import { resolveConnection, unitName } from "../user/connect.js";
import { examples, withContext, withJson } from "../user/options.js";
import { age, printJson, table } from "../user/output.js";

/** A unit as --json prints it: the SDK's fields, dates as ISO strings. */
function unitJson(u: UnitInfo): Record<string, unknown> {
  return JSON.parse(JSON.stringify(u));
}

function parseFrom(value: string): { unit: string; checkpoint: string } {
  const m = /^([^@\s]+)@([^@\s]+)$/.exec(value);
  if (!m?.[1] || !m[2]) throw new UsageError(`--from must be UNIT@CHECKPOINT (e.g. web@v3), got '${value}'`);
  return { unit: m[1], checkpoint: m[2] };
}

const collect = (value: string, prev: string[]) => [...prev, value];

export function createCommand(): Command {
  const cmd = withJson(withContext(new Command("create")))
    .description("create a unit (it starts cold and wakes on first use)")
    .argument("<name>", "the unit's name (lowercase letters, digits, hyphens)")
    .option("--from <unit@checkpoint>", "start from a checkpoint of another unit (a fork)", parseFrom)
    .option("--template <name>", "start from an organization template ('ums template list')")
    .option("--image <name>", "start from an image ('ums image list'; default: base)")
    .option("--public", "anyone may reach the unit's URL (default: only with a token)")
    .option("--label <label>", "a label (repeatable)", collect, [] as string[])
    .action(
      async (
        name: string,
        opts: {
          from?: { unit: string; checkpoint: string };
          template?: string;
          image?: string;
          public?: boolean;
          label: string[];
          json?: boolean;
        },
        self: Command,
      ) => {
        const { client } = await resolveConnection(self);
        const unit = await Unit.create(name, {
          client,
          from: opts.from,
          template: opts.template,
          image: opts.image,
          labels: opts.label,
          ...(opts.public && { urlSettings: { auth: "public" } }),
        });
        if (opts.json) return printJson(unitJson(unit.info()));
        process.stdout.write(`created ${unit.name}  ${unit.url}\n`);
      },
    );
  return examples(cmd, [
    "ums create web",
    "ums create web2 --from web@v3 --label team-a",
    "ums create worker --template py-dev",
    "ums create api --image my-app",
    "ums create demo --public",
  ]);
}

export function listCommand(): Command {
  const cmd = withJson(withContext(new Command("list")))
    .description("list the organization's units")
    .option("--prefix <prefix>", "only units whose name starts with this")
    .action(async (opts: { prefix?: string; json?: boolean }, self: Command) => {
      const { client } = await resolveConnection(self);
      const units: UnitInfo[] = [];
      for await (const u of Unit.list({ client, prefix: opts.prefix, pageSize: 500 })) units.push(u.info());
      if (opts.json) return printJson(units.map(unitJson));
      const now = Date.now();
      process.stdout.write(
        table(
          ["NAME", "STATUS", "URL", "LABELS", "CREATED"],
          units.map((u) => [u.name, u.status, u.url, u.labels.join(",") || "-", age(u.createdAt, now)]),
        ),
      );
    });
  return examples(cmd, ["ums list", "ums list --prefix web- --json"]);
}

export function infoCommand(): Command {
  const cmd = withJson(withContext(new Command("info")))
    .description("a unit's fields")
    .argument("[name]", "the unit (default: the one 'ums use' chose)")
    .action(async (name: string | undefined, opts: { json?: boolean }, self: Command) => {
      const r = await resolveConnection(self);
      const u = (await Unit.connect(unitName(name, r), { client: r.client })).info();
      if (opts.json) return printJson(unitJson(u));
      const access = u.urlSettings
        ? `${u.urlSettings.auth}${u.urlSettings.privateAccess ? ` (${u.urlSettings.privateAccess})` : ""}`
        : "-";
      const rows: [string, string][] = [
        ["name", u.name],
        ["id", u.id],
        ["organization", u.organization],
        ["status", u.status],
        ["url", u.url],
        ["url access", access],
        ["labels", u.labels.join(", ") || "-"],
        ["version", u.version ?? "-"],
        ["image", u.image],
        ["created", u.createdAt.toISOString()],
        ["last running", u.lastRunningAt?.toISOString() ?? "-"],
      ];
      const width = Math.max(...rows.map(([k]) => k.length));
      process.stdout.write(rows.map(([k, v]) => `${`${k}:`.padEnd(width + 2)}${v}\n`).join(""));
    });
  return examples(cmd, ["ums info web", "ums info --json"]);
}

export function upgradeCommand(): Command {
  const cmd = withJson(withContext(new Command("upgrade")))
    .description(
      "move a unit to the newest build of its image (its system files replaced where that loses nothing; its state saved first as a checkpoint)",
    )
    .argument("[name]", "the unit (default: the one 'ums use' chose)")
    .option(
      "--version <version>",
      "latest, or the build's NAME@ID ('ums image info'); base-image units: an environment version",
      "latest",
    )
    .action(async (name: string | undefined, opts: { version: string; json?: boolean }, self: Command) => {
      const r = await resolveConnection(self);
      const unit = await Unit.connect(unitName(name, r), { client: r.client });
      const result = await unit.upgrade(opts.version, { timeoutMs: 0 });
      if (opts.json) return printJson(result);
      const now = (await unit.refresh()).info();
      process.stdout.write(
        result.status === "upgraded"
          ? `upgraded ${result.name} to ${now.image}\n`
          : `${result.name} is up to date (${now.image})\n`,
      );
    });
  return examples(cmd, ["ums upgrade web", "ums upgrade web --version app@1f2e3d4c5b6a"]);
}

export function deleteCommand(): Command {
  const cmd = withContext(new Command("delete"))
    .description("delete a unit with its files, checkpoints and services")
    .argument("<name>", "the unit")
    .option("-y, --yes", "do not ask for confirmation")
    .action(async (name: string, opts: { yes?: boolean }, self: Command) => {
      const r = await resolveConnection(self);
      if (!opts.yes) await confirm(`delete unit '${name}' and everything in it?`);
      await Unit.delete(name, { client: r.client });
      // A deleted default unit is no default any more.
      if (r.context?.unit === name) {
        r.context.unit = undefined;
        await saveConfig(r.file);
      }
      process.stdout.write(`deleted ${name}\n`);
    });
  return examples(cmd, ["ums delete web", "ums delete web --yes"]);
}

async function confirm(question: string): Promise<void> {
  if (!process.stdin.isTTY || !process.stderr.isTTY) {
    throw new UsageError("refusing to delete without a terminal to confirm on: pass --yes");
  }
  const rl = createInterface({ input: process.stdin, output: process.stderr });
  try {
    const answer = await rl.question(`${question} [y/N] `);
    if (!/^y(es)?$/i.test(answer.trim())) throw new UsageError("not confirmed; nothing deleted");
  } finally {
    rl.close();
  }
}

export function useCommand(): Command {
  const cmd = withContext(new Command("use"))
    .description("make NAME the default unit of the commands that take one (stored in the context)")
    .argument("<name>", "the unit")
    .action(async (name: string, _opts: unknown, self: Command) => {
      const r = await resolveConnection(self);
      if (!r.context) throw new UsageError("'ums use' stores the unit in a login context: run 'ums login' first");
      await Unit.connect(name, { client: r.client });
      r.context.unit = name;
      r.file.contexts[r.name] = r.context;
      await saveConfig(r.file);
      process.stdout.write(`using ${name} (context ${r.name})\n`);
    });
  return examples(cmd, ["ums use web", "ums exec -- uname -a   # runs in web"]);
}
