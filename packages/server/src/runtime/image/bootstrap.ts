import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { toolEnv } from "../exec/host-command.js";
import type { BuildProgress } from "./build.js";
import { DEBIAN_SUITE } from "./packages.js";

// The build's bootstrap step: a Debian minbase with the variant's packages, by mmdebstrap, its
// output lines streamed as progress.

/** Milestones of mmdebstrap's `I:` lines and the overall percentage they stand for. */
const BOOTSTRAP_MILESTONES: Array<[RegExp, number]> = [
  [/^I: running apt-get update/, 5],
  [/^I: downloading packages/, 12],
  [/^I: extracting archives/, 35],
  [/^I: installing essential packages/, 45],
  [/^I: installing remaining packages/, 60],
  [/^I: cleaning package lists/, 80],
  [/^I: success/, 84],
];

/** The percentage for an mmdebstrap output line, or undefined when it is not a milestone. */
export function bootstrapPercent(line: string): number | undefined {
  return BOOTSTRAP_MILESTONES.find(([re]) => re.test(line))?.[1];
}

/** Runs mmdebstrap into `target` (an empty directory), streaming its lines as progress. */
export async function bootstrap(
  target: string,
  tmpdir: string,
  packages: string[],
  sources: string[],
  report: (p: BuildProgress) => void,
  signal: AbortSignal | undefined,
): Promise<void> {
  const args = [
    "--variant=minbase",
    "--mode=root",
    "--format=directory",
    // The build dir sits in a root-only data dir that apt's _apt user cannot enter: download as root
    // (as apt would anyway, after a warning).
    '--aptopt=APT::Sandbox::User "root"',
    `--include=${packages.join(",")}`,
    DEBIAN_SUITE,
    target,
    ...sources,
  ];
  report({ step: "bootstrap", message: `mmdebstrap ${args.join(" ")}`, percent: 2 });
  let percent = 2;
  const tail: string[] = [];
  signal?.throwIfAborted();
  const child = spawn("mmdebstrap", args, {
    env: toolEnv({ TMPDIR: tmpdir }),
    // mmdebstrap reads apt sources from stdin when it is not a terminal: give it nothing.
    stdio: ["ignore", "pipe", "pipe"],
    // Its own process group, so that an abort stops apt and dpkg too, not just mmdebstrap.
    detached: true,
  });
  let killTimer: NodeJS.Timeout | undefined;
  const onAbort = () => {
    const kill = (sig: NodeJS.Signals) => {
      try {
        if (child.pid) process.kill(-child.pid, sig);
      } catch {}
    };
    kill("SIGTERM");
    killTimer = setTimeout(() => kill("SIGKILL"), 5000);
  };
  signal?.addEventListener("abort", onAbort, { once: true });
  const onLine = (line: string) => {
    if (!line.trim()) return;
    tail.push(line);
    if (tail.length > 40) tail.shift();
    percent = bootstrapPercent(line) ?? percent;
    report({ step: "bootstrap", message: line, percent });
  };
  createInterface({ input: child.stdout }).on("line", onLine);
  createInterface({ input: child.stderr }).on("line", onLine);
  const [code, sig] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.on("error", (err) => {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") {
        reject(new Error("mmdebstrap is not installed (apt-get install mmdebstrap)"));
      } else reject(err);
    });
    child.on("close", (c, s) => resolve([c, s]));
  }).finally(() => {
    signal?.removeEventListener("abort", onAbort);
    clearTimeout(killTimer);
  });
  signal?.throwIfAborted();
  if (code !== 0) {
    throw new Error(`mmdebstrap failed (${sig ? `signal ${sig}` : `exit ${code}`}):\n${tail.join("\n")}`);
  }
}
