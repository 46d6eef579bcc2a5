import type { ExecSession } from "@ums/protocol";
import type { AgentConfig } from "../config.js";
import type { SessionUser } from "../util/users.js";
import { spawnSpec } from "./environment.js";
import type { ExecRequest } from "./request.js";
import { type Attachment, Session } from "./session.js";

// The agent's table of exec sessions, numbered 1, 2, … for the life of the agent (spec 2.8, 4.3). The
// sessions that may outlive their websocket are capped (config.maxDetachable): they live in the agent,
// so they end when the unit stops, and a unit holds a bounded number of them.

export class SessionTable {
  private readonly sessions = new Map<number, Session>();
  private nextId = 1;

  constructor(private readonly config: AgentConfig) {}

  /** Null when a new session may be made; else why not (the cap on sessions that outlive their clients). */
  refusal(req: ExecRequest): string | null {
    if (req.maxRunAfterDisconnectMs <= 0) return null;
    let n = 0;
    for (const s of this.sessions.values()) if (s.detachable) n++;
    if (n < this.config.maxDetachable) return null;
    return `the unit holds ${n} exec sessions that outlive their websocket, the most it allows; end one (POST /exec/{id}/kill, or exit it) or ask for max_run_after_disconnect=0`;
  }

  create(req: ExecRequest, user: SessionUser, owner: Attachment): Session {
    const session = new Session({
      id: this.nextId++,
      spec: spawnSpec(req, user),
      maxRunAfterDisconnectMs: req.maxRunAfterDisconnectMs,
      killGraceMs: this.config.killGraceMs,
      ringBytes: this.config.ringBytes,
      onRemove: (s) => {
        if (this.sessions.get(s.id) === s) this.sessions.delete(s.id);
      },
    });
    this.sessions.set(session.id, session);
    session.start(owner);
    return session;
  }

  get(id: number): Session | undefined {
    return this.sessions.get(id);
  }

  list(): ExecSession[] {
    return [...this.sessions.values()].sort((a, b) => a.id - b.id).map((s) => s.listItem());
  }

  counts(): { total: number; attached: number } {
    let attached = 0;
    for (const s of this.sessions.values()) if (s.attachedCount > 0) attached++;
    return { total: this.sessions.size, attached };
  }

  /** Ends every running session (agent shutdown). */
  terminateAll(): void {
    for (const s of this.sessions.values()) s.terminate();
  }
}
