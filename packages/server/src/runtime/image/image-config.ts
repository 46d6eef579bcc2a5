import { constants } from "node:fs";
import { lstat, open } from "node:fs/promises";
import { join } from "node:path";
import type { ImageConfig } from "@ums/protocol";
import { ImageArchiveError, type OciImageConfig, resolveInRoot } from "./oci/index.js";
import { UID_RANGE } from "./shift.js";

// Issue #18: what an imported image needs for a unit to run on it, and the config its units run
// commands with (the OCI config's Env, WorkingDir and User, the user resolved in the image's own
// /etc/passwd). Reads only files of an image that no unit has run on yet, inside its root.

/** The agent runs on the host's node, linked against glibc and libstdc++: the image must have them. */
const AGENT_NEEDS = [
  { what: "glibc's dynamic loader", paths: ["lib64/ld-linux-x86-64.so.2"] },
  {
    what: "libstdc++",
    paths: ["usr/lib/x86_64-linux-gnu/libstdc++.so.6", "lib/x86_64-linux-gnu/libstdc++.so.6", "usr/lib/libstdc++.so.6"],
  },
];

/** Whether `rel` is a regular file of the image, following symlinks as the image itself would (inside its root). */
async function fileInRoot(root: string, rel: string): Promise<boolean> {
  try {
    return (await lstat(await resolveInRoot(root, rel, { followFinal: true }))).isFile();
  } catch {
    return false;
  }
}

/** Throws ImageArchiveError when the image lacks what the unit's agent needs to start. */
export async function missingForAgent(root: string): Promise<void> {
  for (const need of AGENT_NEEDS) {
    const found = await Promise.all(need.paths.map((p) => fileInRoot(root, p)));
    if (!found.includes(true)) {
      throw new ImageArchiveError(
        `the image has no ${need.what} (/${need.paths[0]}): the ums agent in every unit runs with the image's glibc and libstdc++; images without them (Alpine, musl, distroless static) are not supported yet: add libstdc++6 (Debian, Ubuntu) or use a glibc-based image`,
      );
    }
  }
}

/** A file of the image (etc/passwd), never through a link; undefined when it is missing or a link. */
async function readPlain(root: string, rel: string): Promise<string | undefined> {
  const dir = join(root, rel.split("/")[0] as string);
  if (!(await lstat(dir).catch(() => undefined))?.isDirectory()) return undefined;
  const fh = await open(join(root, rel), constants.O_RDONLY | constants.O_NOFOLLOW).catch(() => undefined);
  if (!fh) return undefined;
  try {
    if (!(await fh.stat()).isFile()) return undefined;
    return await fh.readFile("utf8");
  } finally {
    await fh.close();
  }
}

interface Entry {
  name: string;
  id: number;
  gid: number;
  home: string;
}

function parseIds(text: string | undefined, kind: "passwd" | "group"): Entry[] {
  const out: Entry[] = [];
  for (const line of (text ?? "").split("\n")) {
    const f = line.split(":");
    if (f.length < (kind === "passwd" ? 7 : 3)) continue;
    const id = Number(f[2]);
    if (!Number.isInteger(id)) continue;
    out.push({ name: f[0] as string, id, gid: kind === "passwd" ? Number(f[3]) : id, home: f[5] || "/" });
  }
  return out;
}

/** The OCI `User` (`name`, `uid`, `name:group`, `uid:gid`; empty: root) as the unit's default user. */
export function resolveUser(
  user: string | null,
  passwd: string | undefined,
  group: string | undefined,
): ImageConfig["user"] {
  const spec = (user ?? "").trim();
  const users = parseIds(passwd, "passwd");
  const groups = parseIds(group, "group");
  const [u = "", g] = spec.split(":", 2);
  let who: Entry;
  if (u === "" || u === "root" || u === "0") {
    who = users.find((e) => e.id === 0) ?? { name: "root", id: 0, gid: 0, home: "/root" };
  } else if (/^\d+$/.test(u)) {
    who = users.find((e) => e.id === Number(u)) ?? { name: u, id: Number(u), gid: Number(u), home: "/" };
  } else {
    const found = users.find((e) => e.name === u);
    if (!found) throw new ImageArchiveError(`the image's User '${spec}' is not in its /etc/passwd`);
    who = found;
  }
  let gid = who.gid;
  if (g !== undefined && g !== "") {
    if (/^\d+$/.test(g)) gid = Number(g);
    else {
      const found = groups.find((e) => e.name === g);
      if (!found) throw new ImageArchiveError(`the image's User '${spec}' names a group not in its /etc/group`);
      gid = found.id;
    }
  }
  for (const id of [who.id, gid]) {
    if (!Number.isInteger(id) || id < 0 || id >= UID_RANGE) {
      throw new ImageArchiveError(`the image's User '${spec}' is outside the ids a unit has (0-${UID_RANGE - 1})`);
    }
  }
  return { name: who.name, uid: who.id, gid, home: who.home };
}

/** The unit config of an imported image: its Env, WorkingDir and User (resolved in the image). */
export async function imageConfigFor(root: string, oci: OciImageConfig): Promise<ImageConfig> {
  const env = oci.env.filter((e) => /^[^=\0]+=[^\0]*$/.test(e));
  const user = resolveUser(oci.user, await readPlain(root, "etc/passwd"), await readPlain(root, "etc/group"));
  const wd = oci.workingDir?.trim() ? oci.workingDir.trim() : null;
  if (wd !== null && !wd.startsWith("/")) throw new ImageArchiveError(`the image's WorkingDir '${wd}' is not absolute`);
  return { env, user, working_dir: wd };
}
