// `ums policy network get|set|allow|deny` (spec 4.5, 2.10): which DNS names a unit may reach.

import { readFile } from "node:fs/promises";
import { type NetworkRule, Unit } from "@ums/sdk";
import { Command } from "commander";
import { UsageError } from "../errors.js";
import { resolveConnection, unitName } from "../user/connect.js";
import { examples, readStdin, withContext, withJson } from "../user/options.js";
import { printJson, table } from "../user/output.js";

function printRules(rules: readonly NetworkRule[], json: boolean | undefined): void {
  if (json) {
    printJson({ rules });
    return;
  }
  if (rules.length === 0) {
    process.stdout.write("no rules: nothing is enforced (the public internet is open, private ranges never)\n");
    return;
  }
  process.stdout.write(
    table(
      ["#", "ACTION", "DOMAIN / INCLUDE"],
      rules.map((r, i) => [i + 1, r.action ?? "include", r.domain ?? r.include ?? ""]),
    ),
  );
}

async function policyFile(path: string): Promise<NetworkRule[]> {
  const text = path === "-" ? (await readStdin()).toString("utf8") : await readFile(path, "utf8");
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new UsageError(
      `${path === "-" ? "stdin" : path} is not JSON like {"rules": [{"action": "allow", "domain": "x"}]}`,
    );
  }
  const rules = (parsed as { rules?: unknown }).rules;
  if (!Array.isArray(rules)) throw new UsageError(`${path === "-" ? "stdin" : path} has no "rules" array`);
  return rules as NetworkRule[];
}

function appendCommand(action: "allow" | "deny"): Command {
  return withJson(withContext(new Command(action)))
    .description(`add rules that ${action} DOMAINs (exact, *.suffix or *); later rules win among equals`)
    .argument("<name>", "the unit")
    .argument("<domains...>", "e.g. api.github.com '*.npmjs.org'")
    .action(async (name: string, domains: string[], opts: { json?: boolean }, self: Command) => {
      const r = await resolveConnection(self);
      const unit = await Unit.connect(name, { client: r.client });
      const current = await unit.policies.network();
      const next = await unit.policies.setNetwork([...current.rules, ...domains.map((domain) => ({ action, domain }))]);
      printRules(next.rules, opts.json);
    });
}

export function policyCommand(): Command {
  const policy = new Command("policy").description("a unit's policies");
  const network = policy.command("network").description("which DNS names the unit may reach (in force at once)");

  withJson(withContext(network.command("get")))
    .description("the unit's network rules")
    .argument("[name]", "the unit (default: the one 'ums use' chose)")
    .action(async (name: string | undefined, opts: { json?: boolean }, self: Command) => {
      const r = await resolveConnection(self);
      const unit = await Unit.connect(unitName(name, r), { client: r.client });
      printRules((await unit.policies.network()).rules, opts.json);
    });

  withJson(withContext(network.command("set")))
    .description('replace the rules with those of a JSON file ({"rules": [...]}; - reads stdin); --clear removes all')
    .argument("<name>", "the unit")
    .argument("[file]", "the policy file, or - for stdin")
    .option("--clear", "no rules: nothing enforced")
    .action(
      async (name: string, file: string | undefined, opts: { clear?: boolean; json?: boolean }, self: Command) => {
        if (opts.clear === (file !== undefined)) throw new UsageError("give a FILE (or - for stdin) or --clear");
        const rules = opts.clear ? [] : await policyFile(file as string);
        const r = await resolveConnection(self);
        const unit = await Unit.connect(name, { client: r.client });
        printRules((await unit.policies.setNetwork(rules)).rules, opts.json);
      },
    );

  network.addCommand(appendCommand("allow"));
  network.addCommand(appendCommand("deny"));
  return examples(policy, [
    "ums policy network get web",
    "ums policy network allow web api.github.com '*.npmjs.org'",
    "ums policy network deny web '*'",
    "ums policy network set web policy.json",
    "ums policy network set web --clear",
  ]);
}
