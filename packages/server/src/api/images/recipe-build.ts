import { randomUUID } from "node:crypto";
import { ENVIRONMENT_VERSION, ErrorCode, type ImageRecipe, StreamId } from "@ums/protocol";
import type { Progress, UnitAgent, UnitNode } from "../../node/unit-node.js";
import { recipeHash, recipeProblems } from "../../runtime/image/recipe.js";
import { UID_RANGE } from "../../runtime/image/shift.js";
import type { ImageRecord, OrgRecord, UnitRecord } from "../../store/records.js";
import { ImageExistsError, type Store, UnitLimitError } from "../../store/store.js";
import { ApiError } from "../errors.js";
import { agentExecQuery } from "../exec/query.js";
import { newUrlLabel } from "../units/url-label.js";

// Issue #18: `POST /v1/images/build`: an image from a recipe. The checks and the cache come first
// (a plain 400/409 answer); the build after (progress). Its steps are the user's code: they run as
// root in a unit of the organization made from the image's draft (it counts towards the
// organization's units while the build runs, and is deleted after), isolated like any unit, with
// the unit's network policy's default (no rules).

/** Lines of a step's output kept for the error when it fails. */
const TAIL_LINES = 20;
/** Lines of a step's output sent as progress at most (the rest is counted). */
const PROGRESS_LINES = 2000;

export interface PreparedBuild {
  /** The organization's image built from this very recipe (and base image) before: nothing to build. */
  readonly cached?: ImageRecord;
  run(hooks: { progress: Progress; signal?: AbortSignal }): Promise<ImageRecord>;
}

export class RecipeBuilds {
  constructor(
    private readonly store: Store,
    private readonly node: UnitNode,
    /** The 409 of a build of that name already under way. */
    private readonly building: (name: string) => ApiError,
  ) {}

  /** Checks the recipe and the name; the build itself is `run`. */
  async prepare(org: OrgRecord, recipe: ImageRecipe): Promise<PreparedBuild> {
    const problems = recipeProblems(recipe, { range: UID_RANGE });
    if (problems.length > 0) throw ApiError.validation(problems);
    const base = await this.node.baseImage();
    const source = `recipe:${recipeHash(recipe, base.builtAt)}`;
    const existing = await this.store.images.get(org.id, recipe.name);
    if (existing?.source === source) return { cached: existing, run: async () => existing };
    // Another recipe (or an import) under this name: this build becomes the name's newer one.
    return {
      run: (hooks) => this.build(org, recipe, source, hooks),
    };
  }

  private async build(
    org: OrgRecord,
    recipe: ImageRecipe,
    source: string,
    hooks: { progress: Progress; signal?: AbortSignal },
  ): Promise<ImageRecord> {
    // The unit that runs the steps, once its create began. A build on another node can end (its
    // stream to the node broke) while the steps still run here: whatever the steps made is deleted
    // all the same, once it exists, and steps asked for after the end are refused.
    let builder: Promise<UnitRecord> | undefined;
    let over = false;
    try {
      return await this.node.buildImage(org, recipe, source, {
        ...hooks,
        ...((recipe.steps ?? []).length > 0 && {
          steps: async (draftId: string) => {
            if (over) throw new Error("the image build is over; its steps are not run");
            builder = this.builderUnit(org, draftId);
            return this.runSteps(org, await builder, draftId, recipe, hooks.progress);
          },
        }),
      });
    } catch (err) {
      if (err instanceof ImageExistsError) throw this.building(recipe.name);
      throw err;
    } finally {
      over = true;
      const unit = await builder?.catch(() => undefined);
      if (unit) {
        await this.node
          .destroy(unit)
          .catch((err: unknown) => hooks.progress(`the build unit ${unit.name} could not be deleted: ${String(err)}`));
      }
    }
  }

  /**
   * A unit of the organization for the steps (its name says what it is for), on the node of the
   * draft it is made from (issue #15).
   */
  private async builderUnit(org: OrgRecord, draftId: string): Promise<UnitRecord> {
    const name = newUrlLabel("image-build");
    const nodeId = (await this.store.images.getById(draftId))?.nodeId ?? null;
    try {
      return await this.store.units.create(
        {
          id: `unit-${randomUUID()}`,
          orgId: org.id,
          name,
          urlLabel: newUrlLabel(name),
          status: "cold",
          urlAuth: "unit",
          privateAccess: null,
          labels: [],
          version: ENVIRONMENT_VERSION,
          environmentVersion: ENVIRONMENT_VERSION,
          createdAt: new Date().toISOString(),
          nodeId,
        },
        org.maxUnits,
      );
    } catch (err) {
      if (err instanceof UnitLimitError) {
        throw new ApiError(
          403,
          ErrorCode.LimitReached,
          `a recipe's steps run in a unit of the organization, and '${org.slug}' has reached its limit of ${err.limit} units; delete one and build again`,
        );
      }
      throw err;
    }
  }

  private async runSteps(
    org: OrgRecord,
    unit: UnitRecord,
    draftId: string,
    recipe: ImageRecipe,
    progress: Progress,
  ): Promise<{ unitId: string; checkpoint: string }> {
    await this.node.fillDraft(draftId, unit);
    const steps = recipe.steps ?? [];
    progress(`running ${steps.length} step${steps.length === 1 ? "" : "s"} as root in unit ${unit.name}`);
    const lease = await this.node.wake(org, unit);
    try {
      for (const [i, step] of steps.entries()) {
        progress(`step ${i + 1}/${steps.length}: ${step.length > 120 ? `${step.slice(0, 117)}...` : step}`);
        const env = Object.entries(recipe.env ?? {}).map(([k, v]) => `${k}=${v}`);
        const r = await runStep(lease.agent, step, env, progress);
        if (r.code !== 0) {
          throw new ApiError(
            400,
            ErrorCode.ImageInvalid,
            `step ${i + 1} of the recipe failed with exit code ${r.code}${r.tail ? `; its last output:\n${r.tail}` : ""}`,
          );
        }
      }
    } finally {
      lease.release();
    }
    const { checkpoint } = await this.node.checkpoint(unit, "image build", () => {});
    return { unitId: unit.id, checkpoint: checkpoint.id };
  }
}

/** Runs `sh -c step` as root through the unit's agent; its output lines go to `progress`. */
async function runStep(
  agent: UnitAgent,
  step: string,
  env: string[],
  progress: Progress,
): Promise<{ code: number; tail: string }> {
  const query = agentExecQuery(
    { cmd: ["sh", "-c", step], env, user: "root", tty: false, stdin: false },
    { ports: "false" },
  );
  const ws = await agent.websocket(`/exec?${query}`);
  return new Promise((resolve, reject) => {
    const tail: string[] = [];
    let sent = 0;
    let partial = "";
    const line = (text: string) => {
      tail.push(text);
      if (tail.length > TAIL_LINES) tail.shift();
      if (sent < PROGRESS_LINES) progress(`  ${text}`);
      else if (sent === PROGRESS_LINES) progress("  (more output not shown)");
      sent++;
    };
    ws.on("message", (data, isBinary) => {
      if (!isBinary) return;
      const frame = data as Buffer;
      if (frame[0] === StreamId.Exit) {
        if (partial) line(partial);
        resolve({ code: frame[1] ?? 255, tail: tail.join("\n") });
        ws.close();
        return;
      }
      if (frame[0] !== StreamId.Stdout && frame[0] !== StreamId.Stderr) return;
      const lines = (partial + frame.subarray(1).toString("utf8")).split("\n");
      partial = lines.pop() ?? "";
      for (const l of lines) line(l);
    });
    ws.on("close", () => reject(new Error("the unit's agent closed the step's session before it exited")));
    ws.on("error", reject);
    ws.resume?.();
  });
}
