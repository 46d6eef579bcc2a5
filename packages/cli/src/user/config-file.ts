// The CLI's contexts: which server, which token, which default unit (`ums login`, `ums use`).
// Kept in $XDG_CONFIG_HOME/ums/config.json (else ~/.config/ums/config.json), mode 0600, in a 0700
// directory: it holds API tokens.

import { chmod, mkdir, readFile, rename, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { UsageError } from "../errors.js";

export interface Context {
  url: string;
  token: string;
  /** The organization the token belonged to at login (shown by whoami; the server decides). */
  org?: string | undefined;
  /** The default unit of the commands that take a NAME (`ums use`). */
  unit?: string | undefined;
}

export interface ConfigFile {
  /** The context used when neither --context nor UMS_CONTEXT names one. */
  current?: string | undefined;
  contexts: Record<string, Context>;
}

export const DEFAULT_CONTEXT = "default";

export function configPath(env: NodeJS.ProcessEnv = process.env): string {
  const base = env.XDG_CONFIG_HOME || join(env.HOME || homedir(), ".config");
  return join(base, "ums", "config.json");
}

export async function loadConfig(path = configPath()): Promise<ConfigFile> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return { contexts: {} };
    throw err;
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw new UsageError(`${path} is not JSON; fix or remove it, then run 'ums login' again`);
  }
  const file = parsed as Partial<ConfigFile>;
  if (typeof file !== "object" || file === null || typeof file.contexts !== "object" || file.contexts === null) {
    throw new UsageError(`${path} has no "contexts" object; fix or remove it, then run 'ums login' again`);
  }
  return { current: typeof file.current === "string" ? file.current : undefined, contexts: file.contexts };
}

/** Writes the file whole (a temp file renamed over it), never readable by others. */
export async function saveConfig(file: ConfigFile, path = configPath()): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const tmp = `${path}.${process.pid}.tmp`;
  await writeFile(tmp, `${JSON.stringify(file, null, 2)}\n`, { mode: 0o600 });
  // The mode of writeFile applies only to a new file; a leftover temp file keeps its own.
  await chmod(tmp, 0o600);
  await rename(tmp, path);
}

export function contextName(file: ConfigFile, flag: string | undefined, env: NodeJS.ProcessEnv = process.env): string {
  return flag || env.UMS_CONTEXT || file.current || DEFAULT_CONTEXT;
}

export function checkContextName(name: string): string {
  if (!/^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$/.test(name)) {
    throw new UsageError(`--context '${name}' must be 1-63 letters, digits, '.', '_' or '-'`);
  }
  return name;
}
