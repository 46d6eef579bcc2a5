import { type Static, Type } from "@sinclair/typebox";
import { Labels } from "./connectors.js";
import { ImageName } from "./images.js";
import { UNIT_NAME_MAX_LENGTH, UNIT_NAME_PATTERN, UNIT_NAME_RULES } from "./names.js";
import { TemplateName } from "./templates.js";
import { ENVIRONMENT_VERSION_PATTERN } from "./versions.js";

const Nullable = <T extends ReturnType<typeof Type.String>>(t: T) => Type.Union([t, Type.Null()]);
const DateTime = (description?: string) =>
  Type.String({ format: "date-time", ...(description ? { description } : {}) });

/** Spec 2.1: unit runtime status. */
export const UnitStatus = Type.Union([Type.Literal("cold"), Type.Literal("warm"), Type.Literal("running")], {
  title: "UnitStatus",
});
export type UnitStatus = Static<typeof UnitStatus>;

export const UnitName = Type.String({
  minLength: 1,
  maxLength: UNIT_NAME_MAX_LENGTH,
  pattern: UNIT_NAME_PATTERN,
  description: `Unit name: ${UNIT_NAME_RULES}.`,
  "x-message": `must be ${UNIT_NAME_RULES}`,
});

/** Spec 2.2: URL settings as returned. */
export const UrlSettings = Type.Object(
  {
    auth: Type.Union([Type.Literal("unit"), Type.Literal("public")]),
    private_access: Type.Optional(Type.Union([Type.Literal("admins"), Type.Literal("organization")])),
  },
  { title: "UrlSettings", additionalProperties: false },
);
export type UrlSettings = Static<typeof UrlSettings>;

/** Spec 2.2: in requests `auth` is optional and defaults to `unit`. */
export const UrlSettingsRequest = Type.Object(
  {
    auth: Type.Optional(Type.Union([Type.Literal("unit"), Type.Literal("public")], { default: "unit" })),
    private_access: Type.Optional(Type.Union([Type.Literal("admins"), Type.Literal("organization"), Type.Null()])),
  },
  { additionalProperties: false },
);
export type UrlSettingsRequest = Static<typeof UrlSettingsRequest>;

/**
 * A unit's size (issue #12; the Sprites clients' `config`). `ram_mb` and `cpus` are the unit's
 * resources policy (`memory.limit_mb`, `cpu.cores`, spec 4.5): set at create they are its limits,
 * and a later resources POST shows here; `storage_gb` likewise is its `disk.limit_mb` (GiB × 1024).
 */
export const UnitConfig = Type.Object(
  {
    ram_mb: Type.Optional(
      Type.Integer({
        minimum: 32,
        maximum: 1048576,
        description: "Memory limit in MiB: the resources policy's memory.limit_mb",
      }),
    ),
    cpus: Type.Optional(
      Type.Number({
        exclusiveMinimum: 0,
        maximum: 1024,
        description: "CPU time in cores: the resources policy's cpu.cores (at most what units may use on this host)",
      }),
    ),
    storage_gb: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: 65536,
        description:
          "Disk size in GiB: the resources policy's disk.limit_mb (× 1024): what the unit may write on top of its image",
      }),
    ),
  },
  { additionalProperties: false, title: "UnitConfig" },
);
export type UnitConfig = Static<typeof UnitConfig>;

/** Spec 2.1. */
export const Unit = Type.Object(
  {
    id: Type.String({ description: "`unit-<uuid>`" }),
    name: Type.String(),
    organization: Type.String({ description: "Organization slug" }),
    url: Type.String({ description: "The unit's own URL, `<scheme>://<name>-<random>.<unit_host>`" }),
    status: UnitStatus,
    created_at: DateTime(),
    updated_at: DateTime(),
    url_settings: Type.Union([UrlSettings, Type.Null()]),
    labels: Type.Optional(Type.Array(Type.String(), { description: "Omitted when empty" })),
    config: Type.Optional(UnitConfig),
    environment_version: Nullable(Type.String({ pattern: ENVIRONMENT_VERSION_PATTERN })),
    version: Nullable(Type.String()),
    image: Type.Optional(
      Type.String({
        description:
          "The image the unit was created from (ours, issue #18): `base`, or the organization image's version `<name>@<id>` (GET /v1/images); a fork's or a template's unit has its source's",
      }),
    ),
    last_running_at: Nullable(DateTime()),
    last_warming_at: Nullable(DateTime()),
    node: Type.Optional(
      Type.String({
        description:
          "The name of the node (host) that holds the unit and runs it (ours, issue #15; GET /v1/nodes shows the nodes to admin tokens). Omitted for a unit that names no node",
      }),
    ),
  },
  { title: "Unit" },
);
export type Unit = Static<typeof Unit>;

/** Spec 4.1 POST /v1/units; `from` (ours) forks another unit's checkpoint, `template` (ours) starts from a template. */
export const CreateUnitRequest = Type.Object(
  {
    name: UnitName,
    url_settings: Type.Optional(UrlSettingsRequest),
    labels: Type.Optional(Labels),
    config: Type.Optional(UnitConfig),
    wait_for_capacity: Type.Optional(
      Type.Boolean({
        description:
          "When the organization runs its running_limit of busy units, a request that wakes this unit waits its turn (first come, first served, up to 60 s) for one to go idle instead of answering 409",
      }),
    ),
    from: Type.Optional(
      Type.Object(
        {
          unit: Type.String({ maxLength: 256, description: "A unit of the same organization" }),
          checkpoint: Type.String({ maxLength: 32, description: "One of its checkpoints, e.g. v3" }),
        },
        { additionalProperties: false, description: "Start from a checkpoint of another unit (fork)" },
      ),
    ),
    image: Type.Optional(
      Type.String({
        ...ImageName,
        description:
          "Start from this image (issue #18; GET /v1/images lists them): `base`, the default, or one of the organization's own (not with from or template)",
      }),
    ),
    template: Type.Optional(
      Type.String({
        ...TemplateName,
        description:
          "Start from an organization template (issue #18): its files, services and policies, as a snapshot (not with from)",
      }),
    ),
  },
  { additionalProperties: false },
);
export type CreateUnitRequest = Static<typeof CreateUnitRequest>;

/**
 * Spec 4.1 PUT /v1/units/{name}: `url_settings`, and (ours; spec 2.1 leaves it open) `labels`,
 * replacing them, or `clear_labels` removing them all (the Sprites clients' form).
 */
export const UpdateUnitRequest = Type.Object(
  {
    url_settings: Type.Optional(UrlSettingsRequest),
    labels: Type.Optional(Labels),
    clear_labels: Type.Optional(Type.Boolean({ description: "true removes every label (not with labels)" })),
  },
  { additionalProperties: false, minProperties: 1, "x-message": "send url_settings, labels and/or clear_labels" },
);
export type UpdateUnitRequest = Static<typeof UpdateUnitRequest>;

export const MAX_RESULTS_DEFAULT = 50;
export const MAX_RESULTS_LIMIT = 500;

/** Spec 4.1 GET /v1/units query. */
export const ListUnitsQuery = Type.Object(
  {
    prefix: Type.Optional(Type.String({ maxLength: UNIT_NAME_MAX_LENGTH, description: "Name prefix filter" })),
    max_results: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_RESULTS_LIMIT, default: MAX_RESULTS_DEFAULT })),
    continuation_token: Type.Optional(
      Type.String({ maxLength: 512, description: "`next_continuation_token` of the previous page" }),
    ),
  },
  { additionalProperties: false },
);
export type ListUnitsQuery = Static<typeof ListUnitsQuery>;

/** Spec 2.3. */
export const UnitList = Type.Object(
  {
    sprites: Type.Array(Unit),
    has_more: Type.Boolean(),
    next_continuation_token: Type.Union([Type.String(), Type.Null()]),
    running: Type.Integer(),
    warm: Type.Integer(),
    cold: Type.Integer(),
    name: Type.String({ description: "Organization slug" }),
    running_limit: Type.Optional(Type.Integer()),
    warm_limit: Type.Optional(Type.Integer()),
  },
  { title: "UnitList" },
);
export type UnitList = Static<typeof UnitList>;

/** Spec 2.4. */
export const HealthCheck = Type.Object(
  {
    unit_name: Type.String(),
    unit_id: Type.String(),
    status: Type.Union([
      Type.Literal("healthy"),
      Type.Literal("hibernated"),
      Type.Literal("unhealthy"),
      Type.Literal("error"),
    ]),
    reason: Type.Union([Type.String(), Type.Null()]),
    checked_at: DateTime(),
    elapsed: Type.Integer({ description: "Duration of the check in milliseconds" }),
  },
  { title: "HealthCheck" },
);
export type HealthCheck = Static<typeof HealthCheck>;

/** Spec 4.1 upgrade: body `version`. `latest` or a known environment version. */
export const UpgradeRequest = Type.Object(
  {
    version: Type.String({
      minLength: 1,
      maxLength: 64,
      description: "`latest` or an environment version `v<major>.<minor>.<patch>-rc<N>`",
    }),
  },
  { additionalProperties: false },
);
export type UpgradeRequest = Static<typeof UpgradeRequest>;

export const UpgradeResponse = Type.Object(
  {
    name: Type.String(),
    status: Type.Union([Type.Literal("upgraded"), Type.Literal("up_to_date")], {
      description: "`upgraded` when the unit's version changed, `up_to_date` when it already had it",
    }),
  },
  { title: "UpgradeResponse" },
);
export type UpgradeResponse = Static<typeof UpgradeResponse>;
