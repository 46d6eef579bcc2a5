import { unitNameProblem } from "@ums/protocol";
import { mintToken } from "@ums/server/auth";
import { resolveConfig } from "@ums/server/config";
import type { TokenRole } from "@ums/server/store";
import { Command, Option } from "commander";
import { UsageError } from "../errors.js";
import { withDataDir, withStore } from "../options.js";
import { parseSpan } from "../user/days.js";

/** `ums token create|list|revoke`. Tokens are stored hashed; `create` prints the token once. */
export function tokenCommand(): Command {
  const token = new Command("token").description("manage API tokens");

  withDataDir(token.command("create"))
    .description("create a token (and its organization if new); prints only the token")
    .requiredOption("--org <slug>", "organization slug")
    .option("--name <name>", "a name to recognise the token by", "default")
    .option("--expires-in <span>", "the token stops working after this long: 12h, 30d, 2w (default: never)")
    .addOption(
      new Option("--role <role>", "admin tokens pass url_settings.private_access=admins")
        .choices(["admin", "member"])
        .default("admin"),
    )
    .action(async (opts: { org: string; name: string; role: TokenRole; expiresIn?: string; dataDir?: string }) => {
      const problem = unitNameProblem(opts.org);
      if (problem) throw new UsageError(`--org '${opts.org}' ${problem}`);
      if (opts.name.length === 0 || opts.name.length > 100) throw new UsageError("--name must be 1-100 characters");
      const span = opts.expiresIn === undefined ? undefined : parseSpan(opts.expiresIn);
      if (opts.expiresIn !== undefined && span === undefined) {
        throw new UsageError(`--expires-in '${opts.expiresIn}' is not a span like 12h, 30d or 2w`);
      }
      const expiresAt = span === undefined ? null : new Date(Date.now() + span).toISOString();
      const defaults = resolveConfig({}).orgDefaults;
      await withStore(opts, async (store) => {
        const org = await store.orgs.ensure(opts.org, defaults);
        const { secret } = await mintToken(store.tokens, {
          orgId: org.id,
          name: opts.name,
          role: opts.role,
          expiresAt,
        });
        process.stdout.write(`${secret}\n`);
      });
    });

  withDataDir(token.command("list"))
    .description("list tokens (never their secrets)")
    .option("--org <slug>", "only this organization's tokens")
    .option("--json", "one JSON object per line")
    .action(async (opts: { org?: string; json?: boolean; dataDir?: string }) => {
      await withStore(opts, async (store) => {
        let orgId: string | undefined;
        if (opts.org) {
          const org = await store.orgs.getBySlug(opts.org);
          if (!org) throw new UsageError(`no organization '${opts.org}'`);
          orgId = org.id;
        }
        const tokens = await store.tokens.list(orgId);
        const out = tokens.map((t) =>
          opts.json
            ? JSON.stringify({
                id: t.id,
                org: t.orgSlug,
                name: t.name,
                role: t.role,
                created_at: t.createdAt,
                last_used_at: t.lastUsedAt,
                revoked_at: t.revokedAt,
                expires_at: t.expiresAt,
              })
            : [
                t.id,
                t.orgSlug,
                t.name,
                t.role,
                t.createdAt,
                t.lastUsedAt ?? "-",
                t.revokedAt ? `revoked ${t.revokedAt}` : "active",
              ].join("\t"),
        );
        if (!opts.json) out.unshift(["ID", "ORG", "NAME", "ROLE", "CREATED", "LAST USED", "STATE"].join("\t"));
        process.stdout.write(out.length ? `${out.join("\n")}\n` : "");
      });
    });

  withDataDir(token.command("revoke"))
    .description("revoke a token by id; it stops working at once")
    .argument("<id>", "token id, as `ums token list` shows it")
    .action(async (id: string, opts: { dataDir?: string }) => {
      await withStore(opts, async (store) => {
        if (!(await store.tokens.revoke(id, new Date().toISOString()))) {
          throw new UsageError(`no active token with id '${id}'`);
        }
        process.stdout.write(`revoked ${id}\n`);
      });
    });

  return token;
}
