import { randomBytes } from "node:crypto";
import { request as httpRequest } from "node:http";
import { request as httpsRequest } from "node:https";
import { ErrorCode, type EventType, type WebhookCreated, type WebhookInfo } from "@ums/protocol";
import { SIGNATURE_HEADER, signWebhook, TIMESTAMP_HEADER } from "@ums/protocol/webhook-signature";
import type { Logger } from "pino";
import { ApiError } from "../api/errors.js";
import {
  pinnedLookup,
  pinTarget,
  type ResolveHost,
  systemResolver,
  TargetRefused,
} from "../connectors/gateway/pinned-target.js";
import { type Cidr, checkHost, parseRanges, rangeLabel } from "../connectors/gateway/target-address.js";
import type { Keys } from "../connectors/secrets/secrets.js";
import type { ConnectorRecord, EventRecord, OrgRecord, WebhookRecord } from "../store/records.js";
import type { Store } from "../store/store.js";
import { KeyedMutex } from "../util/keyed-mutex.js";
import { eventIdFloor } from "./event-id.js";
import { type EventLog, eventView } from "./event-log.js";

/** Issue #17: webhooks an organization may have. */
export const MAX_WEBHOOKS_PER_ORG = 20;
/** The waits before the retries of a delivery that failed (ms): 1, 2, 4, 8 and 16 s. */
export const RETRY_DELAYS_MS: readonly number[] = [1000, 2000, 4000, 8000, 16_000];
/** How long one attempt may take, connection to the end of the answer. */
export const ATTEMPT_TIMEOUT_MS = 10_000;
/** Deliveries waiting per webhook; beyond, the oldest is dropped (and the drop recorded). */
const MAX_QUEUED = 1000;
/** Issue #15: a process that does not deliver webhooks asks for the lead this often. */
const LEAD_RETRY_MS = 5_000;
const ALL_RANGES: readonly Cidr[] = parseRanges(["0.0.0.0/0", "::/0"], "all");

export interface WebhooksOpts {
  readonly store: Store;
  readonly events: EventLog;
  /** The master key ring of the connectors: secrets are sealed as connectors' are. */
  readonly keys: Keys;
  readonly log: Logger;
  /** `--webhooks-allow-private`: loopback and private targets are allowed (tests, private networks). */
  readonly allowPrivate: boolean;
  /** How names in webhook URLs are resolved (default: the system resolver). */
  readonly resolve?: ResolveHost;
  readonly retryDelaysMs?: readonly number[];
}

function info(w: WebhookRecord): WebhookInfo {
  return {
    id: w.id,
    url: w.url,
    events: w.types as EventType[],
    created_at: w.createdAt,
    last_status: w.lastStatus,
    last_error: w.lastError,
    last_attempt_at: w.lastAttemptAt,
    last_event_id: w.lastEventId,
  };
}

/** One webhook's deliveries: in order, one at a time, each retried on failure. */
class Delivery {
  readonly queue: EventRecord[] = [];
  /** The last event queued (after a take-over's catch-up, live events up to it are queued already). */
  upTo = "";
  running = false;
  timer: NodeJS.Timeout | undefined;
  wake: (() => void) | undefined;
  closed = false;
  constructor(readonly hook: WebhookRecord) {}
}

/**
 * Issue #17 webhooks: organizations register URLs for event types; each event is POSTed to every
 * matching webhook of its organization, signed (X-UMS-Signature over the timestamp and the body,
 * `@ums/protocol/webhook-signature`), in order per webhook, retried after 1, 2, 4, 8 and 16 s, each
 * attempt bounded to 10 s; the last attempt's outcome is recorded. The target's address is checked
 * (public unicast only, unless allowed) and the connection pinned to it (no DNS rebinding).
 * Deliveries waiting when the server stops are lost.
 *
 * Issue #15: with PostgreSQL, API processes share the work: one of them (the holder of the feed's
 * lead) delivers every process's events; the others ask for the lead every LEAD_RETRY_MS. A process
 * that takes it over (the first at start, or after the deliverer died) first queues, per webhook,
 * what was recorded after the last event each attempted (one whose retries were cut is not sent again).
 */
export class Webhooks {
  private readonly byOrg = new Map<string, Promise<WebhookRecord[]>>();
  private readonly deliveries = new Map<string, Delivery>();
  private readonly orgQueue = new KeyedMutex();
  private readonly creates = new KeyedMutex();
  private unsubscribe: (() => void) | undefined;
  private unsubscribeFeed: (() => void) | undefined;
  private closed = false;
  private readonly allowed: readonly Cidr[];
  /** This process delivers (always without a feed; with one, while it holds the lead). */
  private leading = false;
  /** While a take-over reads what to catch up on, live events wait here. */
  private waiting: EventRecord[] | undefined;
  private leadTimer: NodeJS.Timeout | undefined;

  constructor(private readonly o: WebhooksOpts) {
    this.allowed = o.allowPrivate ? ALL_RANGES : [];
  }

  start(): void {
    this.unsubscribe = this.o.events.subscribe((e) => this.dispatch(e));
    const feed = this.o.store.feed;
    if (!feed) {
      this.leading = true;
      return;
    }
    this.unsubscribeFeed = feed.subscribe({
      webhooksChanged: (orgId) => this.changed(orgId),
      lost: () => this.stepDown(),
    });
    const ask = () => {
      this.takeLead(feed).catch((err: unknown) =>
        this.o.log.warn({ err }, "taking over webhook deliveries failed; it is tried again"),
      );
    };
    ask();
    this.leadTimer = setInterval(ask, LEAD_RETRY_MS);
    this.leadTimer.unref();
  }

  close(): void {
    this.closed = true;
    this.unsubscribe?.();
    this.unsubscribeFeed?.();
    clearInterval(this.leadTimer);
    this.stepDown();
  }

  /** Deliveries stop here (the lead went with the feed's connection, or the server stops). */
  private stepDown(): void {
    this.leading = false;
    this.waiting = undefined;
    for (const d of this.deliveries.values()) this.stopDelivery(d);
    this.deliveries.clear();
  }

  /** Issue #15: takes the lead if it is free, then catches up on what no deliverer sent. */
  private async takeLead(feed: NonNullable<Store["feed"]>): Promise<void> {
    if (this.leading || this.waiting || this.closed) return;
    if (!(await feed.lead()) || this.closed) return;
    this.waiting = [];
    try {
      for (const hook of await this.o.store.webhooks.listAll()) {
        const after = hook.lastEventId ?? eventIdFloor(Date.parse(hook.createdAt));
        const types = hook.types.length > 0 ? hook.types : undefined;
        const missed = await this.o.store.events.list(hook.orgId, { after, types, limit: MAX_QUEUED });
        for (const e of missed) this.queue(hook, e);
      }
    } catch (err) {
      this.stepDown();
      throw err;
    }
    const waiting = this.waiting;
    this.waiting = undefined;
    this.leading = true;
    this.o.log.info("this process delivers the deployment's webhooks");
    for (const e of waiting ?? []) this.dispatch(e);
  }

  /** Another process created or deleted one of the organization's webhooks. */
  private changed(orgId: string): void {
    this.byOrg.delete(orgId);
    if (!this.leading) return;
    this.hooksOf(orgId)
      .then((hooks) => {
        const ids = new Set(hooks.map((h) => h.id));
        for (const [id, d] of this.deliveries) {
          if (d.hook.orgId === orgId && !ids.has(id)) {
            this.stopDelivery(d);
            this.deliveries.delete(id);
          }
        }
      })
      .catch((err: unknown) => this.o.log.warn({ err, org: orgId }, "webhooks could not be read again"));
  }

  private stopDelivery(d: Delivery): void {
    d.closed = true;
    d.queue.length = 0;
    if (d.timer) clearTimeout(d.timer);
    d.wake?.();
  }

  private hooksOf(orgId: string): Promise<WebhookRecord[]> {
    let p = this.byOrg.get(orgId);
    if (!p) {
      p = this.o.store.webhooks.list(orgId);
      this.byOrg.set(orgId, p);
      p.catch(() => this.byOrg.delete(orgId));
    }
    return p;
  }

  /** Queues the event for each matching webhook, in event order (one organization's after another). */
  private dispatch(e: EventRecord): void {
    if (this.closed) return;
    if (!this.leading) {
      this.waiting?.push(e);
      return;
    }
    void this.orgQueue
      .run(e.orgId, async () => {
        for (const hook of await this.hooksOf(e.orgId)) {
          if (hook.types.length > 0 && !hook.types.includes(e.type)) continue;
          this.queue(hook, e);
        }
      })
      .catch((err) => this.o.log.error({ err, org: e.orgId }, "webhooks could not be read; an event is not delivered"));
  }

  private queue(hook: WebhookRecord, e: EventRecord): void {
    if (!this.leading && !this.waiting) return;
    let d = this.deliveries.get(hook.id);
    if (!d) {
      d = new Delivery(hook);
      this.deliveries.set(hook.id, d);
    }
    // Queued already (a take-over's catch-up reads what live events bring too).
    if (e.id <= d.upTo) return;
    d.upTo = e.id;
    d.queue.push(e);
    if (d.queue.length > MAX_QUEUED) {
      const dropped = d.queue.shift() as EventRecord;
      this.o.log.warn(
        { webhook: hook.id, event: dropped.id },
        "a webhook's queue is full; its oldest delivery is dropped",
      );
    }
    if (!d.running) {
      this.run(d).catch((err) => this.o.log.error({ err, webhook: hook.id }, "webhook delivery failed"));
    }
  }

  private async run(d: Delivery): Promise<void> {
    d.running = true;
    try {
      for (;;) {
        const e = d.queue[0];
        if (!e || d.closed) return;
        await this.deliver(d, e);
        d.queue.shift();
      }
    } catch (err) {
      this.o.log.error({ err, webhook: d.hook.id }, "webhook delivery failed");
    } finally {
      d.running = false;
    }
  }

  private sleep(d: Delivery, ms: number): Promise<void> {
    return new Promise((resolve) => {
      d.wake = resolve;
      d.timer = setTimeout(resolve, ms);
    });
  }

  /** Attempts until one succeeds or the retries run out; each attempt's outcome is recorded. */
  private async deliver(d: Delivery, e: EventRecord): Promise<void> {
    const delays = this.o.retryDelaysMs ?? RETRY_DELAYS_MS;
    const body = JSON.stringify(eventView(e));
    for (let attempt = 0; attempt <= delays.length; attempt++) {
      if (d.closed) return;
      if (attempt > 0) await this.sleep(d, delays[attempt - 1] as number);
      if (d.closed) return;
      const outcome = await this.attempt(d.hook, e, body);
      await this.o.store.webhooks
        .recordAttempt(d.hook.id, { ...outcome, at: new Date().toISOString(), eventId: e.id })
        .catch((err) => this.o.log.warn({ err, webhook: d.hook.id }, "a webhook attempt could not be recorded"));
      if (outcome.status >= 200 && outcome.status < 300) return;
      this.o.log.info(
        { webhook: d.hook.id, event: e.id, status: outcome.status, error: outcome.error, attempt: attempt + 1 },
        "a webhook delivery failed",
      );
    }
  }

  private async attempt(
    hook: WebhookRecord,
    e: EventRecord,
    body: string,
  ): Promise<{ status: number; error: string | null }> {
    let secret: string;
    try {
      secret = await this.openSecret(hook);
    } catch (err) {
      return { status: 0, error: `the webhook's secret does not open: ${(err as Error).message}` };
    }
    const url = new URL(hook.url);
    let pinned: Awaited<ReturnType<typeof pinTarget>>;
    try {
      pinned = await pinTarget(url, {
        resolve: this.o.resolve ?? systemResolver,
        allowed: this.allowed,
        timeoutMs: 5000,
      });
    } catch (err) {
      const why =
        err instanceof TargetRefused
          ? err.message.replace("the gateway reaches", "webhooks reach")
          : (err as Error).message;
      return { status: 0, error: why };
    }
    const ts = Math.floor(Date.now() / 1000);
    const headers = {
      "content-type": "application/json",
      "user-agent": "ums-webhooks/1",
      "x-ums-event": e.type,
      "x-ums-delivery": e.id,
      [TIMESTAMP_HEADER]: String(ts),
      [SIGNATURE_HEADER]: signWebhook(secret, ts, body),
      "content-length": String(Buffer.byteLength(body)),
    };
    return new Promise((resolve) => {
      let settled = false;
      const finish = (status: number, error: string | null) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve({ status, error });
      };
      const req = (url.protocol === "https:" ? httpsRequest : httpRequest)(url, {
        method: "POST",
        headers,
        lookup: pinnedLookup(pinned),
        agent: false,
      });
      const timer = setTimeout(() => {
        req.destroy();
        finish(0, `no answer within ${ATTEMPT_TIMEOUT_MS / 1000}s`);
      }, ATTEMPT_TIMEOUT_MS);
      req.on("response", (res) => {
        const status = res.statusCode ?? 0;
        // The answer's body is read (bounded) and dropped: the status is what counts.
        let seen = 0;
        res.on("data", (c: Buffer) => {
          seen += c.length;
          if (seen > 64 * 1024) res.destroy();
        });
        res.on("end", () => finish(status, status >= 200 && status < 300 ? null : `answered ${status}`));
        res.on("error", () => finish(status, `answered ${status}; the body was cut`));
        res.on("close", () => finish(status, status >= 200 && status < 300 ? null : `answered ${status}`));
      });
      req.on("error", (err) => finish(0, err.message));
      req.end(body);
    });
  }

  private async openSecret(hook: WebhookRecord): Promise<string> {
    // The key ring's `open` reads only a record's id and sealed secret (the id is the AAD).
    const opened = await this.o.keys.open({ id: hook.id, secret: hook.secret } as ConnectorRecord);
    if (typeof opened.apiKey !== "string") throw new Error("no secret in the envelope");
    return opened.apiKey;
  }

  /** Checks a webhook URL as far as can be without a lookup (a name is checked at each delivery). */
  private checkUrl(text: string): URL {
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      throw ApiError.validation(["url: is not a URL"]);
    }
    if (url.protocol !== "http:" && url.protocol !== "https:")
      throw ApiError.validation(["url: must be http:// or https://"]);
    if (url.username || url.password) {
      throw ApiError.validation(["url: must not carry a user name or password (deliveries are signed instead)"]);
    }
    if (url.hash) throw ApiError.validation(["url: must not have a #fragment"]);
    if (this.o.allowPrivate) return url;
    const host = checkHost(url.hostname, this.allowed);
    const refuse = (why: string) =>
      new ApiError(
        400,
        ErrorCode.WebhookTargetRefused,
        `url: ${why}; webhooks reach only public addresses unless the server runs with --webhooks-allow-private`,
      );
    if (host.kind === "refused") throw refuse(host.reason);
    if (host.kind === "address" && host.checked.refused) {
      throw refuse(`${host.checked.address} is a ${rangeLabel(host.checked.refused)} address`);
    }
    return url;
  }

  async create(org: OrgRecord, url: string, types: readonly string[]): Promise<WebhookCreated> {
    const checked = this.checkUrl(url);
    return this.creates.run(org.id, async () => {
      const id = `whk_${randomBytes(12).toString("hex")}`;
      const secret = `whsec_${randomBytes(32).toString("base64url")}`;
      const sealed = await this.o.keys.seal({ apiKey: secret }, id);
      const rec: WebhookRecord = {
        id,
        orgId: org.id,
        url: checked.href,
        types: [...new Set(types)],
        secret: sealed.secret,
        keyVersion: sealed.keyVersion,
        createdAt: new Date().toISOString(),
        lastStatus: null,
        lastError: null,
        lastAttemptAt: null,
        lastEventId: null,
      };
      if (!(await this.o.store.webhooks.insert(rec, MAX_WEBHOOKS_PER_ORG))) {
        throw new ApiError(
          403,
          ErrorCode.LimitReached,
          `organization '${org.slug}' has ${MAX_WEBHOOKS_PER_ORG} webhooks, as many as it may; delete one first`,
        );
      }
      this.byOrg.delete(org.id);
      return { ...info(rec), secret };
    });
  }

  async list(org: OrgRecord): Promise<WebhookInfo[]> {
    return (await this.o.store.webhooks.list(org.id)).map(info);
  }

  async get(org: OrgRecord, id: string): Promise<WebhookInfo> {
    const w = await this.o.store.webhooks.get(org.id, id);
    if (!w) throw new ApiError(404, ErrorCode.WebhookNotFound, `the organization has no webhook '${id}'`);
    return info(w);
  }

  async delete(org: OrgRecord, id: string): Promise<void> {
    if (!(await this.o.store.webhooks.delete(org.id, id))) {
      throw new ApiError(404, ErrorCode.WebhookNotFound, `the organization has no webhook '${id}'`);
    }
    this.byOrg.delete(org.id);
    const d = this.deliveries.get(id);
    if (d) {
      this.stopDelivery(d);
      this.deliveries.delete(id);
    }
  }
}
