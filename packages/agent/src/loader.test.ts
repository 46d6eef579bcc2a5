import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { appendFileSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { ensureBundle, pkgDir, type RunningAgent, run, startAgent } from "./testing/harness.js";

// The agent's loader (loader.cjs, built to dist/agent.cjs) and the code cache build.mjs makes: the
// cache is used only with the bundle it was made from, and the agent works the same without it.
const dist = join(pkgDir, "dist");
const NOT_USED = "code cache not used";

async function runs(agent: RunningAgent): Promise<void> {
  const r = await run(agent, { cmd: ["sh", "-c", "echo ran"] });
  assert.equal(r.exitCode, 0, agent.stderr());
  assert.equal(r.stdout.toString(), "ran\n");
}

/** What `node [flags] <entry> --code-cache-status` prints (it starts no agent). */
function status(entry: string, flags: string[] = []): { used: boolean; reason?: string; file: string } {
  return JSON.parse(execFileSync(process.execPath, [...flags, entry, "--code-cache-status"], { encoding: "utf8" }));
}

/** Makes the bundle in `dir` another one than the cache there was made from. */
const anotherBundle = (dir: string) => appendFileSync(join(dir, "agent-bundle.cjs"), "\n// another bundle\n");

/** The stamp a cache starts with: its bundle's size and modification time in ns (loader.cjs). */
function stampOf(bundle: string): Buffer {
  const st = statSync(bundle, { bigint: true });
  const stamp = Buffer.alloc(16);
  stamp.writeBigUInt64LE(st.size, 0);
  stamp.writeBigUInt64LE(st.mtimeNs, 8);
  return stamp;
}

/**
 * A copy of the agent's entry, bundle and cache in a temp dir (timestamps kept, as `cp -p` and
 * image layers keep them), `change` applied to it.
 */
function copy(change: (dir: string) => void): { entry: string; dir: string } {
  const dir = mkdtempSync(join(tmpdir(), "ums-agent-loader-"));
  execFileSync("cp", ["-p", ...["agent.cjs", "agent-bundle.cjs", "agent-bundle.cache"].map((f) => join(dist, f)), dir]);
  change(dir);
  return { entry: join(dir, "agent.cjs"), dir };
}

describe("agent loader and code cache", () => {
  const dirs: string[] = [];
  before(ensureBundle);
  after(() => {
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  it("the build's cache is of its bundle, and the agent uses it", async () => {
    const cache = readFileSync(join(dist, "agent-bundle.cache"));
    assert.ok(cache.length > 32 * 1024, `a cache of ${cache.length} bytes holds little compiled code`);
    assert.deepEqual(cache.subarray(0, 16), stampOf(join(dist, "agent-bundle.cjs")));
    const agent = await startAgent();
    try {
      await runs(agent);
      assert.ok(!agent.stderr().includes(NOT_USED), agent.stderr());
    } finally {
      await agent.stop();
    }
    assert.deepEqual(status(join(dist, "agent.cjs")), { used: true, file: join(dist, "agent-bundle.cache") });
  });

  it("--code-cache-status says whether a node uses the cache, and why not", () => {
    const rejected = status(join(dist, "agent.cjs"), ["--no-opt"]); // other V8 flags than the build's
    assert.equal(rejected.used, false);
    assert.match(String(rejected.reason), /V8 rejected it/);
    const same = copy(() => {});
    dirs.push(same.dir);
    assert.deepEqual(status(same.entry), { used: true, file: join(same.dir, "agent-bundle.cache") });
    const { entry, dir } = copy(anotherBundle);
    dirs.push(dir);
    assert.equal(status(entry).reason, "it was made from another bundle");
  });

  it("the agent answers without loading ws or node's crypto, and its first websocket loads them", async () => {
    // Node's built-in modules loaded by the time the agent says it is ready: ws (and with it node's
    // crypto) is loaded at the first websocket only (build.mjs, lazyWs), and the loader's check of
    // the cache needs no digest. Every unit's boot waits for this start.
    const dir = mkdtempSync(join(tmpdir(), "ums-agent-loads-"));
    dirs.push(dir);
    const probe = join(dir, "probe.cjs");
    writeFileSync(
      probe,
      `const write = process.stdout.write.bind(process.stdout);
process.stdout.write = (chunk, ...rest) => {
  if (String(chunk).includes('"ready":true')) process.stderr.write("loaded at ready: " + JSON.stringify(process.moduleLoadList) + "\\n");
  return write(chunk, ...rest);
};`,
    );
    const agent = await startAgent({ NODE_OPTIONS: `--require ${probe}` });
    try {
      const line = agent
        .stderr()
        .split("\n")
        .find((l) => l.startsWith("loaded at ready: "));
      assert.ok(line, agent.stderr());
      const loaded: string[] = JSON.parse(line.slice("loaded at ready: ".length));
      assert.ok(loaded.includes("NativeModule http"), "the list names node's modules");
      assert.deepEqual(
        loaded.filter((m) => /^NativeModule (crypto|zlib|tls|https)$/.test(m)),
        [],
        "loaded before the agent was ready",
      );
      await runs(agent); // an exec websocket: ws is loaded now, and works
    } finally {
      await agent.stop();
    }
  });

  for (const [what, change, reason] of [
    ["made from another bundle", anotherBundle, "it was made from another bundle"],
    ["missing", (dir: string) => rmSync(join(dir, "agent-bundle.cache")), "there is none"],
  ] as const) {
    it(`a cache ${what} is not used, and the agent works without it`, async () => {
      const { entry, dir } = copy(change);
      dirs.push(dir);
      const agent = await startAgent({}, [], entry);
      try {
        await runs(agent);
        const line = agent
          .stderr()
          .split("\n")
          .find((l) => l.includes(NOT_USED));
        assert.ok(line, agent.stderr());
        assert.equal(JSON.parse(line).reason, reason);
      } finally {
        await agent.stop();
      }
    });
  }
});
