import { randomUUID } from "node:crypto";
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Logger } from "pino";
import { ConfigError } from "../../config.js";
import type { NodeRecord } from "../../store/records.js";
import { NodeNameTakenError, type Store } from "../../store/store.js";
import { measureHost } from "./host-capacity.js";

import { HEARTBEAT_MS } from "./liveness.js";

const NODE_ID = /^node-[0-9a-f-]{36}$/;

/** This host's node id, kept in `<dataDir>/node-id`; undefined before its first start made one. */
export async function readNodeId(dataDir: string): Promise<string | undefined> {
  const file = join(dataDir, "node-id");
  const have = (await readFile(file, "utf8").catch(() => "")).trim();
  if (NODE_ID.test(have)) return have;
  if (have !== "") throw new Error(`${file} holds '${have.slice(0, 60)}', not a node id; remove it to make a new one`);
  return undefined;
}

/**
 * This host's node id, kept in `<dataDir>/node-id` (made at the first start). The local node reads
 * it before it re-adopts: it works on its own units only (docs/SCALE-OUT.md).
 */
export async function nodeId(dataDir: string): Promise<string> {
  const have = await readNodeId(dataDir);
  if (have) return have;
  const file = join(dataDir, "node-id");
  const id = `node-${randomUUID()}`;
  // wx: two starts at once on one data dir keep the first id (the second fails on the data dir's lock later).
  await writeFile(file, `${id}\n`, { flag: "wx", mode: 0o600 }).catch(async (err: NodeJS.ErrnoException) => {
    if (err.code !== "EEXIST") throw err;
  });
  return (await readFile(file, "utf8")).trim();
}

export interface RegistrationOpts {
  readonly store: Store;
  readonly dataDir: string;
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly unitSlots: number | undefined;
  /** The unit pool's mount (its filesystem's size and free space are the node's disk), else the data dir's. */
  readonly diskPath: string;
  /** Where API processes reach the node; empty: only the API in its own process. */
  readonly address: string;
  readonly version: string;
  readonly log: Logger;
  /** Tests shorten it. */
  readonly heartbeatMs?: number;
}

/** The node's name is another node's: the start stops and says how to go on (a usage error of `ums serve`). */
export class NodeNameError extends ConfigError {}

function nameTaken(name: string, holder: NodeRecord): NodeNameError {
  return new NodeNameError(
    `node name '${name}' is taken by another node (${holder.id}, last heartbeat ${holder.heartbeatAt}): ` +
      `give this host another with --node-name, or remove the other with 'ums node remove ${name}' if it is gone for good`,
  );
}

/**
 * Issue #15 part 1: this host as a node of the database. `register` writes its row (capacity,
 * labels, address; units from before nodes are claimed); then a heartbeat every `HEARTBEAT_MS`
 * writes what it has free, until `close`.
 */
export class NodeRegistration {
  private timer: NodeJS.Timeout | undefined;
  private beating: Promise<void> = Promise.resolve();
  private failing = false;

  private constructor(
    private readonly opts: RegistrationOpts,
    private current: NodeRecord,
  ) {}

  get node(): NodeRecord {
    return this.current;
  }

  /**
   * Fails with `NodeNameError` before the slow parts of a start when this node cannot join the
   * database's others (docs/SCALE-OUT.md): its name is another's; or one of them, or this one, has no
   * endpoint (`--node-listen`): a node without one serves only the API in its own process, so API
   * processes could not reach all units.
   */
  static async check(opts: Pick<RegistrationOpts, "store" | "dataDir" | "name" | "address">): Promise<void> {
    const id = await nodeId(opts.dataDir);
    const others = (await opts.store.nodes.list()).filter((n) => n.id !== id);
    const same = others.find((n) => n.name === opts.name);
    if (same) throw nameTaken(opts.name, same);
    const closed = opts.address === "" ? others[0] : others.find((n) => n.address === "");
    if (!closed) return;
    throw new NodeNameError(
      `this database already has node '${closed.name}' (${closed.id}, last heartbeat ${closed.heartbeatAt}), and ` +
        (opts.address === ""
          ? "nodes that share a database need endpoints API processes reach: start this one with --node-listen HOST:PORT and UMS_NODE_SECRET"
          : `that node has no endpoint (it was started without --node-listen): restart it with one`) +
        `, give this host a database of its own, or remove the other with 'ums node remove ${closed.name}' if it is gone for good`,
    );
  }

  static async register(opts: RegistrationOpts): Promise<NodeRegistration> {
    const reg = new NodeRegistration(opts, await NodeRegistration.write(opts, await nodeId(opts.dataDir)));
    const claimed = await opts.store.nodes.claimUnplaced(reg.current.id);
    if (claimed.units + claimed.templates + claimed.images > 0)
      opts.log.info(
        { node: reg.current.name, ...claimed },
        "node took the units, templates and images that named none",
      );
    return reg;
  }

  private static async write(opts: RegistrationOpts, id: string): Promise<NodeRecord> {
    const { capacity, free } = await measureHost([opts.diskPath, opts.dataDir], opts.unitSlots);
    const now = new Date().toISOString();
    try {
      return await opts.store.nodes.register(
        {
          id,
          name: opts.name,
          address: opts.address,
          capacity,
          free,
          labels: opts.labels,
          version: opts.version,
          startedAt: now,
        },
        now,
      );
    } catch (err) {
      if (!(err instanceof NodeNameTakenError)) throw err;
      throw nameTaken(opts.name, err.holder);
    }
  }

  /** Starts the heartbeat. */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      this.beating = this.beating.then(() => this.beat());
    }, this.opts.heartbeatMs ?? HEARTBEAT_MS);
    this.timer.unref();
  }

  /** One heartbeat; its failures are logged (once per run of them), never thrown. */
  async beat(): Promise<void> {
    try {
      const { free } = await measureHost([this.opts.diskPath, this.opts.dataDir], this.opts.unitSlots);
      const ok = await this.opts.store.nodes.heartbeat(this.current.id, free, new Date().toISOString());
      // Removed by an operator while it ran: it registers again (a node that runs is a node).
      if (!ok) this.current = await NodeRegistration.write(this.opts, this.current.id);
      if (this.failing) this.opts.log.info({ node: this.current.name }, "node heartbeat written again");
      this.failing = false;
    } catch (err) {
      if (!this.failing) {
        this.opts.log.warn(
          { node: this.current.name, err: err instanceof Error ? err.message : String(err) },
          "node heartbeat failed; the node shows as down to placement until one is written",
        );
      }
      this.failing = true;
    }
  }

  /** Stops the heartbeat (waits for one under way). */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.beating;
  }
}
