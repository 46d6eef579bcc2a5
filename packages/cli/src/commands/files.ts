// `ums cp`, `ums ls`, `ums rm`: a unit's files through the filesystem API (spec 4.4), streamed.

import { createReadStream, createWriteStream } from "node:fs";
import { lstat, mkdir, readdir, stat } from "node:fs/promises";
import { basename, join, posix } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { type FsEntry, NotFoundError, Unit } from "@ums/sdk";
import { Command } from "commander";
import { UsageError } from "../errors.js";
import { type Resolved, resolveConnection, unitName } from "../user/connect.js";
import { examples, withContext, withJson } from "../user/options.js";
import { printJson, table } from "../user/output.js";
import { progress } from "../user/progress.js";
import { parseRemote, type RemotePath } from "../user/remote-path.js";

async function unitOf(r: Resolved, p: RemotePath): Promise<Unit> {
  return Unit.connect(unitName(p.unit || undefined, r), { client: r.client });
}

/** The entry at `path` itself, or null when there is none. */
async function remoteStat(unit: Unit, path: string): Promise<FsEntry | null> {
  try {
    const entries = await unit.files.list(path);
    const self = entries.find((e) => e.path === path);
    // A directory lists its children, never itself.
    if (self && !self.isDir) return self;
    return { name: posix.basename(path), path, type: "directory", size: 0, mode: "", modTime: "", isDir: true };
  } catch (err) {
    if (err instanceof NotFoundError && err.code === "ENOENT") return null;
    throw err;
  }
}

async function localKind(path: string): Promise<"file" | "directory" | "other" | null> {
  try {
    const s = await stat(path);
    return s.isDirectory() ? "directory" : s.isFile() ? "file" : "other";
  } catch {
    return null;
  }
}

interface CpOpts {
  recursive?: boolean;
  progress?: boolean;
}

async function upload(unit: Unit, local: string, remote: string, opts: CpOpts): Promise<number> {
  const kind = await localKind(local);
  if (kind === null) throw new UsageError(`${local}: no such file or directory`);
  const target = await remoteStat(unit, remote);
  const dest = target?.isDir ? posix.join(remote, basename(local)) : remote;
  if (kind === "file") {
    await uploadFile(unit, local, dest, opts);
    return 1;
  }
  if (kind !== "directory") throw new UsageError(`${local}: only files and directories can be copied`);
  if (!opts.recursive) throw new UsageError(`${local} is a directory: pass -r`);
  let files = 0;
  const walk = async (dir: string, to: string): Promise<void> => {
    await unit.files.makeDir(to);
    for (const e of await readdir(dir, { withFileTypes: true })) {
      const from = join(dir, e.name);
      if (e.isDirectory()) await walk(from, posix.join(to, e.name));
      else if (e.isFile()) {
        await uploadFile(unit, from, posix.join(to, e.name), opts);
        files++;
      } else process.stderr.write(`ums: skipped ${from}: not a file or directory\n`);
    }
  };
  await walk(local, dest);
  return files;
}

async function uploadFile(unit: Unit, local: string, remote: string, opts: CpOpts): Promise<void> {
  const s = await lstat(local);
  const bar = await progress(basename(local), s.size, opts.progress);
  try {
    const counted = createReadStream(local, { highWaterMark: 1024 * 1024 }).pipe(bar.counter()); // fewer, larger chunks: less CPU on both ends
    await unit.files.write(remote, Readable.toWeb(counted) as ReadableStream<Uint8Array>, {
      mode: s.mode & 0o777,
      mkdirParents: true,
      timeoutMs: 0,
    });
  } finally {
    bar.stop();
  }
}

async function download(unit: Unit, remote: string, local: string, opts: CpOpts): Promise<number> {
  const entry = await remoteStat(unit, remote);
  if (entry === null) throw new NotFoundError(`${remote}: no such file or directory in the unit`, "ENOENT");
  const kind = await localKind(local);
  const dest = kind === "directory" ? join(local, posix.basename(remote)) : local;
  if (!entry.isDir) {
    await downloadFile(unit, entry, dest, opts);
    return 1;
  }
  if (!opts.recursive) throw new UsageError(`${remote} is a directory: pass -r`);
  await mkdir(dest, { recursive: true });
  let files = 0;
  const entries = await unit.files.list(remote, { recursive: true });
  for (const e of entries.sort((a, b) => a.path.localeCompare(b.path))) {
    const to = join(dest, ...posix.relative(remote, e.path).split("/"));
    if (e.isDir) await mkdir(to, { recursive: true });
    else if (e.type === "file") {
      await mkdir(join(to, ".."), { recursive: true });
      await downloadFile(unit, e, to, opts);
      files++;
    } else process.stderr.write(`ums: skipped ${e.path}: a ${e.type}\n`);
  }
  return files;
}

async function downloadFile(unit: Unit, entry: FsEntry, local: string, opts: CpOpts): Promise<void> {
  const bar = await progress(entry.name, entry.size, opts.progress);
  try {
    const body = await unit.files.read(entry.path, { format: "stream", timeoutMs: 0 });
    const mode = Number.parseInt(entry.mode.slice(-3), 8);
    await pipeline(
      Readable.fromWeb(body as import("node:stream/web").ReadableStream<Uint8Array>),
      bar.counter(),
      createWriteStream(local, Number.isNaN(mode) ? {} : { mode }),
    );
  } finally {
    bar.stop();
  }
}

export function cpCommand(): Command {
  const cmd = withContext(new Command("cp"))
    .description("copy files and directories between here and a unit (NAME:PATH; :PATH is the default unit)")
    .argument("<source>", "LOCAL or NAME:PATH")
    .argument("<dest>", "NAME:PATH or LOCAL")
    .option("-r, --recursive", "copy directories")
    .option("--progress", "show a progress bar even when stderr is not a terminal")
    .action(async (source: string, dest: string, opts: CpOpts, self: Command) => {
      const from = parseRemote(source);
      const to = parseRemote(dest);
      if ((from === null) === (to === null)) {
        throw new UsageError("one side must be NAME:PATH (a unit) and the other a local path");
      }
      const r = await resolveConnection(self);
      if (from) await download(await unitOf(r, from), from.path, dest, opts);
      else if (to) await upload(await unitOf(r, to), source, to.path, opts);
    });
  return examples(cmd, [
    "ums cp ./app.tar.gz web:/tmp/",
    "ums cp -r ./src web:project/src",
    "ums cp -r web:/var/log ./logs",
  ]);
}

function remoteOperand(operand: string): RemotePath {
  const p = parseRemote(operand);
  if (!p) throw new UsageError(`'${operand}' must be NAME:PATH (or :PATH for the default unit)`);
  return p;
}

export function lsCommand(): Command {
  const cmd = withJson(withContext(new Command("ls")))
    .description("list a directory of a unit")
    .argument("[target]", "NAME:PATH (default: the default unit's home)", ":")
    .option("-R, --recursive", "everything below")
    .action(async (target: string, opts: { recursive?: boolean; json?: boolean }, self: Command) => {
      const p = remoteOperand(target);
      const r = await resolveConnection(self);
      const unit = await unitOf(r, p);
      const entries = (await unit.files.list(p.path, { recursive: opts.recursive })).sort((a, b) =>
        a.path.localeCompare(b.path),
      );
      if (opts.json) return printJson(entries);
      const name = (e: FsEntry) => {
        const shown = opts.recursive ? posix.relative(p.path, e.path) || e.name : e.name;
        return e.isDir ? `${shown}/` : shown;
      };
      process.stdout.write(
        table(
          ["MODE", "SIZE", "MODIFIED", "NAME"],
          entries.map((e) => [e.mode, e.size, e.modTime.slice(0, 19).replace("T", " "), name(e)]),
        ),
      );
    });
  return examples(cmd, ["ums ls web:/etc", "ums ls :project -R --json"]);
}

export function rmCommand(): Command {
  const cmd = withJson(withContext(new Command("rm")))
    .description("remove a file or directory of a unit")
    .argument("<target>", "NAME:PATH")
    .option("-r, --recursive", "remove a directory and everything below it")
    .action(async (target: string, opts: { recursive?: boolean; json?: boolean }, self: Command) => {
      const p = remoteOperand(target);
      const r = await resolveConnection(self);
      const unit = await unitOf(r, p);
      const removed = await unit.files.remove(p.path, { recursive: opts.recursive });
      if (opts.json) return printJson(removed);
      process.stdout.write(`removed ${removed.length} ${removed.length === 1 ? "entry" : "entries"}\n`);
    });
  return examples(cmd, ["ums rm web:/tmp/old.log", "ums rm -r web:project/build"]);
}
