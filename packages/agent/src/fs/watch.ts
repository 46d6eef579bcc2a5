import { closeSync, type FSWatcher, fstatSync, lstatSync, readdirSync, type Stats, watch } from "node:fs";
import type { IncomingMessage } from "node:http";
import { basename, isAbsolute, join, resolve } from "node:path";
import type { Duplex } from "node:stream";
import type { FsWatchEvent } from "@ums/protocol";
import { AgentErrorCode } from "@ums/protocol/error-codes";
import type { RawData, WebSocket } from "ws";
import { WebSocketEndpoint } from "../util/websocket-server.js";
import { FsOpError } from "./errors.js";
import { pinSync } from "./guard.js";
import { isWriteTemp } from "./write.js";

// File watch websocket (GET /fs/watch): the client subscribes to paths, recursive or not; the agent
// watches them with inotify (node's fs.watch, one watch per directory: a recursive subscription adds the
// directories below, and those created later) and reports
//   {"type":"event","event":"create"|"modify"|"delete"|"rename","path","oldPath"?,"isDir","timestamp"}.
// inotify reports a rename as a "moved from" and a "moved to" that fs.watch does not pair, so the agent
// pairs them by inode: a path that disappeared and one that appeared with its inode within 100 ms are one
// rename (`oldPath` → `path`). Watches run as the agent (the unit's root).
// A file write (PUT /fs/write, write.ts) makes a hidden temporary file and renames it over its target:
// the temporary file is never reported, and a path that is replaced by something renamed over it from
// where no event was seen (such a temporary file, or a place outside the watch) is a "modify" of it
// ("create" when it was not there). A subscription to that file itself follows it to the new file.
// Client messages: {"type":"subscribe","path"|"paths","workingDir"?,"recursive"?}, {"type":"unsubscribe",…}.

const MAX_DIRS = 4096;
const RENAME_WINDOW_MS = 100;
const MODIFY_COALESCE_MS = 20;

/** The event shape is the protocol's (a type-only import: nothing of it enters the bundle). */
export type WatchEvent = FsWatchEvent;

function lstatOrNull(p: string): Stats | null {
  try {
    return lstatSync(p);
  } catch {
    return null;
  }
}

/** One subscription: a path, and with `recursive` every directory below it. */
export class PathWatch {
  private readonly watchers = new Map<string, FSWatcher>();
  private readonly known = new Map<string, { ino: number; isDir: boolean }>();
  private readonly pendingDelete = new Map<number, { path: string; isDir: boolean; timer: NodeJS.Timeout }>();
  private readonly modifyTimers = new Map<string, NodeJS.Timeout>();
  private closed = false;

  constructor(
    readonly root: string,
    private readonly recursive: boolean,
    private readonly emit: (e: WatchEvent) => void,
  ) {
    // Throws ENOENT & co., or the refusal of a reserved path, to the subscriber (guard.ts).
    const { fd } = pinSync(root, "read", { follow: true });
    try {
      const st = fstatSync(fd);
      this.known.set(root, { ino: st.ino, isDir: st.isDirectory() });
      if (st.isDirectory()) this.addDir(root, fd);
      else this.watchOne(root, fd, false);
    } finally {
      closeSync(fd);
    }
  }

  /**
   * Watches directory `dir` (and with `recursive` those below): through the descriptor that pinned and
   * checked it, so a directory swapped for a symlink meanwhile is never what gets watched or listed.
   */
  private addDir(dir: string, pinned?: number): void {
    if (this.closed || this.watchers.has(dir) || this.watchers.size >= MAX_DIRS) return;
    let fd = pinned;
    if (fd === undefined) {
      try {
        fd = pinSync(dir, "read", { follow: false, directory: true }).fd;
      } catch {
        return; // gone, replaced by a non-directory, or reserved (a bind of /.unit): not watched
      }
    }
    try {
      this.watchOne(dir, fd, true);
      let names: string[] = [];
      try {
        names = readdirSync(`/proc/self/fd/${fd}`);
      } catch {}
      for (const n of names) {
        if (isWriteTemp(n)) continue; // a write in progress (write.ts)
        const st = lstatOrNull(`/proc/self/fd/${fd}/${n}`);
        if (!st) continue;
        const p = join(dir, n);
        this.known.set(p, { ino: st.ino, isDir: st.isDirectory() });
        if (this.recursive && st.isDirectory()) this.addDir(p);
      }
    } finally {
      if (pinned === undefined) closeSync(fd);
    }
  }

  /** inotify on the pinned object itself (its /proc/self/fd link); events are reported under `path`. */
  private watchOne(path: string, fd: number, isDir: boolean): void {
    let w: FSWatcher;
    try {
      w = watch(`/proc/self/fd/${fd}`, { persistent: false });
    } catch {
      return;
    }
    w.on("error", () => this.dropDir(path));
    w.on("change", (kind, filename) => {
      const p = isDir ? (filename ? join(path, filename.toString()) : path) : path;
      this.onChange(kind, p);
    });
    this.watchers.set(path, w);
  }

  /** The subscribed file was replaced by a new one (its inode): the watch moves to the new file. */
  private rewatchRoot(): void {
    this.watchers.get(this.root)?.close();
    this.watchers.delete(this.root);
    let fd: number;
    try {
      fd = pinSync(this.root, "read", { follow: true }).fd;
    } catch {
      return; // gone again, or now reserved: no longer watched
    }
    try {
      this.watchOne(this.root, fd, false);
    } finally {
      closeSync(fd);
    }
  }

  private dropDir(dir: string): void {
    for (const [p, w] of this.watchers) {
      if (p === dir || p.startsWith(`${dir}/`)) {
        w.close();
        this.watchers.delete(p);
      }
    }
  }

  private send(event: WatchEvent["event"], path: string, isDir: boolean, oldPath?: string): void {
    if (this.closed) return;
    this.emit({
      type: "event",
      event,
      path,
      ...(oldPath !== undefined && { oldPath }),
      isDir,
      timestamp: new Date().toISOString(),
    });
  }

  private onChange(kind: string, p: string): void {
    if (this.closed) return;
    if (p !== this.root && isWriteTemp(basename(p))) return; // a write in progress (write.ts)
    const st = lstatOrNull(p);
    if (kind === "change") {
      if (!st) return;
      if (this.modifyTimers.has(p)) return;
      this.modifyTimers.set(
        p,
        setTimeout(() => {
          this.modifyTimers.delete(p);
          const now = lstatOrNull(p);
          if (now && now.ino === st.ino) this.send("modify", p, st.isDirectory()); // not renamed meanwhile
        }, MODIFY_COALESCE_MS),
      );
      return;
    }
    // "rename": something appeared at or disappeared from p
    const before = this.known.get(p);
    if (st) {
      if (before && before.ino === st.ino) return; // nothing new (e.g. an event for the watched dir itself)
      this.known.set(p, { ino: st.ino, isDir: st.isDirectory() });
      const moved = this.pendingDelete.get(st.ino);
      if (moved) {
        clearTimeout(moved.timer);
        this.pendingDelete.delete(st.ino);
        this.send("rename", p, st.isDirectory(), moved.path);
      } else if (before) {
        // Replaced (a file write's rename, write.ts): the path's content changed.
        if (p === this.root && !before.isDir && !st.isDirectory()) this.rewatchRoot();
        if (!this.modifyTimers.has(p)) this.send("modify", p, st.isDirectory());
      } else {
        this.send("create", p, st.isDirectory());
      }
      if (this.recursive && st.isDirectory()) this.addDir(p);
      return;
    }
    if (!before) return; // appeared and vanished before we looked
    this.known.delete(p);
    if (before.isDir) this.dropDir(p);
    if (p === this.root) {
      this.send("delete", p, before.isDir);
      return;
    }
    this.pendingDelete.set(before.ino, {
      path: p,
      isDir: before.isDir,
      timer: setTimeout(() => {
        this.pendingDelete.delete(before.ino);
        this.send("delete", p, before.isDir);
      }, RENAME_WINDOW_MS),
    });
  }

  close(): void {
    this.closed = true;
    for (const w of this.watchers.values()) w.close();
    this.watchers.clear();
    for (const t of this.modifyTimers.values()) clearTimeout(t);
    for (const d of this.pendingDelete.values()) clearTimeout(d.timer);
  }
}

function errorCode(err: unknown): string {
  if (err instanceof FsOpError) return err.code;
  const c = (err as NodeJS.ErrnoException)?.code;
  return typeof c === "string" && /^E[A-Z0-9]+$/.test(c) ? c : "EIO";
}

export class FsWatchSockets {
  private readonly wss = new WebSocketEndpoint(1 << 20);

  constructor(private readonly pingIntervalMs: number) {}

  upgrade(req: IncomingMessage, socket: Duplex, head: Buffer): void {
    this.wss.upgrade(req, socket, head, (ws) => this.connected(ws));
  }

  private connected(ws: WebSocket): void {
    const subs = new Map<string, PathWatch>();
    const send = (msg: unknown) => {
      if (ws.readyState === ws.OPEN) ws.send(JSON.stringify(msg));
    };
    ws.on("error", () => {});
    const ping = setInterval(() => send({ type: "ping" }), this.pingIntervalMs);
    ws.on("message", (data: RawData, isBinary: boolean) => {
      if (isBinary) return;
      let msg: { type?: unknown; path?: unknown; paths?: unknown; workingDir?: unknown; recursive?: unknown };
      try {
        msg = JSON.parse(String(data));
      } catch {
        return send({ type: "error", error: "messages must be JSON", code: AgentErrorCode.Validation });
      }
      const raw = Array.isArray(msg.paths) ? msg.paths : msg.path !== undefined ? [msg.path] : [];
      const wd = typeof msg.workingDir === "string" && isAbsolute(msg.workingDir) ? msg.workingDir : "/";
      if (raw.length === 0 || raw.some((p) => typeof p !== "string" || p === "" || p.includes("\0"))) {
        return send({
          type: "error",
          error: "path: is required (a string, or paths: strings)",
          code: AgentErrorCode.Validation,
        });
      }
      const paths = (raw as string[]).map((p) => resolve(wd, p));
      if (msg.type === "subscribe") {
        const ok: string[] = [];
        for (const p of paths) {
          subs.get(p)?.close();
          try {
            subs.set(p, new PathWatch(p, msg.recursive === true, send));
            ok.push(p);
          } catch (err) {
            subs.delete(p);
            const code = errorCode(err);
            const error = err instanceof FsOpError && !/^E/.test(code) ? err.message : `${code}: cannot watch '${p}'`;
            send({ type: "error", error, code, path: p });
          }
        }
        if (ok.length > 0) send({ type: "subscribed", paths: ok });
      } else if (msg.type === "unsubscribe") {
        for (const p of paths) {
          subs.get(p)?.close();
          subs.delete(p);
        }
        send({ type: "unsubscribed", paths });
      } else {
        send({ type: "error", error: 'type: must be "subscribe" or "unsubscribe"', code: AgentErrorCode.Validation });
      }
    });
    ws.on("close", () => {
      clearInterval(ping);
      for (const s of subs.values()) s.close();
      subs.clear();
    });
  }

  close(): void {
    this.wss.close();
  }
}
