import { type CreateTemplateRequest, ErrorCode, type Template, unitNameProblem } from "@ums/protocol";
import type { UnitNode } from "../../node/unit-node.js";
import type { OrgRecord, TemplateRecord } from "../../store/records.js";
import { type Store, TemplateExistsError } from "../../store/store.js";
import { ApiError } from "../errors.js";
import type { UnitService } from "../units/service.js";

/** Issue #18: organization templates, between the routes and the node (which writes their rows and files). */
export class TemplateService {
  constructor(
    private readonly store: Store,
    private readonly units: UnitService,
    private readonly node: UnitNode,
  ) {}

  static notFound(name: string): ApiError {
    return new ApiError(404, ErrorCode.TemplateNotFound, `template '${name}' not found`);
  }

  /** The organization's template of that name; another organization's answers 404 exactly as a missing one. */
  async require(org: OrgRecord, name: string): Promise<TemplateRecord> {
    const t = unitNameProblem(name) ? undefined : await this.store.templates.get(org.id, name);
    if (!t) throw TemplateService.notFound(name);
    return t;
  }

  async create(org: OrgRecord, req: CreateTemplateRequest): Promise<TemplateRecord> {
    const source = await this.units.require(org, req.from.unit);
    const cp = await this.units.requireCheckpoint(source, req.from.checkpoint);
    if (await this.store.templates.get(org.id, req.name)) throw TemplateService.exists(req.name);
    try {
      return await this.node.publishTemplate(source, cp, { name: req.name, description: req.description ?? "" });
    } catch (err) {
      if (err instanceof TemplateExistsError) throw TemplateService.exists(req.name);
      throw err;
    }
  }

  private static exists(name: string): ApiError {
    return new ApiError(
      409,
      ErrorCode.TemplateExists,
      `a template named '${name}' already exists; delete it or choose another name`,
    );
  }

  list(org: OrgRecord): Promise<TemplateRecord[]> {
    return this.store.templates.list(org.id);
  }

  async delete(org: OrgRecord, name: string): Promise<void> {
    await this.node.deleteTemplate(await this.require(org, name));
  }

  static present(org: OrgRecord, t: TemplateRecord): Template {
    return {
      id: t.id,
      name: t.name,
      description: t.description,
      organization: org.slug,
      source: { unit: t.sourceUnit, checkpoint: t.sourceCheckpoint },
      environment_version: t.environmentVersion,
      created_at: t.createdAt,
    };
  }
}
