import { access } from "node:fs/promises";
import { join } from "node:path";
import { run } from "../exec/host-command.js";

/*
 * File capabilities (the `security.capability` xattr, e.g. cap_net_raw on /usr/bin/ping) are cleared
 * by chown, and a plain (v2) one would not count inside a user namespace anyway: the kernel honours
 * only a v3 capability whose root id is the namespace's root. So the build reads them before the uid
 * shift and writes them back after it as v3 with rootid = UID_SHIFT. Node has no xattr API; the
 * image's own python3 does it through chroot (both variants ship python3; without it they are left
 * cleared and the build says so).
 */

const READ_CAPS = `
import os, sys, json
out = {}
dev = os.lstat("/").st_dev
for r, ds, fs in os.walk("/"):
    ds[:] = [d for d in ds if os.lstat(os.path.join(r, d)).st_dev == dev]
    for f in fs:
        p = os.path.join(r, f)
        try:
            out[p] = os.getxattr(p, "security.capability", follow_symlinks=False).hex()
        except OSError:
            pass
print(json.dumps(out))
`;

const WRITE_CAPS = `
import os, sys, json
caps = json.loads(sys.stdin.read())
for p, v in caps.items():
    os.setxattr(p, "security.capability", bytes.fromhex(v), follow_symlinks=False)
`;

const REVISION_MASK = 0xff000000;
const V1 = 0x01000000;
const V2 = 0x02000000;
const V3 = 0x03000000;
const EFFECTIVE = 0x000001;

/**
 * A `security.capability` value rewritten as a v3 (namespaced) capability whose root is `rootId`.
 * Pure: `hex` is the xattr as read, the result is what to write.
 */
export function toNamespacedCapability(hex: string, rootId: number): string {
  const v = Buffer.from(hex, "hex");
  if (v.length < 12) throw new Error(`capability xattr too short (${v.length} bytes)`);
  const magic = v.readUInt32LE(0);
  const rev = (magic & REVISION_MASK) >>> 0;
  const out = Buffer.alloc(24);
  out.writeUInt32LE((V3 | (magic & EFFECTIVE)) >>> 0, 0);
  if (rev === V1 && v.length >= 12) {
    v.copy(out, 4, 4, 12); // permitted[0], inheritable[0]; the high words stay 0
  } else if ((rev === V2 || rev === V3) && v.length >= 20) {
    v.copy(out, 4, 4, 20);
  } else {
    throw new Error(`unknown capability xattr revision 0x${rev.toString(16)} (${v.length} bytes)`);
  }
  out.writeUInt32LE(rootId >>> 0, 20);
  return out.toString("hex");
}

/** Path → xattr (hex) of every file with file capabilities in the rootfs, or undefined without python3. */
export async function readFileCapabilities(root: string): Promise<Record<string, string> | undefined> {
  if (!(await hasPython(root))) return undefined;
  const { stdout } = await run("chroot", [root, "/usr/bin/python3", "-I", "-c", READ_CAPS]);
  return JSON.parse(stdout) as Record<string, string>;
}

/** Writes the capabilities back as v3 capabilities whose root is `rootId` (the uid shift). */
export async function writeNamespacedCapabilities(
  root: string,
  caps: Record<string, string>,
  rootId: number,
): Promise<void> {
  const entries = Object.entries(caps);
  if (entries.length === 0) return;
  const converted = Object.fromEntries(entries.map(([p, v]) => [p, toNamespacedCapability(v, rootId)]));
  await run("chroot", [root, "/usr/bin/python3", "-I", "-c", WRITE_CAPS], { input: JSON.stringify(converted) });
}

async function hasPython(root: string): Promise<boolean> {
  return access(join(root, "usr/bin/python3")).then(
    () => true,
    () => false,
  );
}
