import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import type { SpritesJs } from "./install.js";

/** The scenario script (plain ESM, run by Node 24), beside this file's source. */
export const SCENARIO = fileURLToPath(new URL("../../../src/testing/sprites-js/scenario.mjs", import.meta.url));

/** One step of the scenario, as the script reports it (one JSON line on its stdout). */
export interface StepResult {
  readonly step: string;
  readonly ok: boolean;
  readonly ms: number;
  readonly error?: string;
  /** Not run: a step it needs did not pass. */
  readonly skipped?: string;
}

export interface ScenarioRun {
  readonly steps: ReadonlyMap<string, StepResult>;
  /** Why the script ended early (timeout, crash), if it did. */
  readonly failure: string | undefined;
  readonly stderr: string;
}

export interface ScenarioOpts {
  readonly baseURL: string;
  readonly token: string;
  /** Unit names start with this (the scenario picks the rest). */
  readonly prefix: string;
  readonly timeoutMs: number;
}

/**
 * Runs the scenario with the client's Node 24 as a child process against `baseURL` and collects
 * each step's outcome. Bounded: on timeout the child is killed by its PID (SIGKILL) and the run
 * says so; the steps reported until then are kept.
 */
export function runScenario(js: SpritesJs, o: ScenarioOpts): Promise<ScenarioRun> {
  const child = spawn(js.node, [SCENARIO], {
    env: {
      PATH: process.env.PATH,
      SPRITES_JS_ENTRY: js.entry,
      UMS_BASE_URL: o.baseURL,
      UMS_TOKEN: o.token,
      UMS_PREFIX: o.prefix,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const steps = new Map<string, StepResult>();
  let stderr = "";
  child.stderr.on("data", (d) => {
    stderr = (stderr + d).slice(-20_000);
  });
  createInterface({ input: child.stdout }).on("line", (line) => {
    try {
      const r = JSON.parse(line) as StepResult;
      if (typeof r.step === "string") steps.set(r.step, r);
    } catch {
      stderr += `\n(stdout) ${line}`;
    }
  });
  return new Promise((resolve) => {
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      if (child.pid !== undefined) process.kill(child.pid, "SIGKILL");
    }, o.timeoutMs);
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      const failure = timedOut
        ? `the scenario did not finish within ${o.timeoutMs} ms and was killed`
        : code !== 0
          ? `the scenario exited with ${code ?? signal}`
          : undefined;
      resolve({ steps, failure, stderr });
    });
    child.once("error", (err) => {
      clearTimeout(timer);
      resolve({ steps, failure: `could not start ${js.node}: ${err.message}`, stderr });
    });
  });
}
