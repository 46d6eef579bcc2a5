// `ums login`, `ums logout`, `ums whoami`, `ums context`: the user's contexts (user/config-file.ts).
// Needs only the SDK: a laptop has no @ums/server.

import { organization, UmsClient } from "@ums/sdk";
import { Command } from "commander";
import { UsageError } from "../errors.js";
import {
  checkContextName,
  configPath,
  contextName,
  DEFAULT_CONTEXT,
  loadConfig,
  saveConfig,
} from "../user/config-file.js";
import { contextFlag, resolveConnection } from "../user/connect.js";
import { examples, readStdin, withContext, withJson } from "../user/options.js";
import { printJson, table } from "../user/output.js";

interface LoginOpts {
  url: string;
  token?: string;
  json?: boolean;
}

export function loginCommand(): Command {
  const cmd = withJson(withContext(new Command("login")))
    .description("log in to a ums server: checks the token and stores it as a context (~/.config/ums/config.json)")
    .requiredOption("--url <url>", "the server, e.g. https://ums.example.com")
    .option("--token <token>", "an API token (default: env UMS_TOKEN, else asked on the terminal or read from stdin)")
    .action(async (opts: LoginOpts, self: Command) => {
      const token = opts.token || process.env.UMS_TOKEN || (await tokenFromStdin());
      const file = await loadConfig();
      const name = checkContextName(contextName(file, contextFlag(self)));
      const client = newClient(opts.url, token);
      const org = await organization({ client });
      file.contexts[name] = { url: client.baseUrl, token, org: org.slug, unit: file.contexts[name]?.unit };
      file.current = name;
      await saveConfig(file);
      if (opts.json) printJson({ context: name, url: client.baseUrl, organization: org.slug });
      else process.stdout.write(`logged in to ${client.baseUrl} as organization ${org.slug} (context ${name})\n`);
    });
  return examples(cmd, [
    "ums login --url https://ums.example.com --token ums_...",
    "echo $TOKEN | ums login --url http://127.0.0.1:7070 --context local",
  ]);
}

function newClient(url: string, token: string): UmsClient {
  try {
    return new UmsClient({ baseUrl: url, token });
  } catch (err) {
    throw new UsageError(`--url: ${(err as Error).message}`);
  }
}

async function tokenFromStdin(): Promise<string> {
  if (process.stdin.isTTY) return promptHidden("token: ");
  const token = (await readStdin()).toString("utf8").trim();
  if (token === "" || /\s/.test(token)) throw new UsageError("stdin must hold one token on one line");
  return token;
}

export function logoutCommand(): Command {
  const cmd = withContext(new Command("logout"))
    .description("forget the token of a context (the current one by default)")
    .action(async (_opts: unknown, self: Command) => {
      const file = await loadConfig();
      const name = contextName(file, contextFlag(self));
      if (!file.contexts[name]) throw new UsageError(`no context '${name}' in ${configPath()}`);
      delete file.contexts[name];
      if (file.current === name) file.current = Object.keys(file.contexts)[0];
      await saveConfig(file);
      process.stdout.write(`logged out (context ${name})\n`);
    });
  return examples(cmd, ["ums logout", "ums logout --context staging"]);
}

export function whoamiCommand(): Command {
  const cmd = withJson(withContext(new Command("whoami")))
    .description("the server, organization and default unit the commands use")
    .action(async (opts: { json?: boolean }, self: Command) => {
      const r = await resolveConnection(self);
      const org = await organization({ client: r.client });
      const info = {
        context: r.context ? r.name : null,
        url: r.client.baseUrl,
        organization: org.slug,
        unit: process.env.UMS_UNIT || r.context?.unit || null,
        max_units: org.maxUnits,
        running_limit: org.activeUnitLimit,
      };
      if (opts.json) return printJson(info);
      process.stdout.write(
        table(
          ["CONTEXT", "URL", "ORGANIZATION", "UNIT"],
          [[info.context ?? "(env)", info.url, info.organization, info.unit ?? "-"]],
        ),
      );
    });
  return examples(cmd, ["ums whoami", "ums whoami --json"]);
}

export function contextCommand(): Command {
  const cmd = withJson(new Command("context"))
    .description("list the login contexts, or switch to NAME")
    .argument("[name]", "the context to make current")
    .action(async (name: string | undefined, opts: { json?: boolean }) => {
      const file = await loadConfig();
      if (name !== undefined) {
        if (!file.contexts[name])
          throw new UsageError(`no context '${name}': log in with 'ums login --context ${name}'`);
        file.current = name;
        await saveConfig(file);
        process.stdout.write(`switched to context ${name}\n`);
        return;
      }
      const current = file.current ?? DEFAULT_CONTEXT;
      const rows = Object.entries(file.contexts).map(([n, c]) => ({
        name: n,
        current: n === current,
        url: c.url,
        organization: c.org ?? null,
        unit: c.unit ?? null,
      }));
      if (opts.json) return printJson(rows);
      process.stdout.write(
        table(
          ["CURRENT", "NAME", "URL", "ORGANIZATION", "UNIT"],
          rows.map((r) => [r.current ? "*" : "", r.name, r.url, r.organization ?? "-", r.unit ?? "-"]),
        ),
      );
    });
  return examples(cmd, ["ums context", "ums context staging"]);
}

/** Asks on the terminal without echoing what is typed (a token is a secret). Ctrl-C or Ctrl-D give up. */
function promptHidden(question: string): Promise<string> {
  const stdin = process.stdin;
  // Raw (no echo, Ctrl-C as a byte) before the question shows: what is typed after it never echoes.
  stdin.setRawMode(true);
  process.stderr.write(question);
  stdin.resume();
  let typed = "";
  return new Promise<string>((resolve, reject) => {
    const done = (err?: Error) => {
      stdin.off("data", onData);
      stdin.setRawMode(false);
      stdin.pause();
      process.stderr.write("\n");
      if (err) reject(err);
      else resolve(typed.trim());
    };
    const onData = (chunk: Buffer) => {
      for (const ch of chunk.toString("utf8")) {
        if (ch === "\r" || ch === "\n") return done(typed.trim() === "" ? new UsageError("no token given") : undefined);
        if (ch === "\u0003" || ch === "\u0004") return done(new UsageError("login cancelled"));
        if (ch === "\u007f" || ch === "\b") typed = typed.slice(0, -1);
        else typed += ch;
      }
    };
    stdin.on("data", onData);
  });
}
