// `ums top [NAME]`: what units use (issue #17), through the SDK: the running units' latest
// samples, or one unit's history.

import { Unit, type UnitUsage, type UsageSample, type UsageWindow } from "@ums/sdk";
import { Command } from "commander";
import { UsageError } from "../errors.js";
import { resolveConnection } from "../user/connect.js";
import { examples, withContext, withJson } from "../user/options.js";
import { printJson, table } from "../user/output.js";

const WINDOWS: readonly UsageWindow[] = ["1h", "24h", "7d"];

/** 1536 → "1.5K", in powers of 1024. */
export function humanBytes(n: number | null): string {
  if (n === null) return "-";
  const units = ["B", "K", "M", "G", "T"];
  let v = n;
  let i = 0;
  while (v >= 1024 && i < units.length - 1) {
    v /= 1024;
    i++;
  }
  return `${v >= 10 || i === 0 ? Math.round(v) : v.toFixed(1)}${units[i]}`;
}

const withLimit = (used: number | null, limit: number | null) =>
  limit === null ? humanBytes(used) : `${humanBytes(used)}/${humanBytes(limit)}`;

function row(s: UsageSample): (string | number)[] {
  return [
    s.cpuCores.toFixed(2),
    withLimit(s.memoryBytes, s.memoryLimitBytes),
    withLimit(s.diskBytes, s.diskLimitBytes),
    `${humanBytes(s.netRxBytesPerSecond)}/s`,
    `${humanBytes(s.netTxBytesPerSecond)}/s`,
    Math.round(s.processes),
  ];
}

const HEAD = ["CPU", "MEMORY", "DISK", "NET IN", "NET OUT", "PROCS"];

const usageJson = (u: UnitUsage) => ({
  ...u,
  samples: u.samples.map((s) => ({ ...s, at: s.at.toISOString() })),
});

export function topCommand(): Command {
  const cmd = withJson(withContext(new Command("top")))
    .description("what units use: the running units' latest CPU, memory, disk and network, or one unit's history")
    .argument("[name]", "one unit: its samples over --window")
    .option("--window <1h|24h|7d>", "with a name: 1h (every 10 s), 24h or 7d (5-minute averages)", "1h")
    .option("--limit <n>", "with a name: the last n samples (1-2016)", "30")
    .action(
      async (name: string | undefined, opts: { window: string; limit: string; json?: boolean }, self: Command) => {
        if (!WINDOWS.includes(opts.window as UsageWindow)) throw new UsageError("--window must be 1h, 24h or 7d");
        const limit = Number(opts.limit);
        if (!Number.isInteger(limit) || limit < 1 || limit > 2016) throw new UsageError("--limit must be 1 to 2016");
        const { client } = await resolveConnection(self);
        if (name !== undefined) {
          const unit = await Unit.connect(name, { client });
          const usage = await unit.metrics({ window: opts.window as UsageWindow });
          const samples = usage.samples.slice(-limit);
          if (opts.json) return printJson(usageJson({ ...usage, samples }));
          if (!usage.sampling) process.stderr.write("this server does not sample units (--no-metrics)\n");
          process.stdout.write(
            table(
              ["AT", ...HEAD],
              samples.map((s) => [s.at.toISOString(), ...row(s)]),
            ),
          );
          return;
        }
        const running: Unit[] = [];
        for await (const u of Unit.list({ client, pageSize: 500 })) if (u.status === "running") running.push(u);
        const usages: UnitUsage[] = [];
        // A few at a time: an organization may run many units.
        for (let i = 0; i < running.length; i += 8) {
          usages.push(...(await Promise.all(running.slice(i, i + 8).map((u) => u.metrics()))));
        }
        if (opts.json) {
          return printJson(
            usages.map((u) => ({ unit: u.unit, latest: u.samples.at(-1) ? usageJson(u).samples.at(-1) : null })),
          );
        }
        process.stdout.write(
          table(
            ["NAME", ...HEAD],
            usages.map((u) => {
              const last = u.samples.at(-1);
              return [u.unit, ...(last ? row(last) : HEAD.map(() => "-"))];
            }),
          ),
        );
      },
    );
  return examples(cmd, ["ums top", "ums top web", "ums top web --window 24h --json"]);
}
