// Issue #18: `kill -9` of `ums serve` at each step of publishing or deleting a template leaves
// nothing half-made: after a restart the template is either whole (listed, its subvolume there) or
// gone entirely (no row, no subvolume, its name free again).
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { FAILPOINTS, type Failpoint } from "../../failpoints/failpoints.js";
import { testImage } from "../../runtime/image/test-image.js";
import { openStore } from "../../store/open.js";
import type { TemplateRecord } from "../../store/records.js";
import { execHttp } from "../../testing/exec-client.js";
import { cleanupStoppedServer } from "../../testing/host-cleanup.js";
import { prepareServe, type ServeProcess } from "../../testing/serve-process.js";
import { within } from "../../util/within.js";

const CASES = FAILPOINTS.filter((fp) => fp.startsWith("template."));
const isDelete = (fp: Failpoint) => fp === "template.hidden" || fp === "template.files-deleted";

describe("kill -9 of ums serve in the middle of publishing and deleting a template", { timeout: 300_000 }, () => {
  let server: ServeProcess;
  let templatesDir: string;
  const units = ["tc-src"];
  const serve = (failpoint?: Failpoint) => server.start({ UMS_FAILPOINTS: failpoint ?? "" });
  const api = (method: string, path: string, body?: unknown) => server.api(method, path, body);
  const publish = (name: string) => api("POST", "/v1/templates", { name, from: { unit: "tc-src", checkpoint: "v0" } });

  /** The server's template rows, read from its database while it is stopped. */
  async function rows(): Promise<TemplateRecord[]> {
    const store = await openStore({ dataDir: server.dataDir });
    try {
      return await store.templates.all();
    } finally {
      await store.close();
    }
  }

  before(async () => {
    templatesDir = join((await testImage()).pool.path, "templates");
    server = await prepareServe({ name: "tplcrash", org: "tplcrash", env: { UMS_IDLE_WARM: "10m" } });
    await serve();
    assert.equal((await api("POST", "/v1/units", { name: "tc-src" })).status, 201);
    const cp = await (await api("POST", "/v1/units/tc-src/checkpoint", { comment: "template" })).text();
    assert.match(cp, /"type":"complete"/);
  });
  after(() => server?.close(units, (dataDir) => cleanupStoppedServer(dataDir)));

  it("covers every template failpoint", () => {
    assert.deepEqual(CASES, ["template.recorded", "template.snapshotted", "template.hidden", "template.files-deleted"]);
  });

  for (const [i, fp] of CASES.entries()) {
    it(`leaves nothing half-made after a crash at ${fp}`, async () => {
      const name = `t-${i}`;
      let id: string | undefined;
      if (isDelete(fp)) {
        const r = await publish(name);
        const text = await r.text();
        assert.equal(r.status, 201, text);
        id = (JSON.parse(text) as { id: string }).id;
      }
      await server.stop("SIGTERM");
      const child = await serve(fp);
      const died = new Promise<NodeJS.Signals | null>((r) => child.once("exit", (_code, signal) => r(signal)));
      const request = isDelete(fp) ? api("DELETE", `/v1/templates/${name}`) : publish(name);
      const response = request.then((r) => r.text()).catch((err: unknown) => `failed: ${String(err)}`);
      const signal = await within(died, 20_000, "alive" as const);
      assert.equal(signal, "SIGKILL", `${fp}: the server was killed at the failpoint (response: ${await response})`);
      await response;

      // What the crash left: a row that is not ready, with or without its files.
      const left = (await rows()).find((t) => t.name === name);
      assert.ok(left, `${fp}: the row is there`);
      assert.equal(left.ready, false, `${fp}: the row is not ready`);
      id ??= left.id;
      const filesLeft = fp === "template.snapshotted" || fp === "template.hidden";
      assert.equal(
        existsSync(join(templatesDir, id)),
        filesLeft,
        `${fp}: the files are ${filesLeft ? "" : "not "}there`,
      );

      // The restart's sweep removes it whole.
      await serve();
      assert.equal((await api("GET", `/v1/templates/${name}`)).status, 404, `${fp}: not shown`);
      const list = (await (await api("GET", "/v1/templates")).json()) as { templates: { name: string }[] };
      assert.ok(!list.templates.some((t) => t.name === name), `${fp}: not listed`);
      assert.ok(!existsSync(join(templatesDir, id)), `${fp}: no subvolume left`);
      const use = await api("POST", "/v1/units", { name: `u-${i}`, template: name });
      assert.equal(use.status, 404, `${fp}: no unit can be made from it`);

      // Its name is free again, and a template published now works.
      const again = await publish(name);
      assert.equal(again.status, 201, await again.text());
      const made = await api("POST", "/v1/units", { name: `u-${i}`, template: name });
      assert.equal(made.status, 201, await made.text());
      units.push(`u-${i}`);
      assert.equal((await api("DELETE", `/v1/templates/${name}`)).status, 204);
    });
  }

  it("a unit made from a template boots after crashes and sweeps", async () => {
    const r = await execHttp(server.base, server.token, "u-0", ["sh", "-c", "test -d /home/unit && echo ok"]);
    assert.equal(r.stdout.toString().trim(), "ok", r.stderr.toString());
    assert.equal((await rows().catch(() => [])).filter((t) => !t.ready).length, 0);
  });
});
