// `NAME:PATH` operands of cp, ls and rm. A path without `NAME:` is local (cp); `:PATH` is the
// default unit's (`ums use`). Relative unit paths resolve against the unit user's home (spec 4.4).

import { posix } from "node:path";
import { HOME_DIR } from "@ums/sdk";

export interface RemotePath {
  /** The unit's name; "" for the default unit. */
  unit: string;
  /** Absolute, normalized. */
  path: string;
}

const REMOTE = /^([a-z0-9][a-z0-9-]{0,62})?:(.*)$/;

/** A unit path, or null for a local one (`./a:b` and `/x:y` stay local). */
export function parseRemote(operand: string): RemotePath | null {
  const m = REMOTE.exec(operand);
  if (!m) return null;
  return { unit: m[1] ?? "", path: posix.resolve(HOME_DIR, m[2] || ".") };
}
