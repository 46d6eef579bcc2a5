/** Records as the store keeps them; the API turns them into wire shapes (protocol). */

export interface OrgLimits {
  readonly maxUnits: number;
  readonly runningLimit: number;
  readonly warmLimit: number;
}

export interface OrgRecord extends OrgLimits {
  readonly id: string;
  readonly slug: string;
  readonly unitsEnabled: boolean;
  readonly createdAt: string;
}

export type TokenRole = "admin" | "member";

export interface TokenRecord {
  readonly id: string;
  readonly orgId: string;
  readonly orgSlug: string;
  readonly name: string;
  readonly role: TokenRole;
  readonly createdAt: string;
  readonly lastUsedAt: string | null;
  readonly revokedAt: string | null;
  /** When the token stops being accepted; null: never. */
  readonly expiresAt: string | null;
}

/** Issue #20: one state-changing call, as the audit log keeps it. */
export interface AuditEvent {
  readonly id: string;
  readonly at: string;
  readonly orgId: string;
  readonly tokenId: string | null;
  readonly method: string;
  readonly route: string;
  readonly unit: string | null;
  readonly status: number;
  readonly code: string | null;
  readonly ms: number;
}

/** Issue #17: one lifecycle event of a unit (docs/EVENTS.md). */
export interface EventRecord {
  /** `evt_` + a time-ordered id: later events sort after earlier ones. */
  readonly id: string;
  readonly orgId: string;
  readonly at: string;
  readonly type: string;
  readonly unit: string | null;
  readonly actor: string;
  /** JSON object text. */
  readonly data: string;
}

/** Issue #17: an organization's webhook; its secret sealed at rest (connectors' SecretBox). */
export interface WebhookRecord {
  readonly id: string;
  readonly orgId: string;
  readonly url: string;
  /** Event types delivered; empty: every type. */
  readonly types: readonly string[];
  readonly secret: string;
  readonly keyVersion: number;
  readonly createdAt: string;
  readonly lastStatus: number | null;
  readonly lastError: string | null;
  readonly lastAttemptAt: string | null;
  readonly lastEventId: string | null;
}

export interface WebhookAttempt {
  readonly status: number;
  readonly error: string | null;
  readonly at: string;
  readonly eventId: string;
}

export type UnitStatus = "cold" | "warm" | "running";
export type UrlAuth = "unit" | "public";
export type PrivateAccess = "admins" | "organization";

export interface UnitRecord {
  readonly id: string;
  readonly orgId: string;
  readonly name: string;
  /** The DNS label of the unit's URL, `<name>-<random>`; unique across the server. */
  readonly urlLabel: string;
  readonly status: UnitStatus;
  readonly urlAuth: UrlAuth;
  readonly privateAccess: PrivateAccess | null;
  readonly labels: readonly string[];
  readonly version: string | null;
  readonly environmentVersion: string | null;
  readonly createdAt: string;
  readonly updatedAt: string;
  readonly lastRunningAt: string | null;
  readonly lastWarmingAt: string | null;
  /** Resources and privileges policies as JSON (spec 4.5); "{}" means the defaults. */
  readonly resources: string;
  readonly privileges: string;
  /** Network policy as JSON (spec 2.10); `{"rules":[]}` enforces nothing. */
  readonly network: string;
  /** The checkpoint the unit's files are on (spec 2.6 `source_id` of the next one), if any. */
  readonly activeCheckpoint: string | null;
  /** The disk size asked for at create (`config.storage_gb`), shown; its quota is issue #20. */
  readonly storageGb: number | null;
  /** A wake at the organization's running limit waits for a slot instead of failing (create's `wait_for_capacity`). */
  readonly waitForCapacity: boolean;
  /** Issue #18: the organization image it was created from (its config), null: the host's base image. */
  readonly imageId: string | null;
  /** That image's version (`<name>@<id>`, shown as the unit's `image`), null with the base image. */
  readonly imageVersion: string | null;
  /** Issue #15: the node that holds the unit's disk (docs/SCALE-OUT.md); null: from before nodes, claimed at start. */
  readonly nodeId: string | null;
}

export type NewUnit = Omit<
  UnitRecord,
  | "updatedAt"
  | "lastRunningAt"
  | "lastWarmingAt"
  | "resources"
  | "privileges"
  | "network"
  | "activeCheckpoint"
  | "storageGb"
  | "waitForCapacity"
  | "imageId"
  | "imageVersion"
  | "nodeId"
> & {
  readonly nodeId?: string | null;
  readonly imageId?: string | null;
  readonly imageVersion?: string | null;
  readonly resources?: string;
  readonly privileges?: string;
  readonly network?: string;
  readonly storageGb?: number | null;
  readonly waitForCapacity?: boolean;
};

/** A unit's policies (spec 2.8-2.10) as stored: JSON texts. */
export interface PolicyTexts {
  readonly resources: string;
  readonly privileges: string;
  readonly network: string;
}

/** Spec 2.6, plus the policies in force when it was taken (restored with it). */
export interface CheckpointRecord extends PolicyTexts {
  readonly unitId: string;
  readonly id: string;
  readonly seq: number;
  readonly comment: string;
  readonly sourceId: string | null;
  readonly createdAt: string;
  /** Taken by ums itself (the backup before a restore, spec 3.3), not asked for. */
  readonly auto: boolean;
  /** Issue #15: its copy in the object store (docs/SCALE-OUT.md); null or absent: none is kept. */
  readonly replica?: CheckpointReplica | null;
}

/** Issue #15: where a checkpoint's export to the object store stands. */
export interface CheckpointReplica {
  readonly state: "pending" | "replicated" | "failed";
  /** Compressed bytes in the store (replicated). */
  readonly bytes?: number;
  /** The checkpoint its stream is incremental against, and the whole chain, oldest first (replicated). */
  readonly parent?: string | null;
  readonly chain?: readonly string[];
  /** Why the last attempt failed (failed); retried at the node's next start. */
  readonly error?: string;
  /** When it was stored, or last failed. */
  readonly at?: string;
  /**
   * The node that copies it: the one it was taken on, or (that node down or gone before it stored
   * it) a node it was moved to, which adopted the copy. Absent in rows from before: its taker.
   */
  readonly by?: string;
}

/**
 * Issue #18: an organization template: a read-only snapshot of a checkpoint (`templates/<id>` in the
 * pool) and the policies that checkpoint kept. Only a `ready` template is shown or used; one that is
 * not is half-made (a crash between its row and its snapshot) and goes at the next start.
 */
export interface TemplateRecord extends PolicyTexts {
  readonly id: string;
  readonly orgId: string;
  readonly name: string;
  readonly description: string;
  /** The unit and checkpoint it was published from (names, kept after the unit is gone). */
  readonly sourceUnit: string;
  readonly sourceCheckpoint: string;
  readonly environmentVersion: string | null;
  /** The organization image its source unit was made from (its units get its config), if any. */
  readonly imageId: string | null;
  readonly ready: boolean;
  readonly createdAt: string;
  /** Issue #15: the node that holds its files (made it); its units are placed there. Null: from before, claimed at start. */
  readonly nodeId: string | null;
}

/**
 * Issue #18: an organization's image, imported from an OCI archive: a read-only subvolume
 * (`imported/<id>` in the pool) and the config its units run commands with. Only a `ready` image is
 * shown or used; one that is not is half-made (or being deleted) and goes at the next start.
 */
export interface ImageRecord {
  readonly id: string;
  readonly orgId: string;
  readonly name: string;
  /** `docker-save` or `oci-layout`. */
  readonly source: string;
  /** Which build of the image this is, `<name>@<id>` (Image.version). */
  readonly environmentVersion: string;
  /** JSON of the image's ImageConfig (protocol): env, user, working_dir. */
  readonly config: string;
  readonly bytes: number;
  readonly ready: boolean;
  readonly createdAt: string;
  /** When a newer build took its name (it is kept, hidden, while units or templates use it); null: the name's build. */
  readonly supersededAt: string | null;
  /** Issue #15: the node that holds its files (made it); its units are placed there. Null: from before, claimed at start. */
  readonly nodeId: string | null;
}

/**
 * Issue #15: whether a unit, template or image is node `nodeId`'s to work on (docs/SCALE-OUT.md):
 * it names that node, or none (from before nodes; the node claims those at its start). Without a
 * node id (a tool or a test that is no node), every one is.
 */
export function onNode(r: { readonly nodeId: string | null }, nodeId: string | undefined): boolean {
  return nodeId === undefined || r.nodeId === null || r.nodeId === nodeId;
}

export interface UnitPatch extends Partial<PolicyTexts> {
  readonly urlAuth?: UrlAuth;
  readonly privateAccess?: PrivateAccess | null;
  readonly version?: string | null;
  readonly environmentVersion?: string | null;
  readonly status?: UnitStatus;
  readonly lastRunningAt?: string | null;
  readonly lastWarmingAt?: string | null;
  readonly activeCheckpoint?: string | null;
  readonly labels?: readonly string[];
  /** Issue #18: an upgrade moves a unit to a newer build of its image. */
  readonly imageId?: string | null;
  readonly imageVersion?: string | null;
  /** Set when a user changed the unit; runtime status changes leave it alone. */
  readonly updatedAt?: string;
}

export interface UnitPageQuery {
  readonly prefix?: string;
  /** Return names strictly after this one (keyset pagination). */
  readonly after?: string;
  readonly limit: number;
}

/** Spec 2.11: a connector as stored. `secret` is the AES-256-GCM envelope of its credentials (never returned). */
export interface ConnectorRecord {
  readonly id: string;
  readonly orgId: string;
  readonly provider: string;
  readonly connectionType: "oauth" | "api_key" | "provisioned" | "internal";
  readonly providerAccountId: string;
  readonly providerAccountName: string | null;
  /** AccessPolicy JSON; "{}" denies unit use. */
  readonly accessPolicy: string;
  readonly scopes: string | null;
  /** provider_info JSON (e.g. the custom base URL). */
  readonly providerInfo: string;
  readonly tokenExpiresAt: string | null;
  readonly userId: string | null;
  readonly secret: string;
  readonly keyVersion: number;
  readonly insertedAt: string;
  readonly updatedAt: string;
}

export interface ConnectorPatch {
  readonly accessPolicy?: string;
  readonly scopes?: string | null;
  readonly tokenExpiresAt?: string | null;
  readonly secret?: string;
  readonly keyVersion?: number;
  readonly updatedAt?: string;
}

/**
 * Spec 4.8: an authorization started with `authorize`, kept on the server until it expires, keyed by
 * the SHA-256 of its OAuth `state` (the state itself is the caller's and is never stored).
 */
export interface OAuthStateRecord {
  readonly stateHash: string;
  readonly orgId: string;
  readonly provider: string;
  readonly redirectUri: string;
  /** Scopes asked for (comma-separated). */
  readonly scopes: string;
  /** A connector to add the scopes to (add_scopes), if any. */
  readonly connectorId: string | null;
  readonly createdAt: string;
  readonly expiresAt: string;
  /** Set when a callback took it: a state completes one authorization only. */
  readonly usedAt: string | null;
  /**
   * Issue #14: the hash of the console session that started it, if one did; then the browser's GET
   * callback is accepted only with that session's cookie.
   */
  readonly sessionHash?: string | null;
}

/** Issue #14: a browser's console session, made by signing in with an API token. */
export interface ConsoleSessionRecord {
  /** SHA-256 of the cookie's value; the value itself is never stored. */
  readonly idHash: string;
  readonly orgId: string;
  /** The token signed in with: revoking it ends the session. */
  readonly tokenId: string;
  /** What state-changing calls made with the cookie send in `X-UMS-CSRF`. */
  readonly csrf: string;
  readonly createdAt: string;
  readonly expiresAt: string;
}

/** Issue #15: whether placement may give a node new units (down is not a state: a stale heartbeat). */
export type NodeState = "active" | "cordoned" | "draining";

/** What a node has in all. `unitSlots` null: no count limit (memory and disk decide). */
export interface NodeCapacity {
  readonly cpus: number;
  readonly memoryBytes: number;
  readonly diskBytes: number;
  readonly unitSlots: number | null;
}

/** What a node had free at its last heartbeat. */
export interface NodeFree {
  readonly memoryBytes: number;
  readonly diskBytes: number;
}

/** Issue #15: a host that runs units, as it registered (docs/SCALE-OUT.md). */
export interface NodeRecord {
  /** `node-<uuid>`, kept in the node's data dir (`node-id`). */
  readonly id: string;
  readonly name: string;
  /** Where API processes reach the node; empty for a node inside the API's process. */
  readonly address: string;
  readonly state: NodeState;
  readonly capacity: NodeCapacity;
  readonly free: NodeFree;
  readonly labels: Readonly<Record<string, string>>;
  /** The ums version it runs. */
  readonly version: string;
  readonly createdAt: string;
  /** When its process started (registered) last. */
  readonly startedAt: string;
  readonly heartbeatAt: string;
}

export type NewNode = Omit<NodeRecord, "state" | "createdAt" | "heartbeatAt">;
