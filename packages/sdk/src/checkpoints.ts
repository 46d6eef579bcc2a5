import type { CheckpointEvent, CheckpointInfo } from "@ums/protocol";
import { encodePath, type UmsClient } from "./client.js";
import type { RequestOpts } from "./config.js";
import { StreamError } from "./errors.js";
import { collectEvents } from "./ndjson.js";

export interface CheckpointCreateOpts extends RequestOpts {
  /** A description kept with the checkpoint. */
  comment?: string | undefined;
  /** Called with each progress event (spec 6.1) as it arrives. */
  onEvent?: ((event: CheckpointEvent) => void) | undefined;
}

export interface CheckpointRestoreOpts extends RequestOpts {
  /** Called with each progress event (spec 6.1) as it arrives. */
  onEvent?: ((event: CheckpointEvent) => void) | undefined;
}

export interface RestoreResult {
  /** The checkpoint the unit is on now. */
  restored: string;
  /** The checkpoint that saved the state from before the restore (spec 3.3), when the server named it. */
  backup: string | undefined;
  /** The final event's message. */
  message: string;
}

const request = (o: RequestOpts) => ({ timeoutMs: o.timeoutMs, signal: o.signal });

/**
 * `unit.checkpoints`: saved states of the unit's files and policies, `v0`, `v1`, … (spec 2.6, 4.2).
 * A failure reported by the progress stream throws `StreamError`; an unknown id `NotFoundError`
 * (`UMS_CHECKPOINT_NOT_FOUND`).
 */
export class Checkpoints {
  constructor(
    private readonly client: UmsClient,
    private readonly path: () => string,
  ) {}

  /** Takes a checkpoint now (a running unit is frozen for a moment) and returns it. */
  async create(opts: CheckpointCreateOpts = {}): Promise<CheckpointInfo> {
    const res = await this.client.open("POST", `${this.path()}/checkpoint`, {
      ...request(opts),
      headers: { "content-type": "application/json" },
      body: JSON.stringify(opts.comment === undefined ? {} : { comment: opts.comment }),
    });
    const events = await collectEvents<CheckpointEvent>(res, opts.onEvent);
    const done = events.at(-1);
    // ums names the new checkpoint in `id`; servers that only say "checkpoint vN created" in `data`
    // (the spec's event) are read too.
    const id = done?.type === "complete" ? (done.id ?? /\b(v\d+)\b/.exec(done.data)?.[1]) : undefined;
    if (id === undefined) throw new StreamError(`the checkpoint stream did not name the new checkpoint`, done);
    return this.get(id, opts);
  }

  /** The unit's checkpoints, oldest first. */
  list(opts: RequestOpts = {}): Promise<CheckpointInfo[]> {
    return this.client.request<CheckpointInfo[]>("GET", `${this.path()}/checkpoints`, request(opts));
  }

  get(id: string, opts: RequestOpts = {}): Promise<CheckpointInfo> {
    return this.client.request<CheckpointInfo>("GET", this.#cp(id), request(opts));
  }

  /**
   * Puts the unit back to checkpoint `id`: its files are replaced, running processes end and the
   * unit starts again with its services. The state before is saved as a new checkpoint first.
   */
  async restore(id: string, opts: CheckpointRestoreOpts = {}): Promise<RestoreResult> {
    const res = await this.client.open("POST", `${this.#cp(id)}/restore`, request(opts));
    const events = await collectEvents<CheckpointEvent>(res, opts.onEvent);
    const done = events.at(-1);
    const message = done?.type === "complete" ? done.data : "";
    const backup = done?.type === "complete" ? (done.backup_id ?? /saved as (v\d+)/.exec(message)?.[1]) : undefined;
    return { restored: id, backup, message };
  }

  /** Deletes a checkpoint. The one the unit is on cannot be deleted (`ConflictError`, `UMS_CHECKPOINT_ACTIVE`). */
  async remove(id: string, opts: RequestOpts = {}): Promise<void> {
    await this.client.request<void>("DELETE", this.#cp(id), request(opts));
  }

  #cp(id: string): string {
    return `${this.path()}${encodePath`/checkpoints/${id}`}`;
  }
}
