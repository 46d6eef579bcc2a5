import { readFileSync } from "node:fs";
import type { PortMessage } from "@ums/protocol/exec";
import { findSocketOwners } from "./owners.js";

// Port notifications (spec 6.5, docs/ARCHITECTURE.md section 10): the agent watches the unit's listening TCP sockets
// by polling /proc/net/tcp and /proc/net/tcp6 (LISTEN state only) and finds the owning process by
// matching the socket inode against /proc/<pid>/fd. A port counts as open while at least one listening
// socket (any address, IPv4 or IPv6) has it. Watching runs only while someone is subscribed (an exec
// websocket or a port watch is open); the ports listening at subscription time are the baseline and are not
// reported. A port watch asks for them (`current`): their owners are then looked up once.

/** A port notification before the agent adds the address it is reached at. */
export type PortEvent = Omit<PortMessage, "address">;

export interface ListeningSocket {
  port: number;
  inode: number;
}

const TCP_LISTEN = "0A";

/** Parses /proc/net/tcp or /proc/net/tcp6 text into its listening sockets. */
export function parseProcNetTcp(text: string): ListeningSocket[] {
  const out: ListeningSocket[] = [];
  for (const line of text.split("\n").slice(1)) {
    const f = line.trim().split(/\s+/);
    if (f.length < 10 || f[3] !== TCP_LISTEN) continue;
    const local = f[1] as string;
    const port = Number.parseInt(local.slice(local.lastIndexOf(":") + 1), 16);
    const inode = Number(f[9]);
    if (Number.isInteger(port) && port > 0 && Number.isInteger(inode)) out.push({ port, inode });
  }
  return out;
}

/** An event's place in the order of all events since the watcher began (see `current`). */
type Listener = (event: PortEvent, seq: number) => void;

/** The ports listening at one moment: every event up to `seq` is reflected in `ports`. */
export interface PortSnapshot {
  seq: number;
  ports: { port: number; pid: number }[];
}

export class PortWatcher {
  private readonly listeners = new Set<Listener>();
  /** Open ports → pid that opened them (0 when unknown). */
  private known = new Map<number, number>();
  private timer: NodeJS.Timeout | null = null;
  private polling = false;
  private seq = 0;
  /** Looks up the owners of the baseline's ports (pid 0 until then), once per start. */
  private baseline: Promise<void> | null = null;

  constructor(
    private readonly pollMs: number,
    private readonly procRoot = "/proc",
  ) {}

  subscribe(listener: Listener): () => void {
    if (this.listeners.size === 0) this.start();
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
      if (this.listeners.size === 0) this.stop();
    };
  }

  /**
   * The ports listening now and their processes, for a subscriber (call it after `subscribe`): the
   * events it received with a `seq` up to the snapshot's are part of it, later ones are news.
   */
  async current(): Promise<PortSnapshot> {
    this.baseline ??= this.resolveBaseline();
    await this.baseline;
    const ports = [...this.known].sort((a, b) => a[0] - b[0]).map(([port, pid]) => ({ port, pid }));
    return { seq: this.seq, ports };
  }

  private async resolveBaseline(): Promise<void> {
    const unknown = [...this.known].filter(([, pid]) => pid === 0).map(([port]) => port);
    if (unknown.length === 0) return;
    const now = this.listeningPorts();
    const inodes = new Set<number>();
    for (const p of unknown) for (const i of now.get(p) ?? []) inodes.add(i);
    const owners = await findSocketOwners(inodes, this.procRoot);
    for (const port of unknown) {
      if (this.known.get(port) !== 0) continue; // closed (or reported anew) since
      const pids = (now.get(port) ?? []).map((i) => owners.get(i)).filter((p): p is number => p !== undefined);
      if (pids.length > 0) this.known.set(port, Math.min(...pids));
    }
  }

  private start(): void {
    this.known = new Map();
    this.baseline = null;
    for (const port of this.listeningPorts().keys()) this.known.set(port, 0);
    this.timer = setInterval(() => void this.poll(), this.pollMs);
    this.timer.unref();
  }

  private stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    this.known.clear();
  }

  /** Current listening ports → inodes of their sockets. */
  private listeningPorts(): Map<number, number[]> {
    const ports = new Map<number, number[]>();
    for (const file of ["net/tcp", "net/tcp6"]) {
      let text: string;
      try {
        text = readFileSync(`${this.procRoot}/${file}`, "utf8");
      } catch {
        continue;
      }
      for (const s of parseProcNetTcp(text)) {
        const list = ports.get(s.port);
        if (list) list.push(s.inode);
        else ports.set(s.port, [s.inode]);
      }
    }
    return ports;
  }

  private async poll(): Promise<void> {
    if (this.polling || this.listeners.size === 0) return;
    this.polling = true;
    try {
      const now = this.listeningPorts();
      const opened = [...now.keys()].filter((p) => !this.known.has(p)).sort((a, b) => a - b);
      const closed = [...this.known.keys()].filter((p) => !now.has(p)).sort((a, b) => a - b);
      for (const port of closed) {
        const pid = this.known.get(port) ?? 0;
        this.known.delete(port);
        this.emit({ type: "port_closed", port, pid });
      }
      if (opened.length === 0) return;
      const inodes = new Set<number>();
      for (const p of opened) for (const i of now.get(p) ?? []) inodes.add(i);
      const owners = await findSocketOwners(inodes, this.procRoot);
      if (this.timer === null) return; // stopped while scanning
      for (const port of opened) {
        const pids = (now.get(port) ?? []).map((i) => owners.get(i)).filter((p): p is number => p !== undefined);
        const pid = pids.length > 0 ? Math.min(...pids) : 0;
        this.known.set(port, pid);
        this.emit({ type: "port_opened", port, pid });
      }
    } finally {
      this.polling = false;
    }
  }

  private emit(event: PortEvent): void {
    const seq = ++this.seq;
    for (const l of this.listeners) {
      try {
        l(event, seq);
      } catch {
        // a failing listener must not stop the others
      }
    }
  }
}
