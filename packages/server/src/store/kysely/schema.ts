import type { Generated } from "kysely";

/** Table shapes as Kysely sees them. Timestamps are ISO 8601 text; booleans are 0/1 integers. */
export interface OrgsTable {
  id: string;
  slug: string;
  units_enabled: number;
  max_units: number;
  running_limit: number;
  warm_limit: number;
  created_at: string;
  /** The organization's units (issue #16 part 7: kept with each insert and delete, kysely/unit-count.ts). */
  unit_count: Generated<number>;
}

export interface TokensTable {
  id: string;
  org_id: string;
  name: string;
  role: string;
  token_hash: string;
  created_at: string;
  last_used_at: string | null;
  revoked_at: string | null;
  expires_at: string | null;
}

/** Issue #20: one state-changing call (who, what, when, outcome); never a body, query or secret. */
export interface AuditEventsTable {
  /** `aud_` + a time-ordered id: later events sort after earlier ones. */
  id: string;
  at: string;
  org_id: string;
  token_id: string | null;
  method: string;
  /** The route's pattern (`/v1/units/:name/exec`), never the URL with its query. */
  route: string;
  unit: string | null;
  status: number;
  code: string | null;
  ms: number;
}

/** Issue #17: lifecycle events. */
export interface EventsTable {
  id: string;
  org_id: string;
  at: string;
  type: string;
  unit: string | null;
  actor: string;
  data: string;
}

/** Issue #17: webhooks; `secret` is sealed (connectors' SecretBox, the webhook id as AAD). */
export interface WebhooksTable {
  id: string;
  org_id: string;
  url: string;
  types: string;
  secret: string;
  key_version: number;
  created_at: string;
  last_status: number | null;
  last_error: string | null;
  last_attempt_at: string | null;
  last_event_id: string | null;
}

export interface UnitsTable {
  id: string;
  org_id: string;
  name: string;
  url_label: string;
  status: string;
  url_auth: string;
  private_access: string | null;
  labels: string;
  version: string | null;
  environment_version: string | null;
  created_at: string;
  updated_at: string;
  last_running_at: string | null;
  last_warming_at: string | null;
  resources: string;
  privileges: string;
  network: string;
  active_checkpoint: string | null;
  checkpoint_seq: number;
  storage_gb: number | null;
  wait_for_capacity: number;
  image_id: string | null;
  image_version: string | null;
  node_id: string | null;
}

/** Issue #15: the nodes (hosts that run units) sharing this database; JSON in capacity, free, labels. */
export interface NodesTable {
  id: string;
  name: string;
  address: string;
  state: string;
  capacity: string;
  free: string;
  labels: string;
  version: string;
  created_at: string;
  started_at: string;
  heartbeat_at: string;
}

/** Issue #15: a unit rehomed away from a node that was down, whose files that node may still hold. */
export interface RehomedUnitsTable {
  node_id: string;
  unit_id: string;
}

export interface CheckpointsTable {
  unit_id: string;
  id: string;
  seq: number;
  comment: string;
  source_id: string | null;
  resources: string;
  privileges: string;
  network: string;
  created_at: string;
  auto: number;
  replica: string | null;
}

/** Issue #18: organization templates (their files are the subvolume `templates/<id>` in the pool). */
export interface TemplatesTable {
  id: string;
  org_id: string;
  name: string;
  description: string;
  source_unit: string;
  source_checkpoint: string;
  environment_version: string | null;
  resources: string;
  privileges: string;
  network: string;
  image_id: string | null;
  ready: number;
  created_at: string;
  node_id: string | null;
}

export interface ImagesTable {
  id: string;
  org_id: string;
  name: string;
  source: string;
  environment_version: string;
  config: string;
  bytes: number | string;
  ready: number;
  created_at: string;
  superseded_at: string | null;
  node_id: string | null;
}

export interface ConnectorsTable {
  id: string;
  org_id: string;
  provider: string;
  connection_type: string;
  provider_account_id: string;
  provider_account_name: string | null;
  access_policy: string;
  scopes: string | null;
  provider_info: string;
  token_expires_at: string | null;
  user_id: string | null;
  secret: string;
  key_version: number;
  inserted_at: string;
  updated_at: string;
}

export interface OAuthStatesTable {
  state_hash: string;
  org_id: string;
  provider: string;
  redirect_uri: string;
  scopes: string;
  connector_id: string | null;
  created_at: string;
  expires_at: string;
  used_at: string | null;
  /** Issue #14: the console session that started it (the hash of its cookie), if one did. */
  session_hash: string | null;
}

/** Issue #14: a console session (the hash of its cookie, never the cookie). */
export interface ConsoleSessionsTable {
  id_hash: string;
  org_id: string;
  token_id: string;
  csrf: string;
  created_at: string;
  expires_at: string;
}

export interface Database {
  orgs: OrgsTable;
  tokens: TokensTable;
  units: UnitsTable;
  checkpoints: CheckpointsTable;
  templates: TemplatesTable;
  images: ImagesTable;
  connectors: ConnectorsTable;
  oauth_states: OAuthStatesTable;
  audit_events: AuditEventsTable;
  console_sessions: ConsoleSessionsTable;
  events: EventsTable;
  webhooks: WebhooksTable;
  unit_usage: UnitUsageTable;
  nodes: NodesTable;
  rehomed_units: RehomedUnitsTable;
  auth_generation: AuthGenerationTable;
}

/** Issue #16 part 2: one row (id 1) whose `gen` moves with every token revoke and organization change. */
export interface AuthGenerationTable {
  id: number;
  gen: number | string;
}

/** Issue #17: one unit's usage over one interval; `at` in ms (bigint: a string from PostgreSQL). */
export interface UnitUsageTable {
  unit_id: string;
  step: number;
  at: number | string;
  cpu_cores: number;
  memory_bytes: number;
  memory_peak_bytes: number;
  memory_limit_bytes: number | null;
  disk_bytes: number | null;
  disk_limit_bytes: number | null;
  net_rx_bps: number;
  net_tx_bps: number;
  pids: number;
}
