import { createHash } from "node:crypto";
import type { ImageRecipe, RecipeFile } from "@ums/protocol";
import { DEBIAN_SUITE } from "./packages.js";

// Issue #18: image recipes, the pure part: what is wrong with one beyond its schema, the hash it is
// cached by, and its files' bytes, modes and owners.

/** Bytes of all a recipe's files together at most (they travel in a JSON body of 1 MiB anyway). */
export const RECIPE_FILES_MAX_BYTES = 768 * 1024;

/** The problems of a recipe the schema cannot see, each naming its field; [] when there are none. */
export function recipeProblems(r: ImageRecipe, ids: { range: number }): string[] {
  const problems: string[] = [];
  if (r.base !== undefined && r.base !== DEBIAN_SUITE) {
    problems.push(`base: '${r.base}' is not available; images are built from ${DEBIAN_SUITE}`);
  }
  let bytes = 0;
  const seen = new Set<string>();
  for (const [i, f] of (r.files ?? []).entries()) {
    const where = `files[${i}]`;
    if ((f.content === undefined) === (f.content_base64 === undefined)) {
      problems.push(`${where}: give exactly one of content and content_base64`);
    }
    if (f.path.includes("\0") || f.path.split("/").some((c) => c === "..")) {
      problems.push(`${where}.path: '${f.path}' must not contain '..' or NUL`);
    } else if (f.path.replace(/\/+$/, "") === "" || f.path.endsWith("/")) {
      problems.push(`${where}.path: '${f.path}' must name a file`);
    }
    if (seen.has(f.path)) problems.push(`${where}.path: '${f.path}' is given twice`);
    seen.add(f.path);
    if (f.content_base64 !== undefined && !/^[A-Za-z0-9+/]*={0,2}$/.test(f.content_base64)) {
      problems.push(`${where}.content_base64: is not base64`);
    }
    const owner = fileOwner(f);
    if (owner.uid >= ids.range || owner.gid >= ids.range) {
      problems.push(`${where}.owner: ids must be below ${ids.range}`);
    }
    bytes += fileBytes(f).length;
  }
  if (bytes > RECIPE_FILES_MAX_BYTES) {
    problems.push(`files: ${bytes} bytes in all, at most ${RECIPE_FILES_MAX_BYTES}: add big files with a step instead`);
  }
  for (const k of Object.keys(r.env ?? {})) {
    if ((r.env?.[k] ?? "").includes("\0")) problems.push(`env.${k}: must not contain NUL`);
  }
  return problems;
}

export function fileBytes(f: RecipeFile): Buffer {
  return f.content_base64 !== undefined
    ? Buffer.from(f.content_base64, "base64")
    : Buffer.from(f.content ?? "", "utf8");
}

export function fileMode(f: RecipeFile): number {
  return f.mode === undefined ? 0o644 : Number.parseInt(f.mode, 8);
}

export function fileOwner(f: RecipeFile): { uid: number; gid: number } {
  const [uid = "0", gid] = (f.owner ?? "0").split(":");
  return { uid: Number(uid), gid: Number(gid ?? uid) };
}

/** JSON with keys sorted at every level: the same recipe always has the same text. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined);
    entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

/**
 * What a recipe's image is cached by: the hash of everything that makes its content (its name
 * aside), with the base image it starts from (a rebuilt base image builds the recipe again).
 */
export function recipeHash(r: ImageRecipe, baseBuild: string): string {
  const { name: _name, ...content } = r;
  return createHash("sha256")
    .update(canonical({ recipe: content, base: baseBuild }))
    .digest("hex");
}

/** The name of the cached image a package list is installed in (`pkgs-<hash>`, under the pool's images). */
export function packageImageName(packages: readonly string[]): string {
  const sorted = [...new Set(packages)].sort();
  return `pkgs-${createHash("sha256").update(sorted.join("\n")).digest("hex").slice(0, 16)}`;
}
