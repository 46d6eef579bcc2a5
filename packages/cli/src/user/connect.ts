// How a user command reaches the server: the context of the config file, with UMS_URL and
// UMS_TOKEN overriding its fields (CI, scripts), and the unit a command is about.

import { UmsClient } from "@ums/sdk";
import type { Command } from "commander";
import { UsageError } from "../errors.js";
import { type ConfigFile, type Context, contextName, loadConfig } from "./config-file.js";

export interface Resolved {
  client: UmsClient;
  /** The context's name and fields (undefined when only UMS_URL/UMS_TOKEN are set). */
  name: string;
  context: Context | undefined;
  file: ConfigFile;
}

/** The global `--context` option, wherever it was given on the line. */
export function contextFlag(cmd: Command): string | undefined {
  return cmd.optsWithGlobals<{ context?: string }>().context;
}

export async function resolveConnection(cmd: Command, env: NodeJS.ProcessEnv = process.env): Promise<Resolved> {
  return connectWith(contextFlag(cmd), env);
}

/** As resolveConnection, with the `--context` value given directly (the `ums exec` fast path has no Command). */
export async function connectWith(flag: string | undefined, env: NodeJS.ProcessEnv = process.env): Promise<Resolved> {
  const file = await loadConfig();
  const name = contextName(file, flag, env);
  const context = file.contexts[name];
  const url = env.UMS_URL || context?.url;
  const token = env.UMS_TOKEN || context?.token;
  if (!url || !token) {
    const which = flag || env.UMS_CONTEXT ? `context '${name}' is not logged in` : "not logged in";
    throw new UsageError(`${which}: run 'ums login --url URL --token TOKEN' (or set UMS_URL and UMS_TOKEN)`);
  }
  return { client: new UmsClient({ baseUrl: url, token }), name, context, file };
}

/** The unit a command is about: its NAME argument, else the context's default (`ums use`). */
export function unitName(given: string | undefined, r: Resolved, env: NodeJS.ProcessEnv = process.env): string {
  const name = given || env.UMS_UNIT || r.context?.unit;
  if (!name) throw new UsageError("no unit given: pass NAME, or pick a default with 'ums use NAME'");
  return name;
}
