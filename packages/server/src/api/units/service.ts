import { randomUUID } from "node:crypto";
import {
  BASE_IMAGE_NAME,
  type CreateUnitRequest,
  ENVIRONMENT_VERSION,
  ENVIRONMENT_VERSION_PATTERN,
  ErrorCode,
  type HealthCheck,
  KNOWN_ENVIRONMENT_VERSIONS,
  type ResourcesPolicy,
  type UnitList,
  type UpgradeResponse,
  type UrlSettingsRequest,
  unitNameProblem,
} from "@ums/protocol";
import type { ServerConfig } from "../../config.js";
import type { Actor, EmitEvent } from "../../events/event-log.js";
import { NodeUnreachableError, NoNodeError } from "../../node/errors.js";
import { type MovePlan, moveUnit } from "../../node/move.js";
import type { NodePlacement } from "../../node/placement/node-placement.js";
import type { UnitNode } from "../../node/unit-node.js";
import type { CheckpointRecord, OrgRecord, TemplateRecord, UnitRecord } from "../../store/records.js";
import { type Store, UnitExistsError, UnitLimitError } from "../../store/store.js";
import { ApiError } from "../errors.js";
import { requireImage } from "../images/service.js";
import { NodeNames } from "./node-names.js";
import { decodeContinuation, encodeContinuation } from "./pagination.js";
import { presentUnit } from "./present.js";
import { newUrlLabel } from "./url-label.js";

/** Spec 2.2: `auth` defaults to `unit`; `private_access` narrows a `unit` URL and means nothing on a public one. */
function urlSettings(s: UrlSettingsRequest | undefined): {
  urlAuth: "unit" | "public";
  privateAccess: "admins" | "organization" | null;
} {
  const urlAuth = s?.auth ?? "unit";
  const privateAccess = s?.private_access ?? null;
  if (urlAuth === "public" && privateAccess) {
    throw ApiError.validation([
      "url_settings.private_access: applies only when auth is 'unit'; drop it or set auth to 'unit'",
    ]);
  }
  return { urlAuth, privateAccess };
}

/** The units use cases of spec 4.1, between the routes and the store. */
export class UnitService {
  constructor(
    private readonly store: Store,
    private readonly config: ServerConfig,
    /** The port the server listens on, known once it listens (the config may say port 0). */
    private readonly listenPort: () => number,
    private readonly node: UnitNode,
    /** Issue #17: units created, forked and deleted, policies changed, the unit limit reached. */
    readonly emit: EmitEvent = () => {},
    /** Issue #15: chooses a new unit's node (docs/SCALE-OUT.md "Placement"). */
    private readonly placement?: NodePlacement,
  ) {
    this.nodeNames = new NodeNames(store);
  }

  /** Issue #16 part 7: node names read once for many answers. */
  private readonly nodeNames: NodeNames;

  /** A name that breaks the naming rules cannot exist: 404 without asking the database. */
  private static existing(name: string): string {
    if (unitNameProblem(name)) throw ApiError.unitNotFound(name);
    return name;
  }

  async require(org: OrgRecord, name: string): Promise<UnitRecord> {
    const unit = await this.store.units.get(org.id, UnitService.existing(name));
    if (!unit) throw ApiError.unitNotFound(name);
    return unit;
  }

  /** Stores one of the unit's policies (spec 2.8-2.10, as JSON); putting it in force is the caller's. */
  async setPolicy(
    unit: UnitRecord,
    policy: { resources: string } | { privileges: string } | { network: string },
    actor: Actor,
  ) {
    await this.store.units.update(unit.orgId, unit.name, { ...policy, updatedAt: new Date().toISOString() });
    const [kind, value] = Object.entries(policy)[0] as [string, string];
    this.emit({
      orgId: unit.orgId,
      type: "policy.changed",
      unit: unit.name,
      actor,
      data: { policy: kind, value: JSON.parse(value) as unknown },
    });
  }

  present(org: OrgRecord, unit: UnitRecord, nodeName?: string) {
    return presentUnit(this.config, this.listenPort(), org, unit, nodeName);
  }

  /** One unit as the API answers it, with the name of the node that holds it (issue #15). */
  async presentOne(org: OrgRecord, unit: UnitRecord) {
    const name = unit.nodeId === null ? undefined : await this.nodeNames.name(unit.nodeId);
    return this.present(org, unit, name);
  }

  /** The unit's checkpoint `id`, or a 404 that says checkpoints belong to the unit they were taken of. */
  async requireCheckpoint(unit: UnitRecord, id: string): Promise<CheckpointRecord> {
    const cp = /^v\d{1,9}$/.test(id) ? await this.store.checkpoints.get(unit.id, id) : undefined;
    if (!cp) {
      throw new ApiError(
        404,
        ErrorCode.CheckpointNotFound,
        `unit '${unit.name}' has no checkpoint '${id}' (a checkpoint belongs to the unit it was taken of)`,
      );
    }
    return cp;
  }

  /** The version of the image a template's units get (its source unit's), null: the base image. */
  private async imageVersionOf(template: TemplateRecord | undefined): Promise<string | null> {
    if (!template?.imageId) return null;
    return (await this.store.images.getById(template.imageId))?.environmentVersion ?? null;
  }

  /** The organization's template of that name (issue #18), or a 404 that names it. */
  private async requireTemplate(org: OrgRecord, name: string): Promise<TemplateRecord> {
    const t = unitNameProblem(name) ? undefined : await this.store.templates.get(org.id, name);
    if (!t) throw new ApiError(404, ErrorCode.TemplateNotFound, `template '${name}' not found`);
    return t;
  }

  /**
   * `config.ram_mb`, `config.cpus` and `config.storage_gb` as a resources policy (spec 4.5), over `base` (a fork's);
   * cpus beyond what units may use on this host are refused, as a resources POST refuses them.
   */
  private async configResources(config: CreateUnitRequest["config"], base: string): Promise<string> {
    if (config?.ram_mb === undefined && config?.cpus === undefined && config?.storage_gb === undefined) return base;
    if (config.cpus !== undefined) {
      const max = (await this.node.resourceLimits()).maxCpuCores;
      if (config.cpus > max) {
        throw ApiError.validation([
          `config.cpus: must be at most ${max}, the cores units may use on this host; got ${config.cpus}`,
        ]);
      }
    }
    const policy: ResourcesPolicy = {
      ...(JSON.parse(base) as ResourcesPolicy),
      ...(config.ram_mb !== undefined && { memory: { limit_mb: config.ram_mb } }),
      ...(config.cpus !== undefined && { cpu: { cores: config.cpus } }),
      ...(config.storage_gb !== undefined && { disk: { limit_mb: config.storage_gb * 1024 } }),
    };
    return JSON.stringify(policy);
  }

  async create(org: OrgRecord, req: CreateUnitRequest, actor: Actor): Promise<UnitRecord> {
    const { name, from, labels = [], config } = req;
    if (from && req.template !== undefined) {
      throw ApiError.validation(["template: a unit starts from a template or from a checkpoint (from), not both"]);
    }
    if (req.image !== undefined && (from || req.template !== undefined)) {
      throw ApiError.validation([
        "image: a unit starts from an image, a template or a checkpoint (from): one of them; a template's or checkpoint's unit keeps its own image",
      ]);
    }
    // Issue #18: an organization image (`base`, the default, is the host's).
    const image =
      req.image === undefined || req.image === BASE_IMAGE_NAME
        ? undefined
        : await requireImage(this.store, org, req.image);
    // Fork (ours): the new unit starts from another unit's checkpoint, files and policies alike.
    const source = from && (await this.require(org, from.unit));
    const cp = source && from && (await this.requireCheckpoint(source, from.checkpoint));
    // Issue #18: or from an organization template, files and policies alike.
    const template = req.template === undefined ? undefined : await this.requireTemplate(org, req.template);
    const origin = cp ?? template;
    if (!org.unitsEnabled) {
      throw new ApiError(403, ErrorCode.LimitReached, `units are disabled for organization '${org.slug}'`);
    }
    const resources = await this.configResources(config, origin?.resources ?? "{}");
    // A fork's data is on its source's node, a template's or an image's files on the node that made
    // it: the unit goes there. A fork of a checkpoint the object store holds may go to any node when
    // that one cannot take it (the node receives the checkpoint first, issue #15).
    const on = source?.nodeId ?? template?.nodeId ?? image?.nodeId ?? null;
    const nodeId = (await this.place(org, on, cp?.replica?.state === "replicated")) ?? null;
    let unit: UnitRecord;
    try {
      unit = await this.store.units.create(
        {
          id: `unit-${randomUUID()}`,
          orgId: org.id,
          name,
          urlLabel: newUrlLabel(name),
          status: "cold",
          ...urlSettings(req.url_settings),
          labels: [...labels],
          version: source?.version ?? template?.environmentVersion ?? ENVIRONMENT_VERSION,
          environmentVersion: source?.environmentVersion ?? template?.environmentVersion ?? ENVIRONMENT_VERSION,
          imageId: image?.id ?? source?.imageId ?? template?.imageId ?? null,
          imageVersion: image?.environmentVersion ?? source?.imageVersion ?? (await this.imageVersionOf(template)),
          createdAt: new Date().toISOString(),
          resources,
          storageGb: config?.storage_gb ?? null,
          waitForCapacity: req.wait_for_capacity ?? false,
          nodeId,
          ...(origin && { privileges: origin.privileges, network: origin.network }),
        },
        org.maxUnits,
      );
    } catch (err) {
      if (err instanceof UnitExistsError) {
        throw new ApiError(409, ErrorCode.UnitExists, `a unit named '${name}' already exists; choose another name`);
      }
      if (err instanceof UnitLimitError) {
        this.emit({
          orgId: org.id,
          type: "limit.reached",
          unit: name,
          actor,
          data: { kind: "max_units", limit: err.limit },
        });
        throw new ApiError(
          403,
          ErrorCode.LimitReached,
          `organization '${org.slug}' has reached its limit of ${err.limit} units (max_sprites); delete a unit or raise the limit`,
        );
      }
      throw err;
    }
    if ((!source || !cp) && !template && !image) {
      try {
        await this.node.create(unit);
      } catch (err) {
        // A plain create makes nothing on its node until the first boot: a node that could not be
        // reached leaves only the row, which goes (the directory now keeps placement away from
        // that node: the client's retry goes elsewhere).
        if (err instanceof NodeUnreachableError) {
          await this.store.units.delete(org.id, unit.name);
          throw new ApiError(
            503,
            ErrorCode.NoNode,
            `${err.message}; nothing was created: try again (another node will be chosen)`,
          );
        }
        throw err;
      }
      this.emit({ orgId: org.id, type: "unit.created", unit: unit.name, actor, data: {} });
      return unit;
    }
    try {
      if (image) await this.node.fromImage(image, unit);
      else if (template) await this.node.fromTemplate(template, unit);
      else if (source && cp) await this.node.fork(source, cp, unit);
    } catch (err) {
      // Whatever the host made of it (a part of the copy; a disk a request racing the fork booted)
      // goes with its row. If that fails, the row stays: a unit the user sees and can delete,
      // rather than a disk on the host that nothing points at.
      await this.node.destroy(unit).catch(() => {});
      throw err;
    }
    this.emit(
      image
        ? { orgId: org.id, type: "unit.created", unit: unit.name, actor, data: { image: image.name } }
        : template
          ? { orgId: org.id, type: "unit.created", unit: unit.name, actor, data: { template: template.name } }
          : {
              orgId: org.id,
              type: "unit.forked",
              unit: unit.name,
              actor,
              data: { source: source?.name, checkpoint: cp?.id },
            },
    );
    return unit;
  }

  async list(
    org: OrgRecord,
    q: { prefix?: string; maxResults: number; continuationToken?: string },
  ): Promise<UnitList> {
    let after: string | undefined;
    if (q.continuationToken !== undefined && q.continuationToken !== "") {
      after = decodeContinuation(q.continuationToken);
      if (after === undefined) {
        throw ApiError.validation([
          "continuation_token: is not a token this server issued; pass next_continuation_token from the previous page unchanged",
        ]);
      }
    }
    const rows = await this.store.units.page(org.id, {
      ...(q.prefix ? { prefix: q.prefix } : {}),
      ...(after !== undefined ? { after } : {}),
      limit: q.maxResults + 1,
    });
    const hasMore = rows.length > q.maxResults;
    const page = hasMore ? rows.slice(0, q.maxResults) : rows;
    const last = page[page.length - 1];
    const count = (s: UnitRecord["status"]) => page.filter((u) => u.status === s).length;
    // Issue #15: each unit names its node.
    const nodeNames = await this.nodeNames.of(page.flatMap((u) => (u.nodeId === null ? [] : [u.nodeId])));
    return {
      sprites: page.map((u) => this.present(org, u, u.nodeId === null ? undefined : nodeNames.get(u.nodeId))),
      has_more: hasMore,
      next_continuation_token: hasMore && last ? encodeContinuation(last.name) : null,
      running: count("running"),
      warm: count("warm"),
      cold: count("cold"),
      name: org.slug,
      running_limit: org.runningLimit,
      warm_limit: org.warmLimit,
    };
  }

  /**
   * Spec 4.1 PUT: `url_settings` when given, and `labels` (ours) when given, each replaced whole;
   * `clear_labels` removes them all.
   */
  async update(
    org: OrgRecord,
    name: string,
    settings: UrlSettingsRequest | undefined,
    labels?: readonly string[],
    clearLabels = false,
  ): Promise<UnitRecord> {
    if (clearLabels && labels && labels.length > 0) {
      throw ApiError.validation(["clear_labels: removes every label; send it without labels, or send labels alone"]);
    }
    if (clearLabels) labels = [];
    const unit = await this.store.units.update(org.id, UnitService.existing(name), {
      ...(settings && urlSettings(settings)),
      ...(labels && { labels: [...labels] }),
      updatedAt: new Date().toISOString(),
    });
    if (!unit) throw ApiError.unitNotFound(name);
    return unit;
  }

  /**
   * Issue #15 (docs/SCALE-OUT.md): where the unit moves: node `to` (by name), or the node placement
   * chooses among the others; what is wrong with the request is thrown here, before anything moves.
   * Then `move`: its node stops it and saves its files as a checkpoint that the object
   * store holds with all its others; the target receives it and makes it the unit's files; then the
   * unit's record names the target, and its old node removes what it had. Any failure before the
   * record changes leaves the unit where it was.
   */
  async planMove(org: OrgRecord, name: string, to: string | undefined): Promise<MovePlan> {
    const unit = await this.require(org, name);
    if (!this.placement)
      throw new ApiError(409, ErrorCode.NoNode, "this server has a single node: there is nowhere to move to");
    const from = unit.nodeId;
    if (!from) throw new ApiError(409, ErrorCode.NoNode, `unit '${name}' names no node yet: restart its node first`);
    let target: string;
    if (to !== undefined) {
      const row = await this.store.nodes.getByName(to);
      if (!row) throw ApiError.validation([`node: no node is named '${to}' (ums node list names them)`]);
      if (row.id === from) throw ApiError.validation([`node: unit '${name}' is on node '${to}' already`]);
      target = await this.placement.choose(org, { on: row.id });
    } else {
      if (!(await this.store.nodes.list()).some((n) => n.id !== from)) {
        throw ApiError.validation([
          `node: there is no other node to move unit '${name}' to (ums node list names them)`,
        ]);
      }
      target = await this.placement.choose(org, { not: from });
    }
    return { unit, from, target };
  }

  /** Carries out a move `planMove` chose (node/move.ts); progress tells each step. */
  move(plan: MovePlan, progress: (m: string) => void): Promise<{ checkpoint: CheckpointRecord; node: string }> {
    return moveUnit(this.store, this.node, plan, progress);
  }

  /** The new unit's node: `on` when it must be (or should be) there; any node when `anywhere` and `on` cannot take it. */
  private async place(org: OrgRecord, on: string | null, anywhere: boolean): Promise<string | null | undefined> {
    if (!this.placement) return undefined;
    try {
      return await this.placement.choose(org, { on });
    } catch (err) {
      if (!(err instanceof NoNodeError) || !anywhere || on === null) throw err;
      return this.placement.choose(org, { on: null });
    }
  }

  async delete(org: OrgRecord, name: string, actor: Actor): Promise<void> {
    const unit = await this.require(org, name);
    if (!(await this.node.destroy(unit))) throw ApiError.unitNotFound(name);
    this.emit({ orgId: org.id, type: "unit.deleted", unit: unit.name, actor, data: {} });
  }

  async check(org: OrgRecord, name: string): Promise<HealthCheck> {
    const started = performance.now();
    const unit = await this.require(org, name);
    const result = (status: HealthCheck["status"], reason: string | null): HealthCheck => ({
      unit_name: unit.name,
      unit_id: unit.id,
      status,
      reason,
      checked_at: new Date().toISOString(),
      elapsed: Math.round(performance.now() - started),
    });
    const health = await this.node.health(unit);
    return result(health.status, health.reason);
  }

  /**
   * Issue #18: a unit made from an organization image moves to the newest build of that image
   * (`latest`, or that build's `<name>@<id>`) where that is safe (runtime/runc/upgrade.ts); the
   * unit's state is saved as a checkpoint first.
   */
  private async upgradeImage(org: OrgRecord, unit: UnitRecord, version: string): Promise<UpgradeResponse> {
    const mine = await this.store.images.getById(unit.imageId ?? "");
    const imageName = mine?.name ?? unit.imageVersion?.split("@")[0] ?? "";
    const newest = await this.store.images.get(org.id, imageName);
    if (!newest) {
      throw ApiError.validation([
        `version: image '${imageName}' that unit '${unit.name}' was made from has no build to upgrade to (it was deleted)`,
      ]);
    }
    if (version !== "latest" && version !== newest.environmentVersion) {
      throw ApiError.validation([
        `version: '${version}' is not the newest build of image '${imageName}'; available: latest, ${newest.environmentVersion}`,
      ]);
    }
    if (newest.id === unit.imageId) return { name: unit.name, status: "up_to_date" };
    await this.node.upgrade(org, unit, newest, () => {});
    return { name: unit.name, status: "upgraded" };
  }

  async upgrade(org: OrgRecord, name: string, version: string): Promise<UpgradeResponse> {
    const unit = await this.require(org, name);
    if (unit.imageId !== null) return this.upgradeImage(org, unit, version);
    const target = version === "latest" ? ENVIRONMENT_VERSION : version;
    if (!new RegExp(ENVIRONMENT_VERSION_PATTERN).test(target)) {
      throw ApiError.validation([
        `version: '${version}' is neither 'latest' nor a version like ${ENVIRONMENT_VERSION}`,
      ]);
    }
    if (!KNOWN_ENVIRONMENT_VERSIONS.includes(target)) {
      throw ApiError.validation([
        `version: '${version}' is not available on this server; available: latest, ${KNOWN_ENVIRONMENT_VERSIONS.join(", ")}`,
      ]);
    }
    if (unit.version === target && unit.environmentVersion === target) return { name, status: "up_to_date" };
    const updated = await this.store.units.update(org.id, name, {
      version: target,
      environmentVersion: target,
      updatedAt: new Date().toISOString(),
    });
    if (!updated) throw ApiError.unitNotFound(name);
    return { name, status: "upgraded" };
  }
}
