import type { Readable } from "node:stream";
import {
  BASE_IMAGE_NAME,
  ENVIRONMENT_VERSION,
  ErrorCode,
  type Image,
  type ImageConfig,
  type ImageRecipe,
  unitNameProblem,
} from "@ums/protocol";
import type { Progress, UnitNode } from "../../node/unit-node.js";
import { UNIT_USER } from "../../runtime/image/rootfs-config.js";
import type { ImageRecord, OrgRecord } from "../../store/records.js";
import { ImageExistsError, type Store } from "../../store/store.js";
import { ApiError } from "../errors.js";
import { type PreparedBuild, RecipeBuilds } from "./recipe-build.js";

/** The base image's config: the build's user `unit`, its home, no extra environment. */
const BASE_CONFIG: ImageConfig = Object.freeze({
  env: [],
  user: { name: UNIT_USER.name, uid: UNIT_USER.uid, gid: UNIT_USER.gid, home: UNIT_USER.home },
  working_dir: null,
});

/** The organization's image of that name (ready), or the 404 that names it (POST /v1/units {image} too). */
export async function requireImage(store: Store, org: OrgRecord, name: string): Promise<ImageRecord> {
  const i = unitNameProblem(name) ? undefined : await store.images.get(org.id, name);
  if (!i) throw ImageService.notFound(name);
  return i;
}

/** Issue #18: images (the host's base, the organization's imported ones), between the routes and the node. */
export class ImageService {
  private readonly recipes: RecipeBuilds;

  constructor(
    private readonly store: Store,
    private readonly node: UnitNode,
  ) {
    this.recipes = new RecipeBuilds(store, node, (name) => ImageService.building(name));
  }

  /**
   * Checks an image recipe (400) and its name (409 for `base`), then builds it when `run` is called
   * (recipe-build.ts): under a name the organization has, a newer build of it.
   */
  async prepareBuild(org: OrgRecord, recipe: ImageRecipe): Promise<PreparedBuild> {
    if (recipe.name === BASE_IMAGE_NAME) throw ImageService.exists(recipe.name);
    return this.recipes.prepare(org, recipe);
  }

  static notFound(name: string): ApiError {
    return new ApiError(404, ErrorCode.ImageNotFound, `image '${name}' not found; GET /v1/images lists them`);
  }

  private static exists(name: string, why: "taken" | "building" = "taken"): ApiError {
    return new ApiError(
      409,
      ErrorCode.ImageExists,
      name === BASE_IMAGE_NAME
        ? `'${name}' is the host's base image; choose another name`
        : why === "building"
          ? `a build of image '${name}' is under way; wait for it to end, then try again`
          : `an image named '${name}' already exists; import with replace=true (ums image import --replace) to make this archive its newer build, or choose another name`,
    );
  }

  /** A build of the name is under way (the store allows one draft per name). */
  static building(name: string): ApiError {
    return ImageService.exists(name, "building");
  }

  /** The organization's image of that name; another organization's answers 404 exactly as a missing one. */
  require(org: OrgRecord, name: string): Promise<ImageRecord> {
    return requireImage(this.store, org, name);
  }

  /** Refuses a name that is taken (unless replaced) before the archive is read; the store's key decides a race of two builds. */
  async assertFree(org: OrgRecord, name: string, replace = false): Promise<void> {
    if (name === BASE_IMAGE_NAME || (!replace && (await this.store.images.get(org.id, name)))) {
      throw ImageService.exists(name);
    }
  }

  /** An import; with `replace`, under a taken name it is that image's newer build. */
  async import(
    org: OrgRecord,
    name: string,
    body: Readable,
    hooks: { progress: Progress; signal?: AbortSignal; replace?: boolean },
  ): Promise<ImageRecord> {
    await this.assertFree(org, name, hooks.replace);
    try {
      return await this.node.importImage(org, name, body, hooks);
    } catch (err) {
      if (err instanceof ImageExistsError) throw ImageService.building(name);
      throw err;
    }
  }

  async list(org: OrgRecord): Promise<Image[]> {
    return [await this.base(), ...(await this.store.images.list(org.id)).map((i) => ImageService.present(org, i))];
  }

  async get(org: OrgRecord, name: string): Promise<Image> {
    if (name === BASE_IMAGE_NAME) return this.base();
    return ImageService.present(org, await this.require(org, name));
  }

  async delete(org: OrgRecord, name: string): Promise<void> {
    if (name === BASE_IMAGE_NAME) {
      throw ApiError.validation([`name: '${name}' is the host's base image; it cannot be deleted`]);
    }
    await this.node.deleteImage(await this.require(org, name));
  }

  private async base(): Promise<Image> {
    const b = await this.node.baseImage();
    return {
      id: BASE_IMAGE_NAME,
      name: BASE_IMAGE_NAME,
      kind: "base",
      organization: null,
      version: `${BASE_IMAGE_NAME}@${ENVIRONMENT_VERSION}`,
      config: BASE_CONFIG,
      bytes: b.bytes,
      source: null,
      created_at: b.builtAt,
    };
  }

  static present(org: OrgRecord, i: ImageRecord): Image {
    return {
      id: i.id,
      name: i.name,
      kind: i.source.startsWith("recipe:") ? "recipe" : "imported",
      organization: org.slug,
      version: i.environmentVersion,
      config: JSON.parse(i.config) as ImageConfig,
      bytes: i.bytes,
      source: i.source,
      created_at: i.createdAt,
    };
  }
}
