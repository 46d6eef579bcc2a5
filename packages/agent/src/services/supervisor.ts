import { join } from "node:path";
import type { ServiceResponse } from "@ums/protocol";
import type { SessionUser } from "../util/users.js";
import { type Checked, checkDefinition, type ServiceDefinition, startOrder } from "./definition.js";
import { ServiceLog } from "./logs.js";
import { loadServices, type StoredService, saveServices } from "./persist.js";
import { Service } from "./service.js";

// The unit's service manager (spec 3.2, docs/ARCHITECTURE.md section 5): definitions persisted with the unit's
// files, services started in `needs` order on every boot (a service waits for the ones it needs to
// run, up to NEEDS_WAIT_MS), crashed ones restarted with backoff, stops sticky across boots.

export interface SupervisorOpts {
  /** The definitions file (on the unit's filesystem, e.g. /var/lib/ums/services.json). */
  stateFile: string;
  /** Where the log files are written, and the path the unit sees them under (/.unit/logs/services). */
  logDir: string;
  publicLogDir: string;
  user: SessionUser;
}

const NEEDS_WAIT_MS = 10_000;

export class Supervisor {
  private readonly services = new Map<string, Service>();
  private readonly sticky = new Map<string, boolean>();

  constructor(private readonly opts: SupervisorOpts) {}

  /** Loads the definitions and starts every service not stopped on purpose. */
  boot(): void {
    const stored = loadServices(this.opts.stateFile);
    // The file is root's in the unit, but check each entry as a request would be (needs and ports
    // are checked against the whole set below): a bad entry is skipped, never started.
    for (const [name, s] of stored) {
      const checked = checkDefinition(name, s?.def, new Map(), { loading: true });
      if (!checked.ok) continue;
      this.services.set(name, this.make(name, checked.def));
      this.sticky.set(name, s.stopped === true);
    }
    const defs = this.definitions();
    for (const name of startOrder(defs)) if (!this.sticky.get(name)) void this.start(name, false);
  }

  has(name: string): boolean {
    return this.services.has(name);
  }

  service(name: string): Service | undefined {
    return this.services.get(name);
  }

  list(): ServiceResponse[] {
    return [...this.services.keys()].sort().map((n) => this.describe(n) as ServiceResponse);
  }

  describe(name: string): ServiceResponse | undefined {
    const s = this.services.get(name);
    if (!s) return undefined;
    const r: ServiceResponse = {
      name,
      cmd: s.def.cmd,
      args: s.def.args,
      needs: s.def.needs,
      http_port: s.def.http_port ?? null,
      state: s.state(),
    };
    if (s.def.dir !== undefined) r.dir = s.def.dir;
    return r;
  }

  /** The port of the service that is the unit's HTTP target, if any. */
  httpPort(): number | null {
    for (const s of this.services.values()) if (typeof s.def.http_port === "number") return s.def.http_port;
    return null;
  }

  logFiles(name: string): Record<string, string> {
    return this.services.get(name)?.log.logFiles(this.opts.publicLogDir) ?? {};
  }

  /** Creates or replaces a definition (the old process is stopped first); the caller starts it. */
  async put(name: string, body: unknown): Promise<Checked> {
    const others = this.definitions();
    others.delete(name);
    const checked = checkDefinition(name, body, others);
    if (!checked.ok) return checked;
    const old = this.services.get(name);
    if (old) {
      old.def = checked.def;
      this.sticky.set(name, false);
      this.persist();
      await old.stop();
    } else {
      this.services.set(name, this.make(name, checked.def));
      this.sticky.set(name, false);
      this.persist();
    }
    return checked;
  }

  async remove(name: string): Promise<boolean> {
    const s = this.services.get(name);
    if (!s) return false;
    const dependents = [...this.services.entries()].filter(([, o]) => o.def.needs.includes(name)).map(([n]) => n);
    if (dependents.length > 0) throw new DependencyError(name, dependents);
    this.services.delete(name);
    this.sticky.delete(name);
    this.persist();
    await s.stop();
    s.log.close();
    return true;
  }

  /**
   * Starts a service (and first the services it needs that do not run), clearing a sticky stop.
   * Resolves once its process was spawned.
   */
  async start(name: string, fresh: boolean, chain: string[] = []): Promise<void> {
    const s = this.services.get(name);
    if (!s || chain.includes(name)) return;
    if (this.sticky.get(name)) {
      this.sticky.set(name, false);
      this.persist();
    }
    if (s.alive) return;
    s.status = "starting";
    await Promise.all(
      s.def.needs.map(async (n) => {
        const need = this.services.get(n);
        if (need && !need.alive && need.status !== "failed") await this.start(n, fresh, [...chain, name]);
        await this.whenRunning(n);
      }),
    );
    if (this.services.get(name) === s && s.status === "starting") s.spawn(fresh);
  }

  /** Stops a service and keeps it stopped (also across boots) until it is started again. */
  async stop(name: string, graceMs?: number): Promise<number> {
    const s = this.services.get(name);
    if (!s) return 0;
    this.sticky.set(name, true);
    this.persist();
    return s.stop(graceMs);
  }

  private async whenRunning(name: string): Promise<void> {
    const deadline = Date.now() + NEEDS_WAIT_MS;
    while (Date.now() < deadline) {
      const s = this.services.get(name);
      if (!s || s.status === "running" || s.status === "stopped") return;
      await new Promise((r) => setTimeout(r, 25));
    }
  }

  private make(name: string, def: ServiceDefinition): Service {
    return new Service(name, def, new ServiceLog(this.opts.logDir, name), this.opts.user);
  }

  private definitions(): Map<string, ServiceDefinition> {
    return new Map([...this.services].map(([n, s]) => [n, s.def]));
  }

  private persist(): void {
    const out = new Map<string, StoredService>();
    for (const [n, s] of this.services) out.set(n, { def: s.def, stopped: this.sticky.get(n) ?? false });
    saveServices(this.opts.stateFile, out);
  }
}

export class DependencyError extends Error {
  constructor(
    readonly service: string,
    readonly dependents: string[],
  ) {
    super(
      `service '${service}' is needed by ${dependents.map((d) => `'${d}'`).join(", ")}; delete or change those first`,
    );
  }
}

export function defaultPaths(root = "/"): { stateFile: string; logDir: string; publicLogDir: string } {
  return {
    stateFile: join(root, "var/lib/ums/services.json"),
    logDir: join(root, "var/lib/ums/logs/services"),
    publicLogDir: "/.unit/logs/services",
  };
}
