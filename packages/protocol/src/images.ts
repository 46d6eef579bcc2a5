import { type Static, Type } from "@sinclair/typebox";
import { UNIT_NAME_MAX_LENGTH, UNIT_NAME_PATTERN, UNIT_NAME_RULES } from "./names.js";

/** Issue #18: an image's name follows the unit name rules (unique within the organization). */
export const ImageName = Type.String({
  minLength: 1,
  maxLength: UNIT_NAME_MAX_LENGTH,
  pattern: UNIT_NAME_PATTERN,
  description: `Image name: ${UNIT_NAME_RULES}.`,
  "x-message": `must be ${UNIT_NAME_RULES}`,
});

/** Issue #18 `POST /v1/images?name=`: the query of an import (the body is the archive). */
export const ImportImageQuery = Type.Object(
  { name: ImageName },
  { additionalProperties: false, description: "The body is a `docker save` or OCI image layout archive (tar)" },
);
export type ImportImageQuery = Static<typeof ImportImageQuery>;

/** What a unit made from an image runs its commands with (from the image's config). */
export const ImageConfig = Type.Object({
  env: Type.Array(Type.String(), { description: "`NAME=value` entries every command and service starts with" }),
  user: Type.Object(
    { name: Type.String(), uid: Type.Integer(), gid: Type.Integer(), home: Type.String() },
    { description: "The default user of exec sessions and services" },
  ),
  working_dir: Type.Union([Type.String(), Type.Null()], {
    description: "Where commands start when they name no `dir` (null: the user's home)",
  }),
});
export type ImageConfig = Static<typeof ImageConfig>;

/**
 * Issue #18: an image units can be created from. `base` is the host's default image (every
 * organization sees it; `organization` null); the others are the organization's own, imported.
 */
export const Image = Type.Object(
  {
    id: Type.String({ description: "`img-<uuid>`, or `base` for the host's default image" }),
    name: Type.String(),
    kind: Type.Union([Type.Literal("base"), Type.Literal("imported")]),
    organization: Type.Union([Type.String(), Type.Null()], { description: "Organization slug; null: the host's" }),
    version: Type.String({
      description:
        "Which build of the image this is (`<name>@<id>`; `base@<environment version>` for the base image); units keep the spec's environment_version",
    }),
    config: ImageConfig,
    bytes: Type.Integer({ description: "Apparent size of its files" }),
    source: Type.Union([Type.String(), Type.Null()], {
      description: "How it was made: `docker-save` or `oci-layout` (imported), null for the base image",
    }),
    created_at: Type.String({ format: "date-time" }),
  },
  { title: "Image" },
);
export type Image = Static<typeof Image>;

export const ImageList = Type.Object({ images: Type.Array(Image) }, { title: "ImageList" });
export type ImageList = Static<typeof ImageList>;

/** The name of the host's default image in `GET /v1/images` and `POST /v1/units {image}`. */
export const BASE_IMAGE_NAME = "base";
