import assert from "node:assert/strict";
import { chmod, mkdir, mkdtemp, readdir, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { createPrivateFile, DATA_DIR_MODE, secureDataDir } from "./data-dir.js";
import { testDialects } from "./testing/dialects.js";
import { startTestServer, type TestServer } from "./testing/server.js";

const sqlite = testDialects[0];
const mode = async (p: string) => (await stat(p)).mode & 0o7777;

/** Every regular file directly in `dir`, with its mode. */
async function fileModes(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const e of await readdir(dir, { withFileTypes: true })) {
    if (e.isFile()) out[e.name] = (await mode(join(dir, e.name))).toString(8);
  }
  return out;
}

/** Issue #19 finding 10: the database, its -wal and -shm, and the keys are root's alone. */
describe("data dir modes", () => {
  const dirs: string[] = [];
  let s: TestServer | undefined;
  after(async () => {
    await s?.close();
    for (const d of dirs) await rm(d, { recursive: true, force: true });
  });

  it("a started server's data dir is 0711 and every file in it 0600; a restart corrects loose modes", async () => {
    if (!sqlite) throw new Error("no sqlite");
    const dataDir = await mkdtemp(join(tmpdir(), "ums-modes-"));
    dirs.push(dataDir);
    s = await startTestServer(sqlite, { dataDir });
    const check = async (when: string) => {
      assert.equal((await mode(dataDir)).toString(8), "711", `${when}: the data dir`);
      const files = await fileModes(dataDir);
      for (const f of ["ums.db", "ums.db-wal", "ums.db-shm", "master.key", "cookie.key"]) {
        assert.ok(files[f], `${when}: ${f} exists (${JSON.stringify(files)})`);
      }
      for (const [f, m] of Object.entries(files)) assert.equal(m, "600", `${when}: ${f}`);
    };
    await check("first start");
    // A data dir of an older version: everything readable by all.
    await s.close();
    s = undefined;
    await chmod(dataDir, 0o755);
    for (const f of Object.keys(await fileModes(dataDir))) await chmod(join(dataDir, f), 0o644);
    assert.equal((await mode(join(dataDir, "ums.db"))).toString(8), "644");
    s = await startTestServer(sqlite, { dataDir });
    await check("restart");
    // And it still works: the database is readable.
    const token = await s.token("modes");
    assert.equal((await s.api("GET", "/v1/units", { token })).status, 200);
  });

  it("secureDataDir creates a missing dir 0711 and leaves what is not a regular file alone", async () => {
    const base = await mkdtemp(join(tmpdir(), "ums-modes-"));
    dirs.push(base);
    const dataDir = join(base, "data");
    await secureDataDir(dataDir);
    assert.equal(await mode(dataDir), DATA_DIR_MODE);
    await writeFile(join(dataDir, "state.json"), "{}", { mode: 0o664 });
    await mkdir(join(dataDir, "sub"));
    await chmod(join(dataDir, "sub"), 0o755);
    await secureDataDir(dataDir);
    assert.equal(await mode(join(dataDir, "state.json")), 0o600);
    assert.equal(await mode(join(dataDir, "sub")), 0o755, "directories are their owners' business");
    createPrivateFile(join(dataDir, "new.db"));
    assert.equal(await mode(join(dataDir, "new.db")), 0o600);
  });
});
