import pg from "pg";
import { AUTH_CHANNEL } from "../kysely/auth-generation.js";
import { EVENTS_CHANNEL, type EventNotice, WEBHOOKS_CHANNEL } from "../kysely/events.js";
import type { EventRecord } from "../records.js";
import type { EventFeed, EventFeedHandlers, EventStore } from "../store.js";

/** The advisory lock (session-level, on the listening connection) its holder delivers webhooks under. */
const WEBHOOK_LEAD_KEY = 0x756d_7377_6862; // "umswhb"
/** A broken listening connection is made again after this long (then every such interval). */
const RECONNECT_MS = 1_000;

/**
 * Issue #15 (docs/EVENTS.md, "Several processes"): one connection per process that LISTENs to the
 * deployment's events and webhook changes. PostgreSQL delivers notifications in commit order, and
 * an organization's events commit in id order (kysely/events.ts): each listener hears them in
 * order. Notices too large to carry the event name it; they are read in turn, so order holds.
 * The connection also holds the webhook lead (`lead`). When it breaks, listeners are told
 * (`lost`), it is made again, and they are told from when (`resumed`) to read what they missed.
 */
export class PostgresEventFeed implements EventFeed {
  private client: pg.Client | undefined;
  private connecting: Promise<void> | undefined;
  private readonly handlers = new Set<EventFeedHandlers>();
  private closed = false;
  private leading = false;
  private lostAt: number | undefined;
  private timer: NodeJS.Timeout | undefined;
  /** Connections made so far, and token or organization changes heard on the current one. */
  private connections = 0;
  private authChanges = 0;
  /** Notices are handled one after another (a large one is read from the store first). */
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly url: string,
    private readonly events: Pick<EventStore, "get">,
    private readonly onError: (err: unknown, what: string) => void = () => {},
  ) {}

  get listening(): boolean {
    return this.client !== undefined;
  }

  subscribe(h: EventFeedHandlers): () => void {
    this.handlers.add(h);
    return () => this.handlers.delete(h);
  }

  start(): Promise<void> {
    if (this.client) return Promise.resolve();
    this.connecting ??= this.connect().finally(() => {
      this.connecting = undefined;
    });
    return this.connecting;
  }

  private async connect(): Promise<void> {
    const client = new pg.Client({ connectionString: this.url, application_name: `ums events ${process.pid}` });
    client.on("notification", (n) => this.notice(n.channel, n.payload ?? ""));
    client.on("error", (err) => this.broken(client, err));
    client.on("end", () => this.broken(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${EVENTS_CHANNEL}`);
      await client.query(`LISTEN ${WEBHOOKS_CHANNEL}`);
      await client.query(`LISTEN ${AUTH_CHANNEL}`);
    } catch (err) {
      client.removeAllListeners("end");
      client.on("error", () => {});
      await client.end().catch(() => {});
      throw err;
    }
    if (this.closed) {
      await client.end().catch(() => {});
      return;
    }
    this.client = client;
    this.connections++;
    this.authChanges = 0;
    const lostAt = this.lostAt;
    this.lostAt = undefined;
    if (lostAt !== undefined) for (const h of this.handlers) this.call(() => h.resumed?.(lostAt), "resumed");
  }

  private broken(client: pg.Client, err?: unknown): void {
    if (this.client !== client) return;
    this.client = undefined;
    this.leading = false;
    this.lostAt = Date.now();
    client.end().catch(() => {});
    if (this.closed) return;
    if (err) this.onError(err, "the events' listening connection broke; it is made again");
    for (const h of this.handlers) this.call(() => h.lost?.(), "lost");
    this.reconnect();
  }

  private reconnect(): void {
    if (this.closed || this.timer) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.start().catch((err: unknown) => {
        this.onError(err, "listening to events again failed; it is tried again");
        this.reconnect();
      });
    }, RECONNECT_MS);
    this.timer.unref();
  }

  authGeneration(): string | undefined {
    return this.client ? `${this.connections}.${this.authChanges}` : undefined;
  }

  authChanged(): void {
    this.authChanges++;
  }

  private notice(channel: string, payload: string): void {
    if (channel === AUTH_CHANNEL) {
      this.authChanged();
      return;
    }
    if (channel === WEBHOOKS_CHANNEL) {
      for (const h of this.handlers) this.call(() => h.webhooksChanged?.(payload), "webhooksChanged");
      return;
    }
    if (channel !== EVENTS_CHANNEL) return;
    this.chain = this.chain
      .then(async () => {
        const e = await this.eventOf(payload);
        if (e) for (const h of this.handlers) this.call(() => h.event?.(e), "event");
      })
      .catch((err: unknown) => this.onError(err, "an event notice could not be read"));
  }

  private async eventOf(payload: string): Promise<EventRecord | undefined> {
    const notice = JSON.parse(payload) as EventNotice;
    if ("e" in notice) return Object.freeze(notice.e);
    return this.events.get(notice.id);
  }

  private call(fn: () => void, what: string): void {
    try {
      fn();
    } catch (err) {
      this.onError(err, `an event feed listener failed (${what})`);
    }
  }

  async lead(): Promise<boolean> {
    const client = this.client;
    if (!client) return false;
    if (this.leading) return true;
    const r = await client.query<{ ok: boolean }>("select pg_try_advisory_lock($1) as ok", [WEBHOOK_LEAD_KEY]);
    // The connection may have broken meanwhile: the lock went with it.
    this.leading = r.rows[0]?.ok === true && this.client === client;
    return this.leading;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    await this.connecting?.catch(() => {});
    const client = this.client;
    this.client = undefined;
    this.leading = false;
    await this.chain;
    await client?.end().catch(() => {});
  }
}
