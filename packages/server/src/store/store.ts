import type { UsageSample } from "../usage/sample.js";
import type {
  AuditEvent,
  CheckpointRecord,
  CheckpointReplica,
  ConnectorPatch,
  ConnectorRecord,
  ConsoleSessionRecord,
  EventRecord,
  ImageRecord,
  NewNode,
  NewUnit,
  NodeFree,
  NodeRecord,
  NodeState,
  OAuthStateRecord,
  OrgLimits,
  OrgRecord,
  TemplateRecord,
  TokenRecord,
  TokenRole,
  UnitPageQuery,
  UnitPatch,
  UnitRecord,
  UnitStatus,
  WebhookAttempt,
  WebhookRecord,
} from "./records.js";

/**
 * The control plane's persistence, independent of the database behind it.
 * One implementation per dialect folder (`sqlite/`, `postgres/`); the API never sees SQL.
 */
export interface Store {
  readonly dialect: "sqlite" | "postgres";
  readonly orgs: OrgStore;
  readonly tokens: TokenStore;
  readonly units: UnitStore;
  readonly checkpoints: CheckpointStore;
  readonly templates: TemplateStore;
  readonly images: ImageStore;
  readonly connectors: ConnectorStore;
  readonly oauthStates: OAuthStateStore;
  readonly audit: AuditStore;
  readonly consoleSessions: ConsoleSessionStore;
  readonly events: EventStore;
  readonly webhooks: WebhookStore;
  readonly usage: UsageStore;
  readonly nodes: NodeStore;
  /**
   * Issue #15, PostgreSQL: the events every process of the deployment records, as they are
   * committed (LISTEN/NOTIFY). None on SQLite: one process records and reads them.
   */
  readonly feed?: EventFeed;
  /** Applies every pending migration; safe to call from several processes at once. */
  migrate(): Promise<void>;
  close(): Promise<void>;
}

export interface OrgStore {
  /** Returns the organization, creating it with `limits` when it does not exist. */
  ensure(slug: string, limits: OrgLimits): Promise<OrgRecord>;
  getBySlug(slug: string): Promise<OrgRecord | undefined>;
  getById(id: string): Promise<OrgRecord | undefined>;
  list(): Promise<OrgRecord[]>;
  setLimits(slug: string, limits: Partial<OrgLimits>): Promise<OrgRecord | undefined>;
}

export interface NewToken {
  readonly id: string;
  readonly orgId: string;
  readonly name: string;
  readonly role: TokenRole;
  /** SHA-256 of the token; the token itself is never stored. */
  readonly hash: string;
  readonly createdAt: string;
  readonly expiresAt?: string | null;
}

export interface AuditQuery {
  /** Events at or after this time (RFC 3339). */
  readonly since?: string | undefined;
  /** Events before this id (the previous page's last): newest first. */
  readonly before?: string | undefined;
  readonly unit?: string | undefined;
  readonly tokenId?: string | undefined;
  readonly limit: number;
}

/** Issue #20: the audit log of state-changing calls, per organization. */
export interface AuditStore {
  add(e: AuditEvent): Promise<void>;
  /** The organization's events, newest first. */
  list(orgId: string, q: AuditQuery): Promise<AuditEvent[]>;
  /** Removes events before `at` (retention); returns how many. */
  prune(at: string): Promise<number>;
}

export interface EventQuery {
  /** Events after this id (exclusive). */
  readonly after?: string | undefined;
  readonly unit?: string | undefined;
  readonly types?: readonly string[] | undefined;
  readonly limit: number;
}

/** Issue #17: lifecycle events, per organization, oldest first. */
export interface EventStore {
  /**
   * Records an event; returns it as recorded. On PostgreSQL an organization's events are recorded
   * one at a time, and one whose id is not larger than the last recorded takes the next id after
   * it (processes' clocks differ): ids increase in the order of the commits. Every process
   * listening on the `feed` gets it.
   */
  add(e: EventRecord): Promise<EventRecord>;
  get(id: string): Promise<EventRecord | undefined>;
  /** Every organization's events recorded at or after `at`, in id order, at most `limit`. */
  recent(at: string, limit: number): Promise<EventRecord[]>;
  list(orgId: string, q: EventQuery): Promise<EventRecord[]>;
  /** Removes events before `at` (every organization); returns how many. */
  pruneBefore(at: string): Promise<number>;
  /** Keeps the organization's newest `keep` events; returns how many went. */
  pruneOrg(orgId: string, keep: number): Promise<number>;
  /** Organizations that have events (for the pruning at start). */
  orgIds(): Promise<string[]>;
}

/** Issue #17: webhooks; every call but `listAll` is scoped to an organization. */
export interface WebhookStore {
  /** Inserts unless the organization has `max` webhooks already (false). */
  insert(w: WebhookRecord, max: number): Promise<boolean>;
  list(orgId: string): Promise<WebhookRecord[]>;
  get(orgId: string, id: string): Promise<WebhookRecord | undefined>;
  delete(orgId: string, id: string): Promise<boolean>;
  recordAttempt(id: string, a: WebhookAttempt): Promise<void>;
  /** Every organization's webhooks (the deliverer's catch-up as it takes over, issue #15). */
  listAll(): Promise<WebhookRecord[]>;
}

/** What a process hears on the `feed` (each handler optional). */
export interface EventFeedHandlers {
  /** An event any process recorded, in the order of the commits per organization. */
  event?(e: EventRecord): void;
  /** An organization's webhooks were created or deleted (by any process). */
  webhooksChanged?(orgId: string): void;
  /** The listening connection broke: events may be missed, and the webhook lead is lost with it. */
  lost?(): void;
  /** Listening again after `lost`, which happened at `at` (ms): what came meanwhile is in the store. */
  resumed?(at: number): void;
}

/** Issue #15: a deployment's events as they are committed, and who delivers webhooks (store.feed). */
export interface EventFeed {
  /** Whether its connection listens now (a write does not wait to hear its event otherwise). */
  readonly listening: boolean;
  subscribe(h: EventFeedHandlers): () => void;
  /** Starts listening (idempotent); resolves once it listens. */
  start(): Promise<void>;
  /**
   * Whether this process delivers the deployment's webhooks: true once it holds the lead (one
   * process at a time), which it keeps until its listening connection breaks (`lost`).
   */
  lead(): Promise<boolean>;
  /**
   * Issue #16 part 2: a value that changes whenever any process revoked a token or changed an
   * organization (their transactions notify it), or undefined while the connection does not listen
   * (changes may go unheard: nothing may be kept on its strength). It changes with each new
   * connection too, so nothing kept before a break stays good after it.
   */
  authGeneration(): string | undefined;
  /** This process committed such a change: the generation moves at once, before its notice comes. */
  authChanged(): void;
  close(): Promise<void>;
}

/** Issue #17: units' usage samples, raw (step 10 s) and averaged (step 300 s). */
export interface UsageStore {
  add(step: number, rows: readonly { unitId: string; sample: UsageSample }[]): Promise<void>;
  /** The unit's samples of that step at or after `since` (ms), oldest first. */
  list(unitId: string, step: number, since: number): Promise<UsageSample[]>;
  /** Removes that step's samples before `before` (ms); returns how many. */
  prune(step: number, before: number): Promise<number>;
}

export interface TokenStore {
  create(token: NewToken): Promise<TokenRecord>;
  /** The live token with this hash and its organization, in one query (every request asks). */
  authenticate(hash: string): Promise<{ token: TokenRecord; org: OrgRecord } | undefined>;
  list(orgId?: string): Promise<TokenRecord[]>;
  /** Returns false when no live token has that id. */
  revoke(id: string, at: string): Promise<boolean>;
  /**
   * Revokes a live token of organization `orgId`, unless it is the organization's last live admin
   * token (the organization would be left with no token that can mint tokens): one decision,
   * serialised with the organization's other revokes.
   */
  revokeInOrg(orgId: string, id: string, at: string): Promise<"revoked" | "not_found" | "last_admin">;
  touch(id: string, at: string): Promise<void>;
}

export class UnitExistsError extends Error {
  constructor(readonly unitName: string) {
    super(`unit '${unitName}' already exists`);
  }
}

export class UnitLimitError extends Error {
  constructor(readonly limit: number) {
    super(`the organization has reached its limit of ${limit} units`);
  }
}

export interface CheckpointStore {
  /** Reserves the unit's next checkpoint number (v0, v1, …; never reused). */
  nextSeq(unitId: string): Promise<number>;
  insert(cp: CheckpointRecord): Promise<void>;
  list(unitId: string): Promise<CheckpointRecord[]>;
  get(unitId: string, id: string): Promise<CheckpointRecord | undefined>;
  delete(unitId: string, id: string): Promise<boolean>;
  /** Issue #15: records where its export to the object store stands; false when the row is gone. */
  setReplica(unitId: string, id: string, replica: CheckpointReplica | null): Promise<boolean>;
  /**
   * Every checkpoint whose export is pending or failed (a node's start takes them up again); with
   * `nodeId`, only those of the units that node works on (records.ts `onNode`).
   */
  unreplicated(nodeId?: string): Promise<CheckpointRecord[]>;
}

export class TemplateExistsError extends Error {
  constructor(readonly templateName: string) {
    super(`template '${templateName}' already exists`);
  }
}

/** Issue #18: organization templates. Reads by organization see ready templates only. */
export interface TemplateStore {
  /** Inserts a template (not ready yet); TemplateExistsError when the organization has one of that name. */
  insert(t: TemplateRecord): Promise<void>;
  /** Shows (ready) or hides (half-made, or being deleted) a template. */
  setReady(id: string, ready: boolean): Promise<void>;
  /** The organization's ready template of that name. */
  get(orgId: string, name: string): Promise<TemplateRecord | undefined>;
  /** The organization's ready templates, by name. */
  list(orgId: string): Promise<TemplateRecord[]>;
  /** Every template of every organization, ready or not (the start's sweep); with `nodeId`, that node's (records.ts `onNode`). */
  all(nodeId?: string): Promise<TemplateRecord[]>;
  /** Removes a template's row; false when there was none. */
  delete(id: string): Promise<boolean>;
}

/** A build of that image name is under way (one draft per name at a time). */
export class ImageExistsError extends Error {
  constructor(readonly imageName: string) {
    super(`a build of image '${imageName}' is under way`);
  }
}

/** Issue #18: organization images. Reads by organization see ready images only. */
export interface ImageStore {
  /** Inserts an image build (not ready yet); ImageExistsError while another build of the name is not ready. */
  insert(image: ImageRecord): Promise<void>;
  /**
   * Writes what the import or build found (source, config, size, version) and shows it as the
   * name's build; the name's build until then is superseded (its id returned) in the same transaction.
   */
  finish(image: ImageRecord): Promise<string[]>;
  /** Hides an image being deleted (not ready, superseded): the start's sweep finishes a delete a crash cut. */
  hide(id: string): Promise<void>;
  /** Builds a newer one superseded (ready, hidden), kept while units or templates use them; with `nodeId`, that node's. */
  superseded(nodeId?: string): Promise<ImageRecord[]>;
  /** The organization's current build of that name. */
  get(orgId: string, name: string): Promise<ImageRecord | undefined>;
  /** An image by id, ready or not (a unit's boot reads its image's config). */
  getById(id: string): Promise<ImageRecord | undefined>;
  /** The organization's ready images, by name. */
  list(orgId: string): Promise<ImageRecord[]>;
  /** Every image of every organization, ready or not (the start's sweep); with `nodeId`, that node's (records.ts `onNode`). */
  all(nodeId?: string): Promise<ImageRecord[]>;
  /** How many units and templates refer to the image (made from it, or forked from such a unit). */
  usedBy(id: string): Promise<number>;
  /** Removes an image's row; false when there was none. */
  delete(id: string): Promise<boolean>;
}

/** The part of a unit's record the connector gateway checks a call against (its policy: spec 2.11). */
export type UnitCaller = Pick<UnitRecord, "id" | "orgId" | "name" | "labels">;

export interface UnitStore {
  /** Inserts the unit unless the org already has `maxUnits` units (UnitLimitError) or the name exists (UnitExistsError). */
  create(unit: NewUnit, maxUnits: number): Promise<UnitRecord>;
  get(orgId: string, name: string): Promise<UnitRecord | undefined>;
  getById(id: string): Promise<UnitRecord | undefined>;
  /**
   * Issue #16 part 3: what the connector gateway asks of its caller on every call (its organization,
   * name and labels), read afresh each time but without the rest of the row.
   */
  callerById(id: string): Promise<UnitCaller | undefined>;
  /**
   * Units of every organization with one of these statuses (for reconciling after a restart); with
   * `nodeId`, only the units that node works on: those naming it, and those naming none (records.ts `onNode`).
   */
  withStatus(statuses: readonly UnitStatus[], nodeId?: string): Promise<UnitRecord[]>;
  getByUrlLabel(label: string): Promise<UnitRecord | undefined>;
  /** Units ordered by name, at most `limit`. */
  page(orgId: string, query: UnitPageQuery): Promise<UnitRecord[]>;
  namesWithStatus(orgId: string, status: UnitStatus): Promise<string[]>;
  /**
   * Issue #15: how many of the organization's units have `status` on nodes other than `nodeId`
   * whose heartbeat is at `upSince` or later (a down node's records are stale until it is back).
   */
  countOnOtherNodes(orgId: string, status: UnitStatus, nodeId: string, upSince: string): Promise<number>;
  update(orgId: string, name: string, patch: UnitPatch): Promise<UnitRecord | undefined>;
  /**
   * Issue #15: the unit moved: it names node `to` from now on, its files are checkpoint
   * `activeCheckpoint`'s and it is cold; only while it still names `from` (false otherwise).
   */
  moveTo(id: string, from: string, to: string, activeCheckpoint: string): Promise<boolean>;
  /**
   * Issue #15: the unit's node `from` is down and the unit is made again on node `to` from stored
   * checkpoint `activeCheckpoint` (`ums node drain --from-store`): as `moveTo`, only while it still
   * names `from` and `from`'s last heartbeat is before `downBefore` (false otherwise). `from` is
   * told at its next start that the files it may still hold of the unit are not its own
   * (NodeStore.leftUnits).
   */
  rehome(id: string, from: string, to: string, activeCheckpoint: string, downBefore: string): Promise<boolean>;
  delete(orgId: string, name: string): Promise<boolean>;
}

/** Spec 2.11 connectors; every read and write but `getById` and the key rotation ones is scoped to an organization. */
export interface ConnectorStore {
  insert(c: ConnectorRecord): Promise<void>;
  list(orgId: string, provider?: string): Promise<ConnectorRecord[]>;
  get(orgId: string, id: string): Promise<ConnectorRecord | undefined>;
  /** For the gateway, which checks the organization against the calling unit's. */
  getById(id: string): Promise<ConnectorRecord | undefined>;
  update(orgId: string, id: string, patch: ConnectorPatch): Promise<ConnectorRecord | undefined>;
  delete(orgId: string, id: string): Promise<boolean>;
  /** Connectors whose secret is sealed under a key version other than `version` (key rotation). */
  sealedUnder(notVersion: number, limit: number): Promise<ConnectorRecord[]>;
  /** Replaces a secret only if it is still the one read (a concurrent refresh wins). */
  reseal(id: string, from: string, to: string, keyVersion: number): Promise<boolean>;
}

/** Spec 4.8: pending OAuth authorizations, keyed by the hash of their state. */
export interface OAuthStateStore {
  /**
   * Records a new authorization; false when a record with that state hash exists (pending, or used
   * and not yet expired). Expired records are removed first.
   */
  insert(s: OAuthStateRecord): Promise<boolean>;
  get(stateHash: string): Promise<OAuthStateRecord | undefined>;
  /** Marks it used at `at`; false when it was already used or has expired by then (one callback wins). */
  use(stateHash: string, at: string): Promise<boolean>;
}

/** Issue #14: console sessions, keyed by the hash of their cookie. */
export interface ConsoleSessionStore {
  /** Records a new session; expired sessions are removed first. */
  insert(s: ConsoleSessionRecord): Promise<void>;
  /**
   * The session with this hash, unexpired at `at`, with its token (not revoked) and organization, in
   * one query (every request with the cookie asks).
   */
  authenticate(
    idHash: string,
    at: string,
  ): Promise<{ session: ConsoleSessionRecord; token: TokenRecord; org: OrgRecord } | undefined>;
  /** Removes the session (sign-out); false when there was none. */
  delete(idHash: string): Promise<boolean>;
}

/** Another node (`holder`) registered under that name. */
export class NodeNameTakenError extends Error {
  constructor(readonly holder: NodeRecord) {
    super(`node name '${holder.name}' is taken by node ${holder.id}`);
  }
}

/** What a node holds: the units, templates and images that name it. */
export interface NodeHoldings {
  readonly units: number;
  readonly templates: number;
  readonly images: number;
}

/** Units, templates or images still name the node: it cannot be removed (delete them first). */
export class NodeInUseError extends Error {
  constructor(
    readonly nodeName: string,
    readonly holds: NodeHoldings,
  ) {
    const parts = [
      holds.units > 0 && `${holds.units} units`,
      holds.templates > 0 && `${holds.templates} templates`,
      holds.images > 0 && `${holds.images} images`,
    ].filter((p) => p !== false);
    super(`node '${nodeName}' still holds ${parts.join(", ")}`);
  }

  /** How many units name the node. */
  get units(): number {
    return this.holds.units;
  }
}

/** A node with how many units it holds, and how many of them are one organization's (placement's view). */
export interface NodeUse {
  readonly node: NodeRecord;
  readonly units: number;
  readonly orgUnits: number;
}

/** Issue #15: the nodes sharing this database (docs/SCALE-OUT.md). */
export interface NodeStore {
  /**
   * Registers a node, or its new start: inserts its row, or updates the row of its id (its state,
   * set by an operator, is kept). `NodeNameTakenError` when another node has the name.
   */
  register(node: NewNode, at: string): Promise<NodeRecord>;
  /** Records a heartbeat with what the node has free; false when its row is gone (removed). */
  heartbeat(id: string, free: NodeFree, at: string): Promise<boolean>;
  get(id: string): Promise<NodeRecord | undefined>;
  getByName(name: string): Promise<NodeRecord | undefined>;
  /**
   * Every node, by name. With `maxAgeMs` on PostgreSQL, a list this store read at most that long ago
   * may be returned (no write through this store since): placement reads it per create, and the
   * read is a round trip (issue #16 part 7). SQLite always reads.
   */
  list(opts?: { readonly maxAgeMs?: number }): Promise<readonly NodeRecord[]>;
  setState(name: string, state: NodeState): Promise<NodeRecord | undefined>;
  /** Every node with its unit counts: all units, and `orgId`'s. */
  usage(orgId: string): Promise<NodeUse[]>;
  /** Gives the units, templates and images that name no node (from before issue #15) to node `id`; how many it took. */
  claimUnplaced(id: string): Promise<NodeHoldings>;
  /**
   * Removes a node's row (false: none); `NodeInUseError` while units, templates or images name it,
   * unless `forgetUnits`: then their rows go too (their files were on that host), and how many is returned.
   */
  remove(name: string, opts?: { forgetUnits?: boolean }): Promise<false | NodeHoldings>;
  /** Issue #15: the units rehomed away from node `id` while it was down (UnitStore.rehome), whose files it may still hold. */
  leftUnits(id: string): Promise<string[]>;
  /** Node `id` has seen to what it held of unit `unitId` (leftUnits). */
  forgetLeftUnit(id: string, unitId: string): Promise<void>;
}
