// `ums audit`: the organization's audit log (issue #20), through the SDK; admin tokens only.

import { auditLog } from "@ums/sdk";
import { Command } from "commander";
import { UsageError } from "../errors.js";
import { resolveConnection } from "../user/connect.js";
import { parseSpan } from "../user/days.js";
import { examples, withContext, withJson } from "../user/options.js";
import { printJson, table } from "../user/output.js";

interface AuditOpts {
  since?: string;
  unit?: string;
  token?: string;
  limit: string;
  json?: boolean;
}

function since(text: string): Date {
  const span = parseSpan(text);
  if (span !== undefined) return new Date(Date.now() - span);
  const at = new Date(text);
  if (Number.isNaN(at.getTime())) throw new UsageError(`--since '${text}' is not a span like 1h or 7d, nor a date`);
  return at;
}

export function auditCommand(): Command {
  const cmd = withJson(withContext(new Command("audit")))
    .description("the organization's audit log of state-changing calls, newest first (admin tokens)")
    .option("--since <span|date>", "only events since then: 1h, 7d, or a date (2026-11-01T00:00:00Z)")
    .option("--unit <name>", "only calls about this unit")
    .option("--token <id>", "only calls made with this token (tok_…)")
    .option("--limit <n>", "at most this many events (1-500)", "100")
    .action(async (opts: AuditOpts, self: Command) => {
      const limit = Number(opts.limit);
      if (!Number.isInteger(limit) || limit < 1 || limit > 500) throw new UsageError("--limit must be 1 to 500");
      const { client } = await resolveConnection(self);
      const { events } = await auditLog({
        client,
        limit,
        ...(opts.since !== undefined && { since: since(opts.since) }),
        ...(opts.unit !== undefined && { unit: opts.unit }),
        ...(opts.token !== undefined && { token: opts.token }),
      });
      if (opts.json) {
        printJson(events);
        return;
      }
      process.stdout.write(
        table(
          ["AT", "TOKEN", "CALL", "UNIT", "STATUS", "MS"],
          events.map((e) => [
            e.at.toISOString(),
            e.tokenId ?? "",
            `${e.method} ${e.route}`,
            e.unit ?? "",
            e.code ? `${e.status} ${e.code}` : e.status,
            e.ms,
          ]),
        ),
      );
    });
  return examples(cmd, ["ums audit", "ums audit --since 1h --unit web", "ums audit --token tok_abc --json"]);
}
