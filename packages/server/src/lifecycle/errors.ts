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

/** Issue #18: the image was deleted while a unit was being made from it. The API answers 404. */
export class ImageGoneError extends Error {
  constructor(readonly imageName: string) {
    super(`image '${imageName}' was deleted; choose another image`);
  }
}

/** Issue #18: units (or templates) made from the image still use it. The API answers 409. */
export class ImageInUseError extends Error {
  constructor(
    readonly imageName: string,
    readonly users: number,
  ) {
    super(
      `image '${imageName}' is used by ${users} unit${users === 1 ? "" : "s"} or template${users === 1 ? "" : "s"} made from it; delete them first`,
    );
  }
}

/**
 * Issue #18: an upgrade would lose what the unit changed in its system files, or cannot replace
 * them (runtime/runc/upgrade.ts). The API answers 409 with the reasons.
 */
export class UpgradeRefusedError extends Error {
  constructor(
    readonly unitName: string,
    readonly reasons: readonly string[],
  ) {
    super(`unit '${unitName}' cannot be upgraded: ${reasons.join("; ")}`);
  }
}

/** Issue #15: the unit is in use, so it cannot move now. The API answers 409. */
export class UnitBusyError extends Error {}

/** Issue #15: the unit is moving to another node; a wake waits for that. The API answers 503. */
export class UnitMovingError extends Error {}
