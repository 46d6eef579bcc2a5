import { after, before, it } from "node:test";
import { testDialects } from "../testing/dialects.js";
import { startTestServer, type TestServer } from "../testing/server.js";

let s: TestServer;
before(async () => {
  s = await startTestServer(testDialects[0] as never);
});
after(() => s?.close());
it("openapi", async () => {
  const doc = (await s.api("GET", "/v1/openapi.json")).body;
  for (const [p, ops] of Object.entries(doc.paths))
    for (const [m, op] of Object.entries(
      ops as Record<string, { summary: string; security?: unknown; tags?: string[] }>,
    ))
      process.stderr.write(`${m.toUpperCase()} ${p}  [${op.tags}] ${JSON.stringify(op.security)} ${op.summary}\n`);
});
