/** The organization already runs its `running_limit` of busy units (spec 3.2). */
export class RunningLimitError extends Error {}

/** Spec 4.2: the checkpoint a unit is on cannot be deleted. */
export class ActiveCheckpointError extends Error {
  constructor(unitName: string, checkpointId: string) {
    super(
      `the active checkpoint cannot be deleted: unit '${unitName}' is on ${checkpointId}; restore another checkpoint or take a new one first`,
    );
  }
}

/**
 * The unit was deleted while this request held its (now stale) record: nothing of it may be made
 * again on the host (a boot would take a fresh disk and leave it with no row). The API answers 404.
 */
export class UnitDeletedError extends Error {
  constructor(readonly unitName: string) {
    super(`unit '${unitName}' was deleted; create it again to use that name`);
  }
}

/** Issue #18: the template was deleted while a unit was being made from it. The API answers 404. */
export class TemplateGoneError extends Error {
  constructor(readonly templateName: string) {
    super(`template '${templateName}' was deleted; choose another template`);
  }
}
