import { Type } from "@sinclair/typebox";
import { ErrorBody, Image, ImageList, ImageRecipe, ImportImageQuery } from "@ums/protocol";
import type { FastifyReply } from "fastify";
import { errorAnswer } from "../../errors/respond.js";
import type { ImageRecord, OrgRecord } from "../../store/records.js";
import { ndjson } from "../checkpoints/ndjson.js";
import type { ApiInstance } from "../instance.js";
import { commonErrors, notFound } from "../schemas.js";
import { ImageService } from "./service.js";

const Params = Type.Object({ name: Type.String({ maxLength: 256 }) });

/**
 * Runs an import or a build behind its answer: NDJSON (spec 6.1 events) from the start (`eager`) or
 * from the first progress event (an error before it is the plain answer the API gives), `info` per
 * progress message, `complete` with the image, or an `error` event carrying the code and status
 * the API would have answered. The client leaving stops the work (what was made is removed).
 */
async function streamImageWork(
  reply: FastifyReply,
  org: OrgRecord,
  done: string,
  opts: { eager: boolean },
  work: (hooks: {
    progress: (message: string) => void;
    signal: AbortSignal;
  }) => Promise<{ image: ImageRecord; extra?: Record<string, unknown> }>,
): Promise<FastifyReply> {
  const now = () => new Date().toISOString();
  let out = opts.eager ? ndjson(reply) : undefined;
  const ac = new AbortController();
  reply.raw.once("close", () => {
    if (!reply.raw.writableFinished) ac.abort();
  });
  try {
    const { image, extra } = await work({
      progress: (data) => {
        out ??= ndjson(reply);
        out.send({ type: "info", data, time: now() });
      },
      signal: ac.signal,
    });
    out ??= ndjson(reply);
    const body = ImageService.present(org, image);
    out.send({ type: "complete", data: `image ${image.name} ${done}`, image: body, ...extra, time: now() });
  } catch (err) {
    if (!out) throw err;
    const answer = errorAnswer(err);
    if (answer.internal) reply.log.error({ err }, `image ${done === "built" ? "build" : "import"} failed`);
    out.send({ type: "error", ...answer.body, status: answer.status, time: now() });
  }
  out.end();
  return reply;
}

/**
 * Issue #18: images units are created from (`POST /v1/units {image}`): the host's base image and
 * the organization's own, imported from a `docker save` or OCI layout archive.
 */
export function imageRoutes(app: ApiInstance, images: ImageService): void {
  const tags = ["images"];

  app.get(
    "/v1/images",
    {
      schema: {
        tags,
        summary: "The images units can be created from: the host's base image, then the organization's by name",
        response: { 200: ImageList, ...commonErrors },
      },
    },
    async (req) => ({ images: await images.list(req.auth.org) }),
  );

  app.get(
    "/v1/images/:name",
    {
      schema: { tags, summary: "One image", params: Params, response: { 200: Image, ...commonErrors, ...notFound } },
    },
    async (req) => images.get(req.auth.org, req.params.name),
  );

  app.delete(
    "/v1/images/:name",
    {
      schema: {
        tags,
        summary: "Delete an organization image; refused (409) while units or templates made from it exist",
        params: Params,
        response: { 204: Type.Null(), ...commonErrors, ...notFound, 409: ErrorBody },
      },
    },
    async (req, reply) => {
      await images.delete(req.auth.org, req.params.name);
      return reply.code(204).send(null);
    },
  );

  app.post(
    "/v1/images/build",
    {
      schema: {
        tags,
        summary:
          "Build an organization image from a recipe: Debian packages on top of the base image's, files, shell steps run as root in a unit of the organization, env, user and workdir. Cached by the recipe's content: the same recipe answers the image it built. A recipe under the name of an image the organization has makes a newer build of it (units made from the older one keep it until they are upgraded). A bad recipe, the name `base` or a build of the name under way is answered at once (400, 409); then the answer is NDJSON (spec 6.1 events): `info` lines (the steps' output too), `complete` with the image, or `error` with its `code`",
        body: ImageRecipe,
        response: { ...commonErrors, 403: ErrorBody, 409: ErrorBody },
      },
    },
    async (req, reply) => {
      const prepared = await images.prepareBuild(req.auth.org, req.body);
      return streamImageWork(reply, req.auth.org, "built", { eager: true }, async (hooks) => {
        if (prepared.cached) hooks.progress(`image ${req.body.name} is built (cached)`);
        return { image: await prepared.run(hooks), extra: { cached: !!prepared.cached } };
      });
    },
  );

  // The import takes the archive as the raw body, streamed to the pool: no parser of this scope reads it.
  app.register(async (scope) => {
    const raw = scope as unknown as ApiInstance;
    raw.removeAllContentTypeParsers();
    raw.addContentTypeParser("*", (_req, _payload, done) => done(null));
    raw.post(
      "/v1/images",
      {
        schema: {
          tags,
          summary:
            "Import a `docker save` or OCI image layout archive (the raw body, a tar) as an organization image. Once the archive is read the answer is NDJSON (spec 6.1 events): `info` per layer, then `complete` with the image, or `error` with its `code`",
          querystring: ImportImageQuery,
          response: { ...commonErrors, 409: ErrorBody },
        },
      },
      // The answer turns NDJSON at the first progress event: an archive refused before that (not an
      // image archive, an unsupported format) is a plain 400, a name taken a 409.
      async (req, reply) =>
        streamImageWork(reply, req.auth.org, "imported", { eager: false }, async (hooks) => ({
          image: await images.import(req.auth.org, req.query.name, req.raw, { ...hooks, replace: !!req.query.replace }),
        })),
    );
  });
}
