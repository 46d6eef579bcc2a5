/**
 * A problem of the image archive itself (not an OCI layout or docker save archive, corrupt,
 * unsupported, or trying to write outside the image). The message says what to change, e.g.
 * "layer 2: entry 'a/../../b' leaves the image". Errors of the host (EIO, ENOSPC, a missing archive
 * file, an abort) are never of this class.
 */
export class ImageArchiveError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "ImageArchiveError";
  }
}

/** `err` with `prefix: ` before its message when it is an {@link ImageArchiveError}; other errors as they are. */
export function withContext(err: unknown, prefix: string): unknown {
  if (!(err instanceof ImageArchiveError)) return err;
  return new ImageArchiveError(`${prefix}: ${err.message}`, { cause: err.cause });
}

/** A name as it is shown in messages: quoted, control characters escaped, long names cut. */
export function quote(name: string): string {
  const shown = name.length > 200 ? `${name.slice(0, 200)}…` : name;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: escaping them is the point
  return `'${shown.replace(/[\u0000-\u001f\u007f]/g, (c) => `\\x${c.charCodeAt(0).toString(16).padStart(2, "0")}`)}'`;
}
