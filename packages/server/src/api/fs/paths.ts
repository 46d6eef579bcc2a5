import { ApiError } from "../errors.js";

/** `path` resolved against `workingDir` (posix rules; the unit's kernel resolves symlinks). */
export function resolveIn(workingDir: string, path: string, field = "path"): string {
  if (path.includes("\0") || workingDir.includes("\0")) throw ApiError.validation([`${field}: must not contain NUL`]);
  if (!workingDir.startsWith("/")) throw ApiError.validation(["workingDir: must be an absolute path"]);
  const parts: string[] = [];
  for (const seg of (path.startsWith("/") ? path : `${workingDir}/${path}`).split("/")) {
    if (seg === "" || seg === ".") continue;
    if (seg === "..") parts.pop();
    else parts.push(seg);
  }
  return `/${parts.join("/")}`;
}
