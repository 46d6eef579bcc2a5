import { closeSync, fstatSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from "node:fs";
import { join } from "node:path";
import type { ServiceEvent } from "@ums/protocol";

// A service's log (spec 6.4, docs/ARCHITECTURE.md section 10): every output line timestamped, in
// <dir>/<service>.log (both streams, lines like `2026-06-02T17:11:17.821Z [stderr] message`) and in
// <service>.stdout.log / <service>.stderr.log. Each file is bounded: past `maxBytes` it becomes
// `<file>.1` (one older generation kept). Live lines also go to subscribers (log follow, restart stream).

export type OutStream = "stdout" | "stderr";
export type Listener = (event: ServiceEvent) => void;

const MAX_LINE = 16 * 1024;
const LINE_RE = /^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) \[(stdout|stderr)\] (.*)$/;

class BoundedFile {
  private fd = -1;
  private size = 0;
  constructor(
    readonly path: string,
    private readonly maxBytes: number,
  ) {}

  append(text: string): void {
    if (this.fd < 0) {
      this.fd = openSync(this.path, "a", 0o644);
      this.size = fstatSync(this.fd).size;
    }
    if (this.size > 0 && this.size + Buffer.byteLength(text) > this.maxBytes) {
      closeSync(this.fd);
      renameSync(this.path, `${this.path}.1`);
      this.fd = openSync(this.path, "a", 0o644);
      this.size = 0;
    }
    this.size += writeSync(this.fd, text);
  }

  close(): void {
    if (this.fd >= 0) closeSync(this.fd);
    this.fd = -1;
  }
}

export class ServiceLog {
  private readonly files: Record<OutStream | "combined", BoundedFile>;
  private readonly partial: Record<OutStream, string> = { stdout: "", stderr: "" };
  private readonly listeners = new Set<Listener>();

  constructor(
    dir: string,
    readonly name: string,
    maxBytes = 1024 * 1024,
  ) {
    mkdirSync(dir, { recursive: true, mode: 0o755 });
    this.files = {
      combined: new BoundedFile(join(dir, `${name}.log`), maxBytes),
      stdout: new BoundedFile(join(dir, `${name}.stdout.log`), maxBytes),
      stderr: new BoundedFile(join(dir, `${name}.stderr.log`), maxBytes),
    };
  }

  /** Spec 6.4 `complete.log_files`, as paths inside the unit. */
  logFiles(publicDir: string): Record<string, string> {
    return {
      combined: join(publicDir, `${this.name}.log`),
      stdout: join(publicDir, `${this.name}.stdout.log`),
      stderr: join(publicDir, `${this.name}.stderr.log`),
    };
  }

  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Lifecycle events (started, exit, …) go to subscribers only. */
  emit(event: ServiceEvent): void {
    for (const l of this.listeners) l(event);
  }

  output(stream: OutStream, data: Buffer): void {
    const text = this.partial[stream] + data.toString("utf8");
    const lines = text.split("\n");
    this.partial[stream] = lines.pop() ?? "";
    if (this.partial[stream].length > MAX_LINE) {
      lines.push(this.partial[stream]);
      this.partial[stream] = "";
    }
    for (const line of lines) this.line(stream, line);
  }

  /** Writes out unterminated lines (the process exited). */
  flush(): void {
    for (const s of ["stdout", "stderr"] as const) {
      if (this.partial[s] !== "") this.line(s, this.partial[s]);
      this.partial[s] = "";
    }
  }

  private line(stream: OutStream, raw: string): void {
    const now = Date.now();
    const stamp = new Date(now).toISOString();
    for (let i = 0; i < Math.max(1, raw.length); i += MAX_LINE) {
      const data = raw.slice(i, i + MAX_LINE).replace(/\r$/, "");
      const row = `${stamp} [${stream}] ${data}\n`;
      try {
        this.files.combined.append(row);
        this.files[stream].append(row);
      } catch {
        // a full disk must not stop the service; subscribers still see the line
      }
      this.emit({ type: stream, data, timestamp: now });
    }
  }

  /** The last `lines` lines of the combined log (all when undefined) as spec 6.4 events. */
  tail(lines?: number): ServiceEvent[] {
    const rows: string[] = [];
    for (const path of [`${this.files.combined.path}.1`, this.files.combined.path]) {
      try {
        rows.push(...readFileSync(path, "utf8").split("\n"));
      } catch {}
    }
    const events: ServiceEvent[] = [];
    for (const row of rows) {
      const m = LINE_RE.exec(row);
      if (m) events.push({ type: m[2] as OutStream, data: m[3] ?? "", timestamp: Date.parse(m[1] ?? "") });
    }
    return lines === undefined ? events : events.slice(Math.max(0, events.length - lines));
  }

  close(): void {
    this.flush();
    for (const f of Object.values(this.files)) f.close();
  }
}
