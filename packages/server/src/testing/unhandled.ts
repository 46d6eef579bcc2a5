import assert from "node:assert/strict";
import { after, before } from "node:test";

/** In a suite: fails it at its end if a promise rejection went unhandled while it ran. */
export function noUnhandledRejections(): void {
  const unhandled: unknown[] = [];
  const onUnhandled = (err: unknown) => unhandled.push(err);
  before(() => process.on("unhandledRejection", onUnhandled));
  after(() => {
    process.off("unhandledRejection", onUnhandled);
    assert.deepEqual(unhandled, [], "no unhandled rejection");
  });
}
