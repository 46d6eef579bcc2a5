import type { Template as WireTemplate, TemplateList as WireTemplateList } from "@ums/protocol";
import type { UmsClient } from "./client.js";
import type { RequestOpts } from "./config.js";

/** An organization template (issue #18): a unit's checkpoint (files, services, policies), frozen. */
export interface TemplateInfo {
  /** `tpl-<uuid>`. */
  id: string;
  name: string;
  description: string;
  /** Organization slug. */
  organization: string;
  /** The unit and checkpoint it was published from (the unit may be gone since). */
  source: { unit: string; checkpoint: string };
  environmentVersion: string | null;
  createdAt: Date;
}

export interface TemplateCreateOpts extends RequestOpts {
  /** The unit whose checkpoint becomes the template. */
  unit: string;
  /** The checkpoint, e.g. `v3`. */
  checkpoint: string;
  description?: string | undefined;
}

function fromWire(t: WireTemplate): TemplateInfo {
  return {
    id: t.id,
    name: t.name,
    description: t.description,
    organization: t.organization,
    source: { unit: t.source.unit, checkpoint: t.source.checkpoint },
    environmentVersion: t.environment_version,
    createdAt: new Date(t.created_at),
  };
}

const request = (o: RequestOpts) => ({ timeoutMs: o.timeoutMs, signal: o.signal });
const path = (name: string) => `/v1/templates/${encodeURIComponent(name)}`;

/**
 * `client.templates`: the organization's templates (issue #18). Start a unit from one with
 * `Unit.create(name, { template })`. An unknown name throws `NotFoundError` (`UMS_TEMPLATE_NOT_FOUND`),
 * a taken one `ConflictError` (`UMS_TEMPLATE_EXISTS`).
 */
export class Templates {
  constructor(private readonly client: UmsClient) {}

  /** Publishes checkpoint `checkpoint` of `unit` as template `name`. */
  async create(name: string, opts: TemplateCreateOpts): Promise<TemplateInfo> {
    const body = {
      name,
      ...(opts.description !== undefined && { description: opts.description }),
      from: { unit: opts.unit, checkpoint: opts.checkpoint },
    };
    return fromWire(await this.client.request<WireTemplate>("POST", "/v1/templates", { ...request(opts), body }));
  }

  /** The organization's templates, by name. */
  async list(opts: RequestOpts = {}): Promise<TemplateInfo[]> {
    const r = await this.client.request<WireTemplateList>("GET", "/v1/templates", request(opts));
    return r.templates.map(fromWire);
  }

  async get(name: string, opts: RequestOpts = {}): Promise<TemplateInfo> {
    return fromWire(await this.client.request<WireTemplate>("GET", path(name), request(opts)));
  }

  /** Deletes a template; units made from it keep working. */
  async delete(name: string, opts: RequestOpts = {}): Promise<void> {
    await this.client.request<void>("DELETE", path(name), request(opts));
  }
}
