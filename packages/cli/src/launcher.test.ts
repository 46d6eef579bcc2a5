// bin/ums, the launcher (issue #13's start-up): user commands start from the V8 snapshot only when
// it can be trusted (made by this node, newer than the compiled code), and otherwise from the bundle;
// UMS_CLI_SNAPSHOT=off and =require. Run in a copy of the launcher and the built CLI in a temp dir,
// so that making the snapshot stale here disturbs no other test.
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, utimesSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { NOT_USER } from "./program.js";

const ROOT = resolve(fileURLToPath(import.meta.url), "../../../..");

function run(root: string, args: string[], env: NodeJS.ProcessEnv = {}) {
  const clean = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("UMS_")));
  return new Promise<{ code: number; stdout: string; stderr: string }>((done) => {
    execFile(
      join(root, "bin", "ums"),
      args,
      { env: { ...clean, HOME: root, ...env }, timeout: 60_000 },
      (err, stdout, stderr) => done({ code: err ? Number(err.code ?? 1) : 0, stdout, stderr }),
    );
  });
}

describe("bin/ums", () => {
  const root = mkdtempSync(join(tmpdir(), "ums-launcher-"));
  after(() => rmSync(root, { recursive: true, force: true }));
  const past = new Date(Date.now() - 3600_000);
  // The launcher, the bundle with its snapshot (mtimes kept), a compiled entry that only says it
  // ran, and one compiled file per package of the snapshot, older than the blob.
  mkdirSync(join(root, "bin"));
  cpSync(join(ROOT, "bin", "ums"), join(root, "bin", "ums"), { preserveTimestamps: true });
  cpSync(join(ROOT, "packages/cli/dist/bundle"), join(root, "packages/cli/dist/bundle"), {
    recursive: true,
    preserveTimestamps: true,
  });
  writeFileSync(join(root, "packages/cli/dist/main.js"), 'console.log("compiled code");\n');
  for (const pkg of ["cli", "sdk", "protocol"]) {
    mkdirSync(join(root, "packages", pkg, "dist"), { recursive: true });
    writeFileSync(join(root, "packages", pkg, "dist", "x.js"), "");
    utimesSync(join(root, "packages", pkg, "dist", "x.js"), past, past);
  }
  utimesSync(join(root, "packages/cli/dist/main.js"), past, past);

  it("lists exactly the commands that program.ts says are not user commands", () => {
    const launcher = readFileSync(join(ROOT, "bin", "ums"), "utf8");
    const list = /^"" \| (.*)\) ;;$/m.exec(launcher)?.[1]?.split(" | ");
    assert.deepEqual(list?.sort(), [...NOT_USER].sort());
  });

  it("runs a user command from the snapshot, and UMS_CLI_SNAPSHOT=off from the bundle", async () => {
    const snap = await run(root, ["whoami"], { UMS_CLI_SNAPSHOT: "require" });
    assert.equal(snap.code, 2, snap.stderr);
    assert.match(snap.stderr, /not logged in/);
    // The bundle's entry finds its inputs gone from this copy and runs the compiled code.
    const off = await run(root, ["whoami"], { UMS_CLI_SNAPSHOT: "off" });
    assert.equal(off.stdout.trim(), "compiled code");
  });

  it("does not use a snapshot older than the compiled code, nor one another node made", async () => {
    writeFileSync(join(root, "packages/sdk/dist/x.js"), "// changed\n");
    const stale = await run(root, ["whoami"], { UMS_CLI_SNAPSHOT: "require" });
    assert.equal(stale.code, 3);
    assert.match(stale.stderr, /compiled code is newer/);
    assert.equal((await run(root, ["whoami"])).stdout.trim(), "compiled code");
    utimesSync(join(root, "packages/sdk/dist/x.js"), past, past);
    assert.equal((await run(root, ["whoami"], { UMS_CLI_SNAPSHOT: "require" })).code, 2);

    writeFileSync(join(root, "packages/cli/dist/bundle/ums.blob.node"), "1 2 /usr/local/bin/another-node\n");
    const other = await run(root, ["whoami"], { UMS_CLI_SNAPSHOT: "require" });
    assert.equal(other.code, 3);
    assert.match(other.stderr, /another node made it/);
    assert.equal((await run(root, ["whoami"])).stdout.trim(), "compiled code");
  });

  it("runs host-admin commands and mcp without the snapshot, even when required", async () => {
    // (The snapshot is unusable in this copy now: they would fail with exit 3 if they used it.)
    for (const cmd of ["doctor", "mcp"]) {
      const r = await run(root, [cmd, "--help"], { UMS_CLI_SNAPSHOT: "require" });
      assert.notEqual(r.code, 3, `${cmd}: ${r.stderr}`);
    }
  });
});
