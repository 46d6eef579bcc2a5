"use strict";
// The agent's entry point (copied to dist/agent.cjs by build.mjs): runs the bundle dist/agent-bundle.cjs
// with V8's code cache dist/agent-bundle.cache when that cache was made from this very bundle.
//
// A unit boots a fresh node for its agent, which would compile the bundle and every function it runs
// on the way to its first answer, at each boot. The cache holds that code already compiled (build.mjs
// makes it on the host by running the agent once and using it; V8 keeps the functions compiled then).
// V8 checks the cache's version and flags but, of the source, only its length: the cache starts with
// the size and modification time (in ns) of the bundle it was made from, and is not used with a bundle
// of another size or time (build.mjs renames each new bundle in: a new file, a new time). Not a digest
// of the bundle: node's crypto would be loaded for it at every boot (~5 ms here). A cache that is
// missing, stale or rejected by V8 only costs the compile; the agent behaves the same.
//
// Plain CommonJS, not ESM: node 20 loads an ES module through its asynchronous loader, ~15-20 ms more
// at start-up here, and vm.Script (the API that takes a code cache) runs scripts, not modules.
const { readFileSync, renameSync, statSync, writeFileSync } = require("node:fs");
const { createRequire } = require("node:module");
const { join } = require("node:path");
const { pathToFileURL } = require("node:url");
const { Script } = require("node:vm");

const bundle = join(__dirname, "agent-bundle.cjs");
const cacheFile = join(__dirname, "agent-bundle.cache");
const source = readFileSync(bundle);
const made = statSync(bundle, { bigint: true });
const stamp = Buffer.alloc(16);
stamp.writeBigUInt64LE(made.size, 0);
stamp.writeBigUInt64LE(made.mtimeNs, 8);

let cachedData;
let unused;
try {
  const cache = readFileSync(cacheFile);
  if (cache.length > stamp.length && stamp.equals(cache.subarray(0, stamp.length)))
    cachedData = cache.subarray(stamp.length);
  else unused = "it was made from another bundle";
} catch (err) {
  unused = err.code === "ENOENT" ? "there is none" : err.message;
}

const wrapped = `(function (exports, require, module, __filename, __dirname, __umsAgentUrl) {${source.toString("utf8")}\n})`;
const script = new Script(wrapped, { filename: bundle, cachedData });
if (script.cachedDataRejected) unused = "V8 rejected it (another node version or other flags)";
// `node agent.cjs --code-cache-status`: whether this node uses the cache, as JSON, and nothing else.
if (process.argv[2] === "--code-cache-status") {
  process.stdout.write(`${JSON.stringify({ used: !unused, ...(unused && { reason: unused }), file: cacheFile })}\n`);
} else {
  runAgent();
}

function runAgent() {
  if (unused) {
    const line = { time: new Date().toISOString(), msg: "code cache not used", reason: unused, file: cacheFile };
    process.stderr.write(`${JSON.stringify(line)}\n`);
  }
  // Only build.mjs's warm-up run sets this (a unit's agent gets its environment from the host's OCI
  // spec): the cache is written when the agent exits, with every function it compiled meanwhile.
  const out = process.env.UMS_AGENT_WRITE_CODE_CACHE;
  if (out) {
    process.on("exit", () => {
      writeFileSync(`${out}.tmp`, Buffer.concat([stamp, script.createCachedData()]));
      renameSync(`${out}.tmp`, out);
    });
  }
  const mod = { exports: {} };
  script.runInThisContext()(mod.exports, createRequire(bundle), mod, bundle, __dirname, pathToFileURL(bundle).href);
}
