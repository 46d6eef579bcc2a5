// What a soak runs against (issue #20): the API it sends the workload to, and the process or
// processes behind it, which the run samples, stops, restarts (chaos) and checks for leftovers. One
// `ums serve` by default (`singleServe`); bench/soak.mjs --replica makes a deployment of an API
// process and a node (issue #15) that implements the same interface.
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { cleanupStoppedServer, removeServerHostResources } from "../testing/host-cleanup.js";
import { prepareServe, UMS_BIN } from "../testing/serve-process.js";

export interface SoakTarget {
  /** What it is, for the log and the report: "ums serve", "ums serve --role api + --role node". */
  readonly label: string;
  /** Its processes, by name ("ums serve"; "api", "node"): what the chaos kills one at a time. */
  readonly parts: readonly string[];
  /** The API's base URL and a token of the soak's organization (known once `start` has resolved). */
  base(): string;
  token(): string;
  /** The data dir and runtime id of the process that runs the units (known once started). */
  unitDataDir(): string;
  runtimeId(): string;
  /** Sets the organization's running and warm limits (before the first start). */
  setRunningLimit(n: number): Promise<void>;
  /**
   * Starts what is not running and resolves once the API answers; after `stop("SIGKILL")` (the
   * chaos) on the same data dirs and state.
   */
  start(): Promise<void>;
  /** Whether every process of it runs. */
  running(): boolean;
  /** The processes whose memory the run samples (added up). */
  pids(): number[];
  /** Sends `signal` to the process `part` (default: every one) and waits for the exit. */
  stop(signal: NodeJS.Signals, part?: string): Promise<void>;
  /** After a stop: what stopped servers keep on the host on purpose (their firewall table, parent cgroups). */
  removeServerResources(): Promise<void>;
  /** The run's end, whatever happened: nothing of the target stays on the host. */
  close(): Promise<void>;
}

/** One `ums serve` (`--role all`, SQLite) with a data dir, port and test subnet of its own. */
export async function singleServe(o: {
  readonly name: string;
  readonly org: string;
  readonly env: NodeJS.ProcessEnv;
}): Promise<SoakTarget> {
  const server = await prepareServe(o);
  let rid = "";
  return {
    label: "ums serve",
    parts: ["ums serve"],
    base: () => server.base,
    token: () => server.token,
    unitDataDir: () => server.dataDir,
    runtimeId: () => rid,
    async setRunningLimit(n) {
      execFileSync(UMS_BIN, ["org", "set-limits", o.org, "--running-limit", `${n}`, "--warm-limit", `${n}`], {
        env: server.env,
      });
    },
    async start() {
      await server.start();
      rid ||= readFileSync(join(server.dataDir, "runtime-id"), "utf8").trim();
    },
    running: () => server.running(),
    pids: () => (server.running() && server.child?.pid ? [server.child.pid] : []),
    stop: (signal) => server.stop(signal),
    removeServerResources: () => removeServerHostResources(server.dataDir),
    close: () => server.close([], (dataDir) => cleanupStoppedServer(dataDir)),
  };
}
