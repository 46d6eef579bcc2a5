import { Type } from "@sinclair/typebox";
import {
  CreateUnitRequest,
  ErrorBody,
  HealthCheck,
  ListUnitsQuery,
  MAX_RESULTS_DEFAULT,
  namePrefixProblem,
  Unit,
  UnitList,
  UpdateUnitRequest,
  UpgradeRequest,
  UpgradeResponse,
} from "@ums/protocol";
import { actorOf } from "../../events/actor.js";
import type { Dialect } from "../dialect.js";
import { ApiError } from "../errors.js";
import type { ApiInstance } from "../instance.js";
import { commonErrors, notFound, UnitParams } from "../schemas.js";
import type { UnitService } from "./service.js";

/** Spec 4.1: the units resource. */
export interface UnitRouteDeps {
  readonly units: UnitService;
  /** Which of the API's two dialects these routes answer in (api/dialect.ts). */
  readonly dialect: Dialect;
}

/** Spec 2.4 under /v1/sprites: the Sprites clients read the unit as `sprite_name` and `sprite_id`. */
const SpritesHealthCheck = Type.Object(
  {
    sprite_name: Type.String(),
    sprite_id: Type.String(),
    status: HealthCheck.properties.status,
    reason: HealthCheck.properties.reason,
    checked_at: HealthCheck.properties.checked_at,
    elapsed: HealthCheck.properties.elapsed,
  },
  { title: "SpritesHealthCheck" },
);

export function unitRoutes(app: ApiInstance, { units, dialect }: UnitRouteDeps): void {
  const tags = ["units"];

  app.get(
    "/",
    {
      schema: {
        tags,
        summary: "List units",
        querystring: ListUnitsQuery,
        response: { 200: UnitList, ...commonErrors },
      },
    },
    async (req) => {
      const { prefix, max_results, continuation_token } = req.query;
      const problem = prefix === undefined ? undefined : namePrefixProblem(prefix);
      if (problem) throw ApiError.validation([`prefix: ${problem}`]);
      return units.list(req.auth.org, {
        ...(prefix !== undefined && { prefix }),
        maxResults: max_results ?? MAX_RESULTS_DEFAULT,
        ...(continuation_token !== undefined && { continuationToken: continuation_token }),
      });
    },
  );

  app.post(
    "/",
    {
      schema: {
        tags,
        summary: "Create a unit (cold)",
        body: CreateUnitRequest,
        response: { 201: Unit, ...commonErrors, 403: ErrorBody, 409: ErrorBody, 503: ErrorBody },
      },
    },
    async (req, reply) => {
      const unit = await units.create(req.auth.org, req.body, actorOf(req));
      return reply.code(201).send(await units.presentOne(req.auth.org, unit));
    },
  );

  app.get(
    "/:name",
    {
      schema: {
        tags,
        summary: "Get a unit",
        params: UnitParams,
        response: { 200: Unit, ...commonErrors, ...notFound },
      },
    },
    async (req) => units.presentOne(req.auth.org, await units.require(req.auth.org, req.params.name)),
  );

  app.put(
    "/:name",
    {
      schema: {
        tags,
        summary: "Update a unit's url_settings and/or labels (each replaced whole; clear_labels removes them)",
        params: UnitParams,
        body: UpdateUnitRequest,
        response: { 200: Unit, ...commonErrors, ...notFound },
      },
    },
    async (req) => {
      const { url_settings, labels, clear_labels } = req.body;
      const unit = await units.update(req.auth.org, req.params.name, url_settings, labels, clear_labels);
      return units.presentOne(req.auth.org, unit);
    },
  );

  app.delete(
    "/:name",
    {
      schema: {
        tags,
        summary: "Delete a unit and everything it owns",
        params: UnitParams,
        response: { 204: Type.Null(), ...commonErrors, ...notFound },
      },
    },
    async (req, reply) => {
      await units.delete(req.auth.org, req.params.name, actorOf(req));
      return reply.code(204).send(null);
    },
  );

  app.get(
    "/:name/check",
    {
      schema: {
        tags,
        summary:
          dialect === "sprites"
            ? "Health check; names the unit as sprite_name and sprite_id under /v1/sprites"
            : "Health check",
        params: UnitParams,
        response: { 200: dialect === "sprites" ? SpritesHealthCheck : HealthCheck, ...commonErrors, ...notFound },
      },
    },
    async (req) => {
      const health = await units.check(req.auth.org, req.params.name);
      if (dialect === "units") return health;
      const { unit_name, unit_id, ...rest } = health;
      return { sprite_name: unit_name, sprite_id: unit_id, ...rest };
    },
  );

  app.post(
    "/:name/upgrade",
    {
      schema: {
        tags,
        summary:
          "Move a unit to an environment version ('latest' or v<major>.<minor>.<patch>-rc<N>); a unit made from an organization image moves to the newest build of it ('latest' or its NAME@ID), its system files replaced only when it changed none of them (409 UMS_UPGRADE_REFUSED lists what it changed; docs/IMAGES.md has the rule), its state saved first as a checkpoint",
        params: UnitParams,
        body: UpgradeRequest,
        response: { 200: UpgradeResponse, ...commonErrors, ...notFound, 409: ErrorBody },
      },
    },
    async (req) => units.upgrade(req.auth.org, req.params.name, req.body.version),
  );
}
