import type { Store } from "../store/store.js";
import type { EmitEvent } from "./event-log.js";

/** What the usage sampler reports when a unit reaches its memory or disk limit. */
export interface LimitReachedInput {
  readonly unitId: string;
  readonly kind: "memory" | "disk";
  /** The limit and what was used, in bytes (as the sampler read them). */
  readonly limitBytes?: number;
  readonly usedBytes?: number;
}

export type LimitReached = (e: LimitReachedInput) => Promise<void>;

/** How often one unit's limit of one kind may be reported (a unit that stays at its limit is reported once a minute). */
const REPEAT_MS = 60_000;

/**
 * Issue #17: a `limit.reached` event (kind `memory` or `disk`, actor `system`) for the sampler of
 * per-unit usage to call; repeated at most once a minute per unit and kind. A unit that is gone
 * is not reported.
 */
export function limitReachedRecorder(store: Store, emit: EmitEvent, now = () => Date.now()): LimitReached {
  const last = new Map<string, number>();
  return async (e) => {
    const key = `${e.unitId}\0${e.kind}`;
    const t = now();
    if (t - (last.get(key) ?? Number.NEGATIVE_INFINITY) < REPEAT_MS) return;
    last.set(key, t);
    if (last.size > 10_000) last.clear();
    const unit = await store.units.getById(e.unitId);
    if (!unit) return;
    emit({
      orgId: unit.orgId,
      type: "limit.reached",
      unit: unit.name,
      actor: "system",
      data: {
        kind: e.kind,
        ...(e.limitBytes !== undefined && { limit_bytes: e.limitBytes }),
        ...(e.usedBytes !== undefined && { used_bytes: e.usedBytes }),
      },
    });
  };
}
