// Issue #18: `kill -9` of `ums serve` at each step of an upgrade leaves the unit on one build or
// the other, whole: before its new disk is journaled as in place, a restart rolls it back (its
// older system files, its image unchanged); after, forward (the newer build's system files, and
// the unit recorded on that build). Its own files are there either way, and nothing is left aside.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { FAILPOINTS, type Failpoint } from "../../failpoints/failpoints.js";
import { testImage } from "../../runtime/image/test-image.js";
import { execHttp } from "../../testing/exec-client.js";
import { cleanupStoppedServer } from "../../testing/host-cleanup.js";
import { prepareServe, type ServeProcess } from "../../testing/serve-process.js";
import { within } from "../../util/within.js";

const CASES = FAILPOINTS.filter((fp) => fp.startsWith("upgrade."));
/** After this one the journal says the new disk is in place: the restart rolls forward. */
const FORWARD: readonly Failpoint[] = ["upgrade.swapped"];

const recipe = (version: string) => ({
  name: "crashy",
  files: [{ path: "/usr/share/crashy", content: `${version}\n` }],
});

describe("kill -9 of ums serve in the middle of an upgrade", { timeout: 300_000 }, () => {
  let server: ServeProcess;
  let poolDir: string;
  const units = CASES.map((_, i) => `up-${i}`);
  const versions: string[] = [];
  const serve = (failpoint?: Failpoint) => server.start({ UMS_FAILPOINTS: failpoint ?? "" });
  const api = (method: string, path: string, body?: unknown) => server.api(method, path, body);

  async function sh(unit: string, script: string): Promise<string> {
    const r = await execHttp(server.base, server.token, unit, ["sh", "-c", script]);
    assert.equal(r.exitCode, 0, `'${script}' in ${unit}: ${r.stderr.toString()}`);
    return r.stdout.toString().trim();
  }
  async function build(version: string): Promise<string> {
    const text = await (await api("POST", "/v1/images/build", recipe(version))).text();
    const done = JSON.parse(text.trim().split("\n").at(-1) ?? "{}") as { type: string; image?: { version: string } };
    assert.equal(done.type, "complete", text);
    return String(done.image?.version);
  }
  const imageOf = async (unit: string) =>
    ((await (await api("GET", `/v1/units/${unit}`)).json()) as { image: string }).image;

  before(async () => {
    poolDir = (await testImage()).pool.path;
    server = await prepareServe({ name: "upcrash", org: "upcrash", env: { UMS_IDLE_WARM: "10m" } });
    await serve();
    versions.push(await build("1"));
    for (const unit of units) {
      assert.equal((await api("POST", "/v1/units", { name: unit, image: "crashy" })).status, 201);
      await sh(unit, `echo ${unit} > $HOME/mine`);
    }
    versions.push(await build("2"));
  });
  after(() => server?.close(units, (dataDir) => cleanupStoppedServer(dataDir)));

  it("covers every upgrade failpoint", () => {
    assert.deepEqual(CASES, ["upgrade.checked", "upgrade.new-made", "upgrade.new-moved", "upgrade.swapped"]);
  });

  for (const [i, fp] of CASES.entries()) {
    it(`leaves the unit whole on one build after a crash at ${fp}`, async () => {
      const unit = `up-${i}`;
      const mine = await sh(unit, "cat $HOME/mine");
      assert.equal(mine, unit);
      await server.stop("SIGTERM");
      const child = await serve(fp);
      const died = new Promise<NodeJS.Signals | null>((r) => child.once("exit", (_code, signal) => r(signal)));
      const response = api("POST", `/v1/units/${unit}/upgrade`, { version: "latest" })
        .then((r) => r.text())
        .catch((err: unknown) => `failed: ${String(err)}`);
      const signal = await within(died, 30_000, "alive" as const);
      assert.equal(signal, "SIGKILL", `${fp}: the server was killed at the failpoint (response: ${await response})`);
      await response;

      await serve();
      const forward = FORWARD.includes(fp);
      assert.equal(await imageOf(unit), versions[forward ? 1 : 0], `${fp}: the unit's recorded build`);
      assert.equal(await sh(unit, "cat /usr/share/crashy"), forward ? "2" : "1", `${fp}: its system files`);
      assert.equal(await sh(unit, "cat $HOME/mine"), mine, `${fp}: its own files`);
      const unitId = ((await (await api("GET", `/v1/units/${unit}`)).json()) as { id: string }).id;
      for (const aside of ["rootfs.new", "rootfs.old", "restore.json"]) {
        assert.ok(!existsSync(join(poolDir, "units", unitId, aside)), `${fp}: no ${aside} left`);
      }
      // Rolled back, it can be upgraded now; rolled forward, it is up to date.
      const again = await api("POST", `/v1/units/${unit}/upgrade`, { version: "latest" });
      const body = (await again.json()) as { status: string };
      assert.equal(again.status, 200, JSON.stringify(body));
      assert.equal(body.status, forward ? "up_to_date" : "upgraded");
      assert.equal(await sh(unit, "cat /usr/share/crashy"), "2");
    });
  }
});
