import { CommandError, run } from "../../exec/host-command.js";
import { toNamespacedCapability } from "../caps.js";

/** An extended attribute recorded in an entry's PAX header; `value` undefined: it could not be decoded. */
export interface PaxXattr {
  name: string;
  value: Buffer | undefined;
}

/**
 * The xattrs of a PAX header: `SCHILY.xattr.NAME` (GNU tar, Go's archive/tar: docker) and
 * `LIBARCHIVE.xattr.NAME` (base64 value). tar-stream decodes PAX values as UTF-8, so a SCHILY value
 * with bytes that are not valid UTF-8 comes out with U+FFFD in it and cannot be recovered: its value
 * is undefined.
 */
export function paxXattrs(pax: Record<string, string> | null | undefined): PaxXattr[] {
  if (!pax) return [];
  const out: PaxXattr[] = [];
  for (const [key, raw] of Object.entries(pax)) {
    if (key.startsWith("SCHILY.xattr.")) {
      out.push({ name: key.slice(13), value: raw.includes("\ufffd") ? undefined : Buffer.from(raw, "utf8") });
    } else if (key.startsWith("LIBARCHIVE.xattr.")) {
      let name = key.slice(17);
      try {
        name = decodeURIComponent(name);
      } catch {}
      out.push({ name, value: Buffer.from(raw, "base64") });
    }
  }
  return out;
}

const SET_CAPABILITY = `
import os, sys
os.setxattr(sys.argv[1], "security.capability", bytes.fromhex(sys.argv[2]), follow_symlinks=False)
`;

let python: Promise<boolean> | undefined;

/** Whether the host has python3 (Node has no xattr API: python3 writes them). */
function hasPython(): Promise<boolean> {
  python ??= run("python3", ["-I", "-c", "import os; os.setxattr"], { timeoutMs: 30_000 }).then(
    () => true,
    () => false,
  );
  return python;
}

/**
 * Writes the file capability `value` (a `security.capability` xattr as stored in the image) on the
 * regular file at `path` (its final component is not followed) as a v3 capability whose root is
 * `rootId`, the id that is root in a unit's user namespace. Returns why it was not written (to list
 * it as skipped), or undefined when it was. Call it after chown, which clears capabilities.
 */
export async function writeCapability(path: string, value: Buffer, rootId: number): Promise<string | undefined> {
  let hex: string;
  try {
    hex = toNamespacedCapability(value.toString("hex"), rootId);
  } catch (err) {
    return `security.capability not kept: ${(err as Error).message}`;
  }
  if (!(await hasPython())) return "security.capability not kept: the host has no python3 to write xattrs";
  try {
    await run("python3", ["-I", "-c", SET_CAPABILITY, path, hex], { timeoutMs: 30_000 });
  } catch (err) {
    if (err instanceof CommandError) return `security.capability not kept: ${err.stderr.trim().split("\n").pop()}`;
    throw err;
  }
  return undefined;
}
