// Opens (mounting, and building the test image on first use) or closes the shared test pool.
// `open` prints build progress; `close` unmounts it and detaches its loop device.

import { existsSync, readdirSync } from "node:fs";
import { join } from "node:path";
import { testImage, testPoolDir } from "../packages/server/dist/runtime/image/test-image.js";
import { closePool } from "../packages/server/dist/runtime/storage/pool.js";

const verb = process.argv[2];
if (verb === "open") {
  const started = Date.now();
  let last = "";
  const image = await testImage({
    onProgress: (p) => {
      const line = `[${String(Math.floor(p.percent ?? 0)).padStart(3)}%] ${p.step}: ${p.message}`;
      if (line !== last) process.stderr.write(`${line}\n`);
      last = line;
    },
  });
  process.stderr.write(`test image ready at ${image.path} (${Date.now() - started} ms)\n`);
} else if (verb === "close") {
  // Another test run on this machine may still have units on the pool: leave it mounted then.
  const units = join(testPoolDir(), "pool", "units");
  const inUse = existsSync(units) && readdirSync(units).length > 0;
  if (inUse) process.stderr.write(`test pool left mounted: ${units} is in use\n`);
  else await closePool({ dataDir: testPoolDir() });
} else {
  process.stderr.write("usage: node scripts/test-pool.mjs open|close\n");
  process.exit(2);
}
