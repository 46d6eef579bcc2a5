import type {
  CreateUnitRequest,
  HealthCheck as WireHealthCheck,
  Unit as WireUnit,
  UnitList as WireUnitList,
  UnitUsage as WireUnitUsage,
  UpgradeResponse as WireUpgradeResponse,
} from "@ums/protocol";
import { Checkpoints } from "./checkpoints.js";
import { type ClientOpts, encodePath, resolveClient, type UmsClient } from "./client.js";
import { Commands } from "./commands.js";
import type { RequestOpts } from "./config.js";
import { Files } from "./files.js";
import { paginate } from "./pagination.js";
import { Policies } from "./policies.js";
import { Services } from "./services.js";
import { Sessions } from "./sessions.js";
import { openTunnel, type Tunnel, type TunnelOpts } from "./tunnel.js";
import {
  healthFromWire,
  type UnitHealth,
  type UnitInfo,
  type UnitStatus,
  type UpgradeResult,
  type UrlSettings,
  type UrlSettingsUpdate,
  unitInfoFromWire,
  urlSettingsToWire,
} from "./unit-info.js";
import { type UnitUsage, type UsageWindow, usageFromWire } from "./usage.js";

/** Connection settings (or a ready `client`) plus per-call options; taken by every static `Unit` method. */
export interface UnitOpts extends ClientOpts, RequestOpts {}

export interface UnitCreateOpts extends UnitOpts {
  /** Who may reach the unit's URL. Default: `{ auth: "unit" }`. */
  urlSettings?: UrlSettingsUpdate | undefined;
  /** Fork: start with the files of checkpoint `checkpoint` (e.g. `v3`) of another unit of the organization. */
  from?: { unit: string; checkpoint: string } | undefined;
  /** Start from an organization template (issue #18): its files, services and policies (not with `from`). */
  template?: string | undefined;
  /** Start from an image (issue #18; `client.images`): `base`, the default, or one the organization imported. */
  image?: string | undefined;
  /** Labels of the new unit (spec 2.1 `labels`). */
  labels?: readonly string[] | undefined;
}

export interface UnitListOpts extends UnitOpts {
  /** Only units whose name starts with this. */
  prefix?: string | undefined;
  /** Units per request (the server's `max_results`, 1-500, default 50). */
  pageSize?: number | undefined;
  /** Start after the page that returned this token (`nextContinuationToken` of `listPage`). */
  continuationToken?: string | undefined;
}

/** One page of `Unit.listPage` (spec 2.3). The counts are of the units on this page. */
export interface UnitPage {
  units: Unit[];
  hasMore: boolean;
  /** Pass as `continuationToken` to get the next page; null on the last page. */
  nextContinuationToken: string | null;
  running: number;
  warm: number;
  cold: number;
  /** Organization slug. */
  organization: string;
  /** Organization-wide limit of running units. */
  runningLimit: number | undefined;
  /** Organization-wide limit of warm units. */
  warmLimit: number | undefined;
}

const requestOpts = (o: RequestOpts) => ({ timeoutMs: o.timeoutMs, signal: o.signal });

/**
 * A unit: a named, persistent environment in the token's organization. Get one with
 * `Unit.create`, `Unit.connect` or `Unit.list`; its fields are a snapshot that `refresh()` renews.
 */
export class Unit {
  readonly #client: UmsClient;
  #info: UnitInfo;
  /** Runs commands in the unit (spec 4.3). */
  readonly commands: Commands;
  /** The unit's filesystem (spec 4.4). */
  readonly files: Files;
  /** The unit's services (spec 4.6). */
  readonly services: Services;
  /** The unit's checkpoints (spec 4.2). */
  readonly checkpoints: Checkpoints;
  /** Exec sessions over websockets: TTY, attach, list, kill (spec 4.3). */
  readonly sessions: Sessions;
  /** The unit's network policy (spec 4.5). */
  readonly policies: Policies;

  private constructor(client: UmsClient, info: UnitInfo) {
    this.#client = client;
    this.#info = info;
    const path = () => this.#path();
    this.commands = new Commands(client, path);
    this.files = new Files(client, path, this.commands);
    this.services = new Services(client, path);
    this.checkpoints = new Checkpoints(client, path);
    this.sessions = new Sessions(client, path);
    this.policies = new Policies(client, path);
  }

  /** @internal Wraps a unit as the server returned it. */
  static fromWire(client: UmsClient, unit: WireUnit): Unit {
    return new Unit(client, unitInfoFromWire(unit));
  }

  /**
   * Creates a unit (it starts cold); with `from`, a fork of another unit's checkpoint; with
   * `template`, a unit from an organization template. Throws `ConflictError` if the name is taken,
   * `ValidationError` if it is invalid, `NotFoundError` if `from` names no unit or checkpoint or
   * `template` no template.
   */
  static create(name: string, opts?: UnitCreateOpts): Promise<Unit>;
  static create(opts: UnitCreateOpts & { name: string }): Promise<Unit>;
  static async create(
    nameOrOpts: string | (UnitCreateOpts & { name: string }),
    more: UnitCreateOpts = {},
  ): Promise<Unit> {
    const [name, opts] = typeof nameOrOpts === "string" ? [nameOrOpts, more] : [nameOrOpts.name, nameOrOpts];
    const client = resolveClient(opts);
    const body: CreateUnitRequest = {
      name,
      ...(opts.urlSettings !== undefined && { url_settings: urlSettingsToWire(opts.urlSettings) }),
      ...(opts.from !== undefined && { from: { unit: opts.from.unit, checkpoint: opts.from.checkpoint } }),
      ...(opts.template !== undefined && { template: opts.template }),
      ...(opts.image !== undefined && { image: opts.image }),
      ...(opts.labels !== undefined && opts.labels.length > 0 && { labels: [...opts.labels] }),
    };
    const unit = await client.request<WireUnit>("POST", "/v1/units", { ...requestOpts(opts), body });
    return Unit.fromWire(client, unit);
  }

  /** Gets an existing unit. Throws `NotFoundError` if the organization has none of that name. */
  static async connect(name: string, opts: UnitOpts = {}): Promise<Unit> {
    const client = resolveClient(opts);
    const unit = await client.request<WireUnit>("GET", encodePath`/v1/units/${name}`, requestOpts(opts));
    return Unit.fromWire(client, unit);
  }

  /** One page of units, in name order. */
  static async listPage(opts: UnitListOpts = {}): Promise<UnitPage> {
    return listPageWith(resolveClient(opts), opts, opts.continuationToken);
  }

  /**
   * Every unit (matching `prefix`), in name order, fetching pages of `pageSize` as the loop
   * needs them: `for await (const unit of Unit.list()) ...`.
   */
  static list(opts: UnitListOpts = {}): AsyncGenerator<Unit, void, undefined> {
    const client = resolveClient(opts);
    return paginate(async (token) => {
      const page = await listPageWith(client, opts, token);
      return { items: page.units, hasMore: page.hasMore, nextContinuationToken: page.nextContinuationToken };
    }, opts.continuationToken);
  }

  /** Deletes a unit and everything it owns. Throws `NotFoundError` if there is none of that name. */
  static async delete(name: string, opts: UnitOpts = {}): Promise<void> {
    await resolveClient(opts).request<void>("DELETE", encodePath`/v1/units/${name}`, requestOpts(opts));
  }

  /** The client this unit talks through. */
  get client(): UmsClient {
    return this.#client;
  }
  get id(): string {
    return this.#info.id;
  }
  get name(): string {
    return this.#info.name;
  }
  get organization(): string {
    return this.#info.organization;
  }
  get url(): string {
    return this.#info.url;
  }
  get status(): UnitStatus {
    return this.#info.status;
  }
  get createdAt(): Date {
    return new Date(this.#info.createdAt);
  }
  get updatedAt(): Date {
    return new Date(this.#info.updatedAt);
  }
  get urlSettings(): UrlSettings | null {
    return this.#info.urlSettings && { ...this.#info.urlSettings };
  }
  get labels(): string[] {
    return [...this.#info.labels];
  }
  get environmentVersion(): string | null {
    return this.#info.environmentVersion;
  }
  get version(): string | null {
    return this.#info.version;
  }
  get lastRunningAt(): Date | null {
    return this.#info.lastRunningAt && new Date(this.#info.lastRunningAt);
  }
  get lastWarmingAt(): Date | null {
    return this.#info.lastWarmingAt && new Date(this.#info.lastWarmingAt);
  }
  /** The node (host) that holds the unit (issue #15), as of the last answer; null when it names none. */
  get node(): string | null {
    return this.#info.node;
  }

  /** A copy of all fields. */
  info(): UnitInfo {
    return unitInfoCopy(this.#info);
  }

  toJSON(): UnitInfo {
    return this.info();
  }

  /** Reloads the fields from the server. Throws `NotFoundError` if the unit was deleted. */
  async refresh(opts: RequestOpts = {}): Promise<this> {
    const unit = await this.#client.request<WireUnit>("GET", this.#path(), requestOpts(opts));
    this.#info = unitInfoFromWire(unit);
    return this;
  }

  /** Replaces the URL settings (omitted `auth` becomes `unit`, omitted `privateAccess` is cleared). */
  async updateUrlSettings(settings: UrlSettingsUpdate, opts: RequestOpts = {}): Promise<this> {
    const unit = await this.#client.request<WireUnit>("PUT", this.#path(), {
      ...requestOpts(opts),
      body: { url_settings: urlSettingsToWire(settings) },
    });
    this.#info = unitInfoFromWire(unit);
    return this;
  }

  /** Asks the server how the unit is doing; a unit that is not running is `hibernated`. */
  async check(opts: RequestOpts = {}): Promise<UnitHealth> {
    const h = await this.#client.request<WireHealthCheck>("GET", `${this.#path()}/check`, requestOpts(opts));
    return healthFromWire(h);
  }

  /**
   * What the unit used while it ran (CPU, memory, disk, network, processes): every 10 s over the
   * last hour (`window: "1h"`, the default), or 5-minute averages over `"24h"` or `"7d"`.
   */
  async metrics(opts: RequestOpts & { window?: UsageWindow } = {}): Promise<UnitUsage> {
    const q = new URLSearchParams({ window: opts.window ?? "1h" });
    const u = await this.#client.request<WireUnitUsage>("GET", `${this.#path()}/metrics?${q}`, requestOpts(opts));
    return usageFromWire(u);
  }

  /**
   * Moves the unit to an environment version: `latest` (default) or one like `v0.1.0-rc1`. A unit
   * made from an organization image moves to the newest build of it (`latest`, or its `NAME@ID`):
   * its system files are replaced where that loses nothing of the unit's, its state saved first as a
   * checkpoint; a `ConflictError` (UMS_UPGRADE_REFUSED) lists what it changed otherwise.
   * The unit's fields are not reloaded; call `refresh()` to see the new version.
   */
  async upgrade(version = "latest", opts: RequestOpts = {}): Promise<UpgradeResult> {
    const r = await this.#client.request<WireUpgradeResponse>("POST", `${this.#path()}/upgrade`, {
      ...requestOpts(opts),
      body: { version },
    });
    return { name: r.name, status: r.status };
  }

  /**
   * A TCP connection to `port` inside the unit (the unit's agent connects; its egress policy
   * applies to other hosts), carried over a websocket.
   */
  tunnel(port: number, opts: TunnelOpts = {}): Promise<Tunnel> {
    return openTunnel(this.#client, this.#path(), port, opts);
  }

  /** Deletes the unit and everything it owns. */
  async delete(opts: RequestOpts = {}): Promise<void> {
    await this.#client.request<void>("DELETE", this.#path(), requestOpts(opts));
  }

  #path(): string {
    return encodePath`/v1/units/${this.#info.name}`;
  }
}

async function listPageWith(client: UmsClient, opts: UnitListOpts, token: string | undefined): Promise<UnitPage> {
  const list = await client.request<WireUnitList>("GET", "/v1/units", {
    ...requestOpts(opts),
    query: { prefix: opts.prefix, max_results: opts.pageSize, continuation_token: token },
  });
  return {
    units: list.sprites.map((u) => Unit.fromWire(client, u)),
    hasMore: list.has_more,
    nextContinuationToken: list.next_continuation_token ?? null,
    running: list.running,
    warm: list.warm,
    cold: list.cold,
    organization: list.name,
    runningLimit: list.running_limit,
    warmLimit: list.warm_limit,
  };
}

function unitInfoCopy(i: UnitInfo): UnitInfo {
  return {
    ...i,
    createdAt: new Date(i.createdAt),
    updatedAt: new Date(i.updatedAt),
    urlSettings: i.urlSettings && { ...i.urlSettings },
    labels: [...i.labels],
    lastRunningAt: i.lastRunningAt && new Date(i.lastRunningAt),
    lastWarmingAt: i.lastWarmingAt && new Date(i.lastWarmingAt),
  };
}
