import { readFileSync } from "node:fs";
import type { AgentConfig } from "../config.js";

// Who an exec session runs as (query `user`): the configured default user, `root`, or another account of
// the unit's /etc/passwd.

export interface SessionUser {
  uid: number;
  gid: number;
  name: string;
  home: string;
  /** Issue #18: the unit's image's Env and WorkingDir (any user's sessions start with them). */
  image?: AgentConfig["image"];
}

export function defaultUser(config: AgentConfig): SessionUser {
  return { ...config.user, image: config.image };
}

/** Returns the user for a `user` query value, or null when the name is unknown. */
export function resolveUser(config: AgentConfig, name: string | null, passwdPath = "/etc/passwd"): SessionUser | null {
  if (name === null || name === "" || name === config.user.name) return defaultUser(config);
  if (name === "root") {
    return {
      uid: 0,
      gid: 0,
      name: "root",
      home: lookupPasswd("root", passwdPath)?.home ?? "/root",
      image: config.image,
    };
  }
  const found = lookupPasswd(name, passwdPath);
  return found && { ...found, image: config.image };
}

function lookupPasswd(name: string, passwdPath: string): SessionUser | null {
  let text: string;
  try {
    text = readFileSync(passwdPath, "utf8");
  } catch {
    return null;
  }
  for (const line of text.split("\n")) {
    const f = line.split(":");
    if (f.length < 7 || f[0] !== name) continue;
    const uid = Number(f[2]);
    const gid = Number(f[3]);
    if (!Number.isInteger(uid) || !Number.isInteger(gid)) return null;
    return { uid, gid, name, home: f[5] || "/" };
  }
  return null;
}
