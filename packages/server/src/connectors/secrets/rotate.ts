import type { Store } from "../../store/store.js";
import type { SecretBox } from "./crypto.js";

/** Re-seals every connector secret under the box's current key version; returns how many changed. */
export async function resealAll(store: Store, box: SecretBox): Promise<number> {
  let changed = 0;
  for (;;) {
    const batch = await store.connectors.sealedUnder(box.currentVersion, 100);
    let progress = 0;
    for (const c of batch) {
      const fresh = box.seal(box.open(c.secret, c.id), c.id);
      // A row a server changed meanwhile is read again in the next batch.
      if (await store.connectors.reseal(c.id, c.secret, fresh, box.currentVersion)) progress++;
    }
    changed += progress;
    if (batch.length === 0 || progress === 0) return changed;
  }
}
