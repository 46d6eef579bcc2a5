import { Type } from "@sinclair/typebox";
import { CreateTemplateRequest, ErrorBody, Template, TemplateList } from "@ums/protocol";
import type { ApiInstance } from "../instance.js";
import { commonErrors, notFound } from "../schemas.js";
import { TemplateService } from "./service.js";

const Params = Type.Object({ name: Type.String({ maxLength: 256 }) });

/** Issue #18: organization templates (`POST /v1/units` with `template` creates a unit from one). */
export function templateRoutes(app: ApiInstance, templates: TemplateService): void {
  const tags = ["templates"];

  app.post(
    "/v1/templates",
    {
      schema: {
        tags,
        summary: "Publish a unit's checkpoint (files, services, policies) as an organization template",
        body: CreateTemplateRequest,
        response: { 201: Template, ...commonErrors, ...notFound, 409: ErrorBody },
      },
    },
    async (req, reply) => {
      const t = await templates.create(req.auth.org, req.body);
      return reply.code(201).send(TemplateService.present(req.auth.org, t));
    },
  );

  app.get(
    "/v1/templates",
    {
      schema: {
        tags,
        summary: "The organization's templates, by name",
        response: { 200: TemplateList, ...commonErrors },
      },
    },
    async (req) => ({
      templates: (await templates.list(req.auth.org)).map((t) => TemplateService.present(req.auth.org, t)),
    }),
  );

  app.get(
    "/v1/templates/:name",
    {
      schema: {
        tags,
        summary: "One template",
        params: Params,
        response: { 200: Template, ...commonErrors, ...notFound },
      },
    },
    async (req) => TemplateService.present(req.auth.org, await templates.require(req.auth.org, req.params.name)),
  );

  app.delete(
    "/v1/templates/:name",
    {
      schema: {
        tags,
        summary: "Delete a template; units made from it keep working (their files are snapshots of their own)",
        params: Params,
        response: { 204: Type.Null(), ...commonErrors, ...notFound },
      },
    },
    async (req, reply) => {
      await templates.delete(req.auth.org, req.params.name);
      return reply.code(204).send(null);
    },
  );
}
