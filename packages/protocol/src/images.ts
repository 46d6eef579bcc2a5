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
  {
    name: ImageName,
    replace: Type.Optional(
      Type.Boolean({
        description:
          "When the organization has an image of that name: the archive becomes its newer build (units made from the older one keep it until they are upgraded). Without it, a taken name is 409",
      }),
    ),
  },
  { additionalProperties: false, description: "The body is a `docker save` or OCI image layout archive (tar)" },
);
export type ImportImageQuery = Static<typeof ImportImageQuery>;

/** A file an image recipe adds (issue #18), written before its steps run. */
export const RecipeFile = Type.Object(
  {
    path: Type.String({ minLength: 2, maxLength: 4096, pattern: "^/", description: "Absolute path in the image" }),
    content: Type.Optional(Type.String({ description: "The file's text (UTF-8)" })),
    content_base64: Type.Optional(Type.String({ description: "Or its bytes, base64" })),
    mode: Type.Optional(Type.String({ pattern: "^0?[0-7]{3,4}$", description: "Octal, default 0644" })),
    owner: Type.Optional(
      Type.String({ pattern: "^[0-9]+(:[0-9]+)?$", description: "`uid` or `uid:gid` in the image, default 0:0" }),
    ),
  },
  { additionalProperties: false },
);
export type RecipeFile = Static<typeof RecipeFile>;

/**
 * Issue #18 `POST /v1/images/build`: an image described by a small file: a Debian release, packages
 * on top of the base image's, files, shell steps run as root in the image (in a unit of the
 * organization, isolated like any), and what its units' commands start with.
 */
export const ImageRecipe = Type.Object(
  {
    name: ImageName,
    base: Type.Optional(
      Type.String({ description: "The Debian release it is built from: `bookworm` (the default, the only one)" }),
    ),
    packages: Type.Optional(
      Type.Array(Type.String({ pattern: "^[a-z0-9][a-z0-9+.-]{0,99}$" }), {
        maxItems: 500,
        description: "Debian packages installed on top of the base image's",
      }),
    ),
    files: Type.Optional(Type.Array(RecipeFile, { maxItems: 200 })),
    steps: Type.Optional(
      Type.Array(Type.String({ minLength: 1, maxLength: 65536 }), {
        maxItems: 100,
        description:
          "Shell commands (`sh -c`) run as root in the image, in order; the first that fails stops the build",
      }),
    ),
    env: Type.Optional(
      Type.Record(Type.String({ pattern: "^[A-Za-z_][A-Za-z0-9_]*$" }), Type.String(), {
        description: "Environment every command and service of its units starts with",
      }),
    ),
    user: Type.Optional(
      Type.String({ maxLength: 64, description: "Default user of its units (name or uid); default `unit`" }),
    ),
    workdir: Type.Optional(
      Type.String({ pattern: "^/", maxLength: 4096, description: "Where commands start; default the user's home" }),
    ),
  },
  { additionalProperties: false },
);
export type ImageRecipe = Static<typeof ImageRecipe>;

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
    kind: Type.Union([Type.Literal("base"), Type.Literal("imported"), Type.Literal("recipe")]),
    organization: Type.Union([Type.String(), Type.Null()], { description: "Organization slug; null: the host's" }),
    version: Type.String({
      description:
        "Which build of the image this is (`<name>@<id>`; `base@<environment version>` for the base image); units keep the spec's environment_version",
    }),
    config: ImageConfig,
    bytes: Type.Integer({ description: "Apparent size of its files" }),
    source: Type.Union([Type.String(), Type.Null()], {
      description:
        "How it was made: `docker-save` or `oci-layout` (imported), `recipe:<sha256 of the recipe>` (built), null for the base image",
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
