import type { ImageConfig, ImageRecipe, Image as WireImage, ImageList as WireImageList } from "@ums/protocol";
import type { UmsClient } from "./client.js";
import type { RequestOpts } from "./config.js";
import { errorFromResponse, StreamError } from "./errors.js";
import { collectEvents } from "./ndjson.js";

/** An image units are created from (issue #18): the host's `base`, or one the organization imported or built from a recipe. */
export interface ImageInfo {
  /** `img-<uuid>`, or `base`. */
  id: string;
  name: string;
  kind: "base" | "imported" | "recipe";
  /** Organization slug; null for the host's base image. */
  organization: string | null;
  /** Which build of the image this is: `<name>@<id>`. */
  version: string;
  /** The Env, default user and working dir its units' commands start with. */
  config: { env: string[]; user: ImageConfig["user"]; workingDir: string | null };
  bytes: number;
  /** `docker-save` or `oci-layout` for an imported image; null for the base image. */
  source: string | null;
  createdAt: Date;
}

export interface ImageImportOpts extends RequestOpts {
  /** Under a name the organization has: the archive becomes that image's newer build (else 409). */
  replace?: boolean | undefined;
  /** Called with each progress message (one per layer, and what was left out) as it arrives. */
  onProgress?: ((message: string) => void) | undefined;
}

function fromWire(i: WireImage): ImageInfo {
  return {
    id: i.id,
    name: i.name,
    kind: i.kind,
    organization: i.organization,
    version: i.version,
    config: { env: i.config.env, user: i.config.user, workingDir: i.config.working_dir },
    bytes: i.bytes,
    source: i.source,
    createdAt: new Date(i.created_at),
  };
}

const request = (o: RequestOpts) => ({ timeoutMs: o.timeoutMs, signal: o.signal });
const path = (name: string) => `/v1/images/${encodeURIComponent(name)}`;

type ImportEvent =
  | { type: "info"; data: string }
  | { type: "complete"; data: string; image: WireImage; cached?: boolean };

/**
 * `client.images`: the images units start from (issue #18). Create a unit on one with
 * `Unit.create(name, { image })`. An unknown name throws `NotFoundError` (`UMS_IMAGE_NOT_FOUND`), a
 * taken one or one still in use `ConflictError` (`UMS_IMAGE_EXISTS`, `UMS_IMAGE_IN_USE`), an
 * archive ums cannot import `ValidationError` (`UMS_IMAGE_INVALID`).
 */
export class Images {
  constructor(private readonly client: UmsClient) {}

  /**
   * Imports a `docker save` or OCI image layout archive (a tar: its bytes, or a stream of them) as
   * the organization's image `name`.
   */
  async import(
    name: string,
    archive: Uint8Array | ReadableStream<Uint8Array>,
    opts: ImageImportOpts = {},
  ): Promise<ImageInfo> {
    const res = await this.client.open("POST", "/v1/images", {
      ...request(opts),
      query: { name, ...(opts.replace && { replace: "true" }) },
      headers: { "content-type": "application/x-tar" },
      body: archive,
    });
    return fromWire((await this.#complete(res, opts)).image);
  }

  /** The `complete` event of an import's or a build's NDJSON answer; its `error` event as the API's error. */
  async #complete(res: Response, opts: ImageImportOpts): Promise<{ image: WireImage; cached?: boolean }> {
    try {
      const events = await collectEvents<ImportEvent>(res, (e) => {
        if (e.type === "info") opts.onProgress?.(e.data);
      });
      const done = events.at(-1);
      if (done?.type !== "complete" || !done.image) throw new StreamError("the answer did not name its image", done);
      return done;
    } catch (err) {
      // The stream's error event carries what the API would have answered: the same error classes.
      const ev = err instanceof StreamError ? err.event : undefined;
      if (ev && typeof ev.code === "string" && typeof ev.status === "number") {
        throw errorFromResponse(ev.status, "", ev, JSON.stringify(ev));
      }
      throw err;
    }
  }

  /**
   * Builds the organization's image `recipe.name` from a recipe (Debian packages, files, steps run
   * as root in a unit of the organization, env, user, workdir). The same recipe again answers the
   * image it built (cached). A failed step throws `ValidationError` (`UMS_IMAGE_INVALID`) with its output.
   */
  async build(recipe: ImageRecipe, opts: ImageImportOpts = {}): Promise<ImageInfo & { cached: boolean }> {
    const res = await this.client.open("POST", "/v1/images/build", {
      ...request(opts),
      headers: { "content-type": "application/json" },
      body: JSON.stringify(recipe),
    });
    const done = await this.#complete(res, opts);
    return { ...fromWire(done.image), cached: done.cached === true };
  }

  /** The host's base image, then the organization's by name. */
  async list(opts: RequestOpts = {}): Promise<ImageInfo[]> {
    const r = await this.client.request<WireImageList>("GET", "/v1/images", request(opts));
    return r.images.map(fromWire);
  }

  async get(name: string, opts: RequestOpts = {}): Promise<ImageInfo> {
    return fromWire(await this.client.request<WireImage>("GET", path(name), request(opts)));
  }

  /** Deletes an organization image; refused while units or templates made from it exist. */
  async delete(name: string, opts: RequestOpts = {}): Promise<void> {
    await this.client.request<void>("DELETE", path(name), request(opts));
  }
}
