// `ums events`: the organization's unit lifecycle events (issue #17), through the SDK; `-f` follows.

import { type EventInfo, Events, type EventType } from "@ums/sdk";
import { Command } from "commander";
import { UsageError } from "../errors.js";
import { resolveConnection } from "../user/connect.js";
import { examples, withContext, withJson } from "../user/options.js";
import { printJson, table } from "../user/output.js";

interface EventsOpts {
  follow?: boolean;
  unit?: string;
  type?: string;
  since?: string;
  limit: string;
  json?: boolean;
}

const row = (e: EventInfo) => [
  e.time.toISOString(),
  e.type,
  e.unit ?? "",
  e.actor,
  Object.keys(e.data).length > 0 ? JSON.stringify(e.data) : "",
];
const HEAD = ["TIME", "TYPE", "UNIT", "ACTOR", "DATA"];

export function eventsCommand(): Command {
  const cmd = withJson(withContext(new Command("events")))
    .description("the organization's unit lifecycle events, oldest first; -f keeps printing them as they happen")
    .option("-f, --follow", "after the last events, print new ones as they happen (Ctrl-C to stop)")
    .option("--unit <name>", "only this unit's events")
    .option("--type <types>", "only these types, comma-separated (e.g. unit.booted,service.crashed)")
    .option("--since <id>", "only the events after this event id (evt_…)")
    .option("--limit <n>", "print at most the last n stored events (1-10000)", "50")
    .action(async (opts: EventsOpts, self: Command) => {
      const limit = Number(opts.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw new UsageError("--limit must be 1 to 10000");
      const { client } = await resolveConnection(self);
      const events = new Events({ client });
      const filter = {
        ...(opts.unit !== undefined && { unit: opts.unit }),
        ...(opts.type !== undefined && { types: opts.type.split(",").map((t) => t.trim()) as EventType[] }),
      };
      // The stored events (the last `limit`), then, with -f, the new ones after the last of them.
      const stored: EventInfo[] = [];
      let cursor = opts.since;
      for await (const e of events.all({
        ...filter,
        ...(cursor !== undefined && { since: cursor }),
        maxResults: 500,
      })) {
        stored.push(e);
        if (stored.length > limit) stored.shift();
        cursor = e.id;
      }
      if (!opts.follow) {
        if (opts.json) printJson(stored);
        else process.stdout.write(table(HEAD, stored.map(row)));
        return;
      }
      const print = (e: EventInfo) =>
        process.stdout.write(
          opts.json
            ? `${JSON.stringify(e)}\n`
            : `${row(e)
                .filter((c) => c !== "")
                .join("  ")}\n`,
        );
      for (const e of stored) print(e);
      const stop = new AbortController();
      for (const sig of ["SIGINT", "SIGTERM"] as const) process.once(sig, () => stop.abort());
      for await (const e of events.follow({
        ...filter,
        ...(cursor !== undefined && { since: cursor }),
        signal: stop.signal,
      })) {
        print(e);
      }
    });
  return examples(cmd, [
    "ums events",
    "ums events -f",
    "ums events --unit web --type unit.booted,unit.cooled",
    "ums events -f --json",
  ]);
}
