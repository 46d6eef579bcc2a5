import { Type } from "@sinclair/typebox";
import { ErrorBody, Image, ImageList, ImageRecipe, ImportImageQuery } from "@ums/protocol";
import { errorAnswer } from "../../errors/respond.js";
import { ndjson } from "../checkpoints/ndjson.js";
import type { ApiInstance } from "../instance.js";
import { commonErrors, notFound } from "../schemas.js";
import { ImageService } from "./service.js";

const Params = Type.Object({ name: Type.String({ maxLength: 256 }) });

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
          "Build an organization image from a recipe: Debian packages on top of the base image's, files, shell steps run as root in a unit of the organization, env, user and workdir. Cached by the recipe's content: the same recipe answers the image it built. A bad recipe or a taken name is answered at once (400, 409); then the answer is NDJSON (spec 6.1 events): `info` lines (the steps' output too), `complete` with the image, or `error` with its `code`",
        body: ImageRecipe,
        response: { ...commonErrors, 403: ErrorBody, 409: ErrorBody },
      },
    },
    async (req, reply) => {
      const prepared = await images.prepareBuild(req.auth.org, req.body);
      const now = () => new Date().toISOString();
      const out = ndjson(reply);
      const ac = new AbortController();
      // The client went away before the answer ended: stop the work (what was made is removed).
      reply.raw.once("close", () => {
        if (!reply.raw.writableFinished) ac.abort();
      });
      try {
        if (prepared.cached) out.send({ type: "info", data: `image ${req.body.name} is built (cached)`, time: now() });
        const image = await prepared.run({
          progress: (data) => out.send({ type: "info", data, time: now() }),
          signal: ac.signal,
        });
        const body = ImageService.present(req.auth.org, image);
        out.send({
          type: "complete",
          data: `image ${image.name} built`,
          image: body,
          cached: !!prepared.cached,
          time: now(),
        });
      } catch (err) {
        const answer = errorAnswer(err);
        if (answer.internal) req.log.error({ err }, "image build failed");
        out.send({ type: "error", ...answer.body, status: answer.status, time: now() });
      } finally {
        out.end();
      }
      return reply;
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
      async (req, reply) => {
        const now = () => new Date().toISOString();
        let out: ReturnType<typeof ndjson> | undefined;
        const ac = new AbortController();
        // The client went away before the answer ended: stop the work (what was made is removed).
        reply.raw.once("close", () => {
          if (!reply.raw.writableFinished) ac.abort();
        });
        try {
          // The answer turns NDJSON at the first progress event: an archive refused before that (not an
          // image archive, an unsupported format) is a plain 400, a name taken a 409.
          const image = await images.import(req.auth.org, req.query.name, req.raw, {
            progress: (data) => {
              out ??= ndjson(reply);
              out.send({ type: "info", data, time: now() });
            },
            signal: ac.signal,
          });
          const body = ImageService.present(req.auth.org, image);
          out ??= ndjson(reply);
          out.send({ type: "complete", data: `image ${image.name} imported`, image: body, time: now() });
          out.end();
          return reply;
        } catch (err) {
          if (!out) throw err;
          // After the first line the answer is the stream's: an error event carrying what the API would have said.
          const answer = errorAnswer(err);
          if (answer.internal) req.log.error({ err }, "image import failed");
          out.send({ type: "error", ...answer.body, status: answer.status, time: now() });
          out.end();
          return reply;
        }
      },
    );
  });
}
