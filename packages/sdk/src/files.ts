import type { FsDeleteResponse, FsEntry, FsListResponse, FsRenameResponse, FsWriteResponse } from "@ums/protocol";
import type { UmsClient } from "./client.js";
import type { Commands } from "./commands.js";
import type { RequestOpts } from "./config.js";
import { NotFoundError, SdkErrorCode, UmsError, ValidationError } from "./errors.js";

/** Relative paths resolve against the unit user's home (spec 4.4 `workingDir`). */
export const HOME_DIR = "/home/unit";

export interface FilesOpts extends RequestOpts {
  /** Act as `root` of the unit instead of the unit user (the fs API's `asRoot`). */
  user?: "unit" | "root" | undefined;
}

export interface FileReadOpts extends FilesOpts {
  /** `text` (default, UTF-8), `bytes`, or `stream` (a ReadableStream of the bytes as they come). */
  format?: "text" | "bytes" | "stream" | undefined;
}

export interface FileWriteOpts extends FilesOpts {
  /** Permissions of a new file, as an octal string ("0644") or number (0o644). */
  mode?: string | number | undefined;
  /** Create missing parent directories. */
  mkdirParents?: boolean | undefined;
}

export interface FileListOpts extends FilesOpts {
  /** Everything below `path` (the server stops at 10 000 entries). */
  recursive?: boolean | undefined;
  /** Keep entries whose name matches this glob (`*`, `?`). */
  pattern?: string | undefined;
}

export interface FileRemoveOpts extends FilesOpts {
  /** Remove a non-empty directory and everything below it. */
  recursive?: boolean | undefined;
}

export type FileData = string | Uint8Array | ReadableStream<Uint8Array>;

const request = (o: RequestOpts) => ({ timeoutMs: o.timeoutMs, signal: o.signal });
const asRoot = (o: FilesOpts) => (o.user === "root" ? true : undefined);

/**
 * `unit.files`: the unit's filesystem (spec 4.4). A failed operation throws the SDK's error for
 * its status with the errno name as `code` and the path in `path`: a missing file is a
 * `NotFoundError` with `code` `ENOENT`.
 */
export class Files {
  constructor(
    private readonly client: UmsClient,
    private readonly path: () => string,
    private readonly commands: Commands,
  ) {}

  read(path: string, opts?: FileReadOpts & { format?: "text" }): Promise<string>;
  read(path: string, opts: FileReadOpts & { format: "bytes" }): Promise<Uint8Array>;
  read(path: string, opts: FileReadOpts & { format: "stream" }): Promise<ReadableStream<Uint8Array>>;
  async read(path: string, opts: FileReadOpts = {}): Promise<string | Uint8Array | ReadableStream<Uint8Array>> {
    const res = await this.client.open("GET", `${this.path()}/fs/read`, {
      ...request(opts),
      query: { path, workingDir: HOME_DIR, asRoot: asRoot(opts) },
    });
    if (opts.format === "stream") return res.body ?? new Blob([]).stream();
    if (opts.format === "bytes") return new Uint8Array(await res.arrayBuffer());
    return await res.text();
  }

  /** Creates or truncates `path` with `data` (a stream is sent as it is read). */
  async write(path: string, data: FileData, opts: FileWriteOpts = {}): Promise<FsWriteResponse> {
    const mode = typeof opts.mode === "number" ? `0${opts.mode.toString(8)}` : opts.mode;
    return this.json<FsWriteResponse>(
      await this.client.open("PUT", `${this.path()}/fs/write`, {
        ...request(opts),
        query: {
          path,
          workingDir: HOME_DIR,
          mode,
          mkdirParents: opts.mkdirParents || undefined,
          asRoot: asRoot(opts),
        },
        headers: { "content-type": "application/octet-stream" },
        body: data,
      }),
    );
  }

  /** The entries of a directory (a file lists as its one entry). */
  async list(path: string, opts: FileListOpts = {}): Promise<FsEntry[]> {
    const res = await this.client.open("GET", `${this.path()}/fs/list`, {
      ...request(opts),
      query: { path, workingDir: HOME_DIR, recursive: opts.recursive, pattern: opts.pattern, asRoot: asRoot(opts) },
    });
    return (await this.json<FsListResponse>(res)).entries;
  }

  /** Whether `path` exists (a dangling symlink counts). */
  async exists(path: string, opts: FilesOpts = {}): Promise<boolean> {
    try {
      await this.list(path, opts);
      return true;
    } catch (err) {
      if (err instanceof NotFoundError && err.code === "ENOENT") return false;
      throw err;
    }
  }

  /** Removes a file or an empty directory (a full one with `recursive`); returns the removed paths. */
  async remove(path: string, opts: FileRemoveOpts = {}): Promise<string[]> {
    const r = await this.client.request<FsDeleteResponse>("DELETE", `${this.path()}/fs/delete`, {
      ...request(opts),
      body: { path, workingDir: HOME_DIR, recursive: opts.recursive ?? false, asRoot: opts.user === "root" },
    });
    return r.deleted;
  }

  /** Renames (moves) `from` to `to`. */
  async rename(from: string, to: string, opts: FilesOpts = {}): Promise<FsRenameResponse> {
    return this.client.request<FsRenameResponse>("POST", `${this.path()}/fs/rename`, {
      ...request(opts),
      body: { source: from, dest: to, workingDir: HOME_DIR, asRoot: opts.user === "root" },
    });
  }

  /**
   * Creates a directory and its missing parents. Returns false if it was already there. The fs API
   * has no mkdir (spec 4.4), so this runs `mkdir -p` in the unit.
   */
  async makeDir(path: string, opts: FilesOpts = {}): Promise<boolean> {
    const r = await this.commands.run(["sh", "-c", 'test -d "$1" && exit 100; mkdir -p -- "$1"', "sh", path], {
      ...request(opts),
      cwd: HOME_DIR,
      user: opts.user,
    });
    if (r.exitCode === 100) return false;
    if (r.exitCode === 0) return true;
    const message = `makeDir ${path}: ${r.stderr.trim() || `mkdir exited with ${r.exitCode}`}`;
    const Class = /File exists|Not a directory/.test(r.stderr) ? ValidationError : UmsError;
    throw new Class(message, SdkErrorCode.CommandFailed, { path });
  }

  private async json<T>(res: Response): Promise<T> {
    const text = await res.text();
    try {
      return JSON.parse(text) as T;
    } catch {
      throw new UmsError(
        `the server answered with a body that is not JSON: ${text.slice(0, 200)}`,
        SdkErrorCode.BadResponse,
        {
          status: res.status,
        },
      );
    }
  }
}
