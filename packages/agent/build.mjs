// Bundles the agent into one file, dist/agent-bundle.cjs, for the host to bind-mount into every unit,
// beside its entry point dist/agent.cjs (loader.cjs) and V8's code cache of the bundle,
// dist/agent-bundle.cache, made here by running the agent once (makeCodeCache).
// node-pty stays external (native addon, mounted beside the bundle at node_modules/node-pty).
// Also builds dist/libums-statfs.so (src/native/statfs-quota.c: `df` in a unit shows its disk) and
// the ld.so.preload naming it, which the host binds over the unit's /etc/ld.so.preload, and
// dist/ums-spawn (src/native/spawner.c: exec sessions' processes start through it), and
// dist/ums-fd-send.node (src/native/fd-send.c: a large read's file goes to the host as its descriptor).
// Usage: node packages/agent/build.mjs   (exported build() is used by the tests)
import { execFileSync, spawn } from "node:child_process";
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { request } from "node:http";
import { createRequire } from "node:module";
import { tmpdir, userInfo } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import * as esbuild from "esbuild";
import WebSocket from "ws";

const here = dirname(fileURLToPath(import.meta.url));
/** What node runs: the loader (loader.cjs), which runs the bundle with its code cache. */
export const outfile = join(here, "dist", "agent.cjs");
const bundleFile = join(here, "dist", "agent-bundle.cjs");
const cacheFile = join(here, "dist", "agent-bundle.cache");
export const statfsLib = join(here, "dist", "libums-statfs.so");
export const spawnerFile = join(here, "dist", "ums-spawn");
export const fdSendFile = join(here, "dist", "ums-fd-send.node");
/** Where the unit finds the library: the agent's dist directory is bound at /.unit/agent. */
const statfsLibInUnit = "/.unit/agent/libums-statfs.so";

/** Compiles C with the host's compiler (the one npm's native builds use) into `out`; false on failure. */
function compile(args, src, out, without) {
  const tmp = `${out}.${process.pid}.tmp`;
  try {
    execFileSync(process.env.CC || "cc", [...args, "-Wall", "-Werror", "-o", tmp, src], {
      stdio: ["ignore", "inherit", "inherit"],
    });
  } catch (err) {
    rmSync(tmp, { force: true });
    rmSync(out, { force: true });
    console.warn(`warning: ${src} not built (${err.message}); ${without}`);
    return false;
  }
  // Renamed in, never rewritten in place: running units have it bound.
  renameSync(tmp, out);
  return true;
}

/** The statfs library. Without a compiler there is none, and units show the pool's size in `df`. */
export function buildStatfsLib() {
  const src = join(here, "src", "native", "statfs-quota.c");
  if (!compile(["-O2", "-fPIC", "-shared"], src, statfsLib, "df in units will show the pool's size")) {
    rmSync(join(here, "dist", "ld.so.preload"), { force: true });
    return undefined;
  }
  // Renamed in, never rewritten in place: running units have this file bound at /etc/ld.so.preload.
  const preload = join(here, "dist", "ld.so.preload");
  writeFileSync(`${preload}.${process.pid}.tmp`, `${statfsLibInUnit}\n`);
  renameSync(`${preload}.${process.pid}.tmp`, preload);
  return statfsLib;
}

/**
 * ums-spawn (src/native/spawner.c), static: it runs in units of any image. Without it the agent
 * starts exec sessions' processes with node's spawn (~4 ms more of its thread each).
 */
export function buildSpawner() {
  const src = join(here, "src", "native", "spawner.c");
  return compile(["-O2", "-static"], src, spawnerFile, "exec starts processes with node's spawn")
    ? spawnerFile
    : undefined;
}

/** Where node's own headers are (node_api.h), for its addons: beside its binary, as Debian and node's builds put them. */
export const nodeHeaders = join(dirname(process.execPath), "..", "include", "node");

/**
 * ums-fd-send.node (src/native/fd-send.c), a node addon (N-API: any node of this major). Without it
 * (no compiler, or no node headers) large reads go as bytes through the agent, as small ones do.
 */
export function buildFdSend() {
  const src = join(here, "src", "native", "fd-send.c");
  const args = ["-O2", "-fPIC", "-shared", `-I${nodeHeaders}`, "-DNODE_GYP_MODULE_NAME=ums_fd_send"];
  return compile(args, src, fdSendFile, "large reads go through the agent as bytes") ? fdSendFile : undefined;
}

/**
 * Node built-ins that ws requires when it is loaded but the agent never uses (it serves websockets
 * only, without permessage-deflate: no https or tls client, no zlib). Each is compiled at start-up
 * (node's snapshot lacks them: ~10 ms of every unit's boot), so the bundle gets a stand-in that
 * loads the real module at its first use instead: the same behaviour, paid only if ever needed.
 */
const LAZY_BUILTINS = ["https", "tls", "zlib"];

const lazyBuiltins = {
  name: "lazy-builtins",
  setup(b) {
    const filter = new RegExp(`^(node:)?(${LAZY_BUILTINS.join("|")})$`);
    b.onResolve({ filter }, (args) =>
      args.kind === "require-call" ? { path: args.path.replace(/^node:/, ""), namespace: "lazy-builtin" } : undefined,
    );
    b.onLoad({ filter: /.*/, namespace: "lazy-builtin" }, (args) => ({
      loader: "js",
      contents: `let real;
const load = () => (real ??= require("node:${args.path}"));
module.exports = new Proxy({}, {
  get: (_, key) => load()[key],
  has: (_, key) => key in load(),
  ownKeys: () => Reflect.ownKeys(load()),
  getOwnPropertyDescriptor: (_, key) => {
    const d = Reflect.getOwnPropertyDescriptor(load(), key);
    return d && { ...d, configurable: true };
  },
});`,
    }));
  },
};

/**
 * ws itself, for the agent's own imports of it (src/util/websocket-server.ts): a stand-in whose
 * exports load the real package at their first use, i.e. at the agent's first websocket. ws and
 * what it requires (node's crypto, events, streams: ~5-10 ms of a unit's boot on this kind of host)
 * are then off the way to the agent's first answer; most boots never see a websocket (the host's
 * exec is plain HTTP).
 */
const WS_ENTRY = createRequire(import.meta.url).resolve("ws");
const WS_EXPORTS = ["WebSocket", "WebSocketServer", "createWebSocketStream", "Receiver", "Sender"];

const lazyWs = {
  name: "lazy-ws",
  setup(b) {
    b.onResolve({ filter: /^ws$/ }, (args) =>
      args.importer.includes("/node_modules/") ? undefined : { path: "ws", namespace: "lazy-ws" },
    );
    b.onLoad({ filter: /.*/, namespace: "lazy-ws" }, () => ({
      loader: "js",
      resolveDir: here,
      contents: `let real;
const load = () => (real ??= require(${JSON.stringify(WS_ENTRY)}));
for (const key of ${JSON.stringify(WS_EXPORTS)}) {
  Object.defineProperty(module.exports, key, { enumerable: true, get: () => load()[key] });
}`,
    }));
  },
};

export async function build() {
  const pkg = JSON.parse(readFileSync(join(here, "package.json"), "utf8"));
  const tmp = `${bundleFile}.${process.pid}.tmp`;
  await esbuild.build({
    entryPoints: [join(here, "src", "main.ts")],
    outfile: tmp,
    bundle: true,
    platform: "node",
    // CommonJS: run by loader.cjs through vm.Script, which takes V8's code cache.
    format: "cjs",
    target: "node20",
    external: ["node-pty", "bufferutil", "utf-8-validate"],
    // The loader passes the bundle's file URL (node-pty is resolved from the bundle's directory).
    define: { __AGENT_VERSION__: JSON.stringify(pkg.version), "import.meta.url": "__umsAgentUrl" },
    legalComments: "none",
    logLevel: "warning",
    plugins: [lazyBuiltins, lazyWs],
  });
  // Each renamed in, never rewritten in place (atomic: concurrent builds never leave a half-written
  // file, and running units have them bound). A cache made from another bundle is never used (the
  // loader compares its size and time), so the order only matters for how soon the cache helps.
  renameSync(tmp, bundleFile);
  copyFileSync(join(here, "loader.cjs"), `${outfile}.${process.pid}.tmp`);
  renameSync(`${outfile}.${process.pid}.tmp`, outfile);
  // dist/agent.mjs of an earlier build (ESM, no cache) stays: units booted before this build run it,
  // and start their filesystem worker from it.
  buildSpawner(); // before the cache's run, which then compiles the agent's side of it too
  buildFdSend();
  await makeCodeCache();
  buildStatfsLib();
  return outfile;
}

/**
 * V8's code cache of the bundle (loader.cjs): the agent is started once here, on a socket in a temp
 * dir as this user, asked what the host asks a new unit's agent (its health, an exec of `true`, the
 * sessions, a directory's list and a file's read), and stopped; on its way out it writes the cache, which then
 * holds every function compiled meanwhile. Without it (the run failed) units' agents compile at start:
 * slower by ~15-30 ms a boot, the same otherwise (a warning says so).
 */
export async function makeCodeCache() {
  const dir = mkdtempSync(join(tmpdir(), "ums-agent-cache-"));
  const out = `${cacheFile}.${process.pid}`;
  const me = userInfo();
  const socket = join(dir, "agent.sock");
  mkdirSync(join(dir, "home"));
  writeFileSync(join(dir, "home", "file"), "x");
  const child = spawn(process.execPath, [outfile], {
    env: {
      PATH: process.env.PATH ?? "/usr/bin:/bin",
      UMS_AGENT_SOCKET: socket,
      UMS_AGENT_UID: String(me.uid),
      UMS_AGENT_GID: String(me.gid),
      UMS_AGENT_HOME: join(dir, "home"),
      UMS_AGENT_USER: me.username,
      UMS_AGENT_WRITE_CODE_CACHE: out,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stderr = "";
  child.stderr.on("data", (d) => {
    stderr += d;
  });
  const exited = new Promise((resolve) => child.once("close", (code, signal) => resolve(code ?? signal)));
  const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
  try {
    await new Promise((resolve, reject) => {
      let out = "";
      child.stdout.on("data", (d) => {
        out += d;
        if (out.includes('"ready":true')) resolve();
      });
      child.once("close", (code, signal) =>
        reject(new Error(`the agent exited (${code ?? signal}) before it was ready: ${stderr.trim()}`)),
      );
    });
    const home = encodeURIComponent(join(dir, "home"));
    for (let i = 0; i < 3; i++) {
      // A boot's first execs start with node's spawn; once ums-spawn is up (a second after), through it.
      if (i === 1) await new Promise((r) => setTimeout(r, 1300));
      await agentRequest(socket, "/health");
      await agentExec(socket, "/exec?cmd=true");
      await agentExec(socket, "/exec?cmd=sh&cmd=-c&cmd=echo%20x%3B%20echo%20y%201%3E%262");
      // The host's POST exec: the agent's plain HTTP exec (exec/http-run.ts).
      await agentRequest(socket, "/exec?cmd=sh&cmd=-c&cmd=echo%20x&ports=false", "POST");
      await agentRequest(socket, "/exec");
      await agentRequest(socket, `/fs/list?path=${home}`);
      await agentRequest(socket, `/fs/read?path=${home}%2Ffile`);
    }
    child.kill("SIGTERM");
    const code = await exited;
    if (code !== 0) throw new Error(`the agent exited with ${code}: ${stderr.trim()}`);
    renameSync(out, cacheFile);
  } catch (err) {
    child.kill("SIGKILL");
    await exited;
    rmSync(out, { force: true });
    rmSync(cacheFile, { force: true });
    console.warn(`warning: no code cache for the agent (${err.message}); units' agents compile at each start`);
  } finally {
    clearTimeout(timer);
    rmSync(dir, { recursive: true, force: true });
  }
}

/** One request to the agent's socket, its answer read to the end; a status other than 200 throws. */
function agentRequest(socket, path, method = "GET") {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: socket, path, method, headers: { connection: "close" } }, (res) => {
      res.resume();
      res.once("end", () =>
        res.statusCode === 200 ? resolve() : reject(new Error(`${method} ${path}: ${res.statusCode}`)),
      );
    });
    req.once("error", reject);
    req.end();
  });
}

/** An exec session over the agent's websocket, to its end; one that does not exit with 0 throws. */
function agentExec(socket, path) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws+unix://${socket}:${path}`);
    let exit;
    ws.on("message", (data, binary) => {
      if (binary && data[0] === 3) exit = data[1];
    });
    ws.once("error", reject);
    ws.once("close", () => (exit === 0 ? resolve() : reject(new Error(`${path}: exit ${exit}`))));
  });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  await build();
  console.log(`built ${outfile}`);
}
