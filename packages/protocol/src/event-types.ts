// Dependency-free (the SDK and the CLI bundle import it without TypeBox).

/** Issue #17: the lifecycle events of an organization's units (docs/EVENTS.md). */
export const EVENT_TYPES = [
  "unit.created",
  "unit.booted",
  "unit.woken",
  "unit.warmed",
  "unit.cooled",
  "unit.checkpointed",
  "unit.restored",
  "unit.forked",
  "unit.deleted",
  "service.crashed",
  "service.restarted",
  "policy.changed",
  "limit.reached",
] as const;
export type EventType = (typeof EVENT_TYPES)[number];
