import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { WorkQueue } from "./work-queue.js";

const tick = (ms = 5) => new Promise((r) => setTimeout(r, ms));

describe("WorkQueue", () => {
  it("runs at most `limit` tasks at once, in order", async () => {
    const q = new WorkQueue(2);
    let active = 0;
    let most = 0;
    const order: number[] = [];
    await Promise.all(
      Array.from({ length: 8 }, (_, i) =>
        q.run(async () => {
          active++;
          most = Math.max(most, active);
          await tick();
          order.push(i);
          active--;
          return i;
        }),
      ),
    );
    assert.equal(most, 2);
    assert.deepEqual(order, [0, 1, 2, 3, 4, 5, 6, 7]);
    await q.idle();
  });

  it("skips queued tasks after close and lets running ones finish", async () => {
    const q = new WorkQueue(1);
    const ran: number[] = [];
    const results = Array.from({ length: 5 }, (_, i) =>
      q.run(async () => {
        await tick(20);
        ran.push(i);
        return i;
      }),
    );
    await tick(5);
    await q.close();
    assert.deepEqual(await Promise.all(results), [0, undefined, undefined, undefined, undefined]);
    assert.deepEqual(ran, [0]);
    assert.equal(await q.run(async () => 1), undefined, "a closed queue runs nothing");
  });

  it("reports idle when nothing was ever queued, and after the last task", async () => {
    const q = new WorkQueue(3);
    await q.idle();
    const p = q.run(() => tick(10));
    const idle = q.idle();
    await p;
    await idle;
  });
});
