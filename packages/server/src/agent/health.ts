import { request } from "node:http";
import { setTimeout as sleep } from "node:timers/promises";

/** GET /health on the agent's socket; resolves when it answers 200, rejects otherwise. */
export function agentHealth(
  socketPath: string,
  timeoutMs = 1000,
  signal?: AbortSignal,
): Promise<{ ok: boolean; pid: number }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, path: "/health", method: "GET", timeout: timeoutMs, signal }, (res) => {
      let body = "";
      res.setEncoding("utf8").on("data", (d: string) => {
        body += d;
      });
      res.on("end", () => {
        if (res.statusCode !== 200) return reject(new Error(`agent answered ${res.statusCode}`));
        try {
          resolve(JSON.parse(body));
        } catch (err) {
          reject(err);
        }
      });
    });
    req.on("timeout", () => req.destroy(new Error("agent did not answer in time")));
    req.on("error", reject);
    req.end();
  });
}

/** How often a boot that waits for its agent checks that the unit still runs. */
const ALIVE_CHECK_MS = 100;

/**
 * Waits until the agent answers, or `timeoutMs` passes. The agent's socket listens from before the
 * unit starts (the host made it, runc/agent-listener.ts), so one request waits in its backlog and is
 * answered as soon as the agent accepts: no polling, no delay after the agent is ready. A refused or
 * reset connection (the agent is gone) is tried again shortly; meanwhile `isAlive` is asked every
 * 100 ms, and a unit that stopped ends the wait at once.
 */
export async function waitForAgent(
  socketPath: string,
  timeoutMs: number,
  isAlive: () => Promise<boolean>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const waiting = new AbortController();
  let dead = false;
  (async () => {
    while (!waiting.signal.aborted) {
      await sleep(ALIVE_CHECK_MS, undefined, { signal: waiting.signal });
      // A check that fails (runc did not answer) is no verdict: the next one decides.
      if (!(await isAlive().catch(() => true))) {
        dead = true;
        waiting.abort();
      }
    }
  })().catch(() => {}); // ends by its abort
  let last: unknown;
  try {
    while (!dead && Date.now() < deadline) {
      try {
        await agentHealth(socketPath, Math.max(1, deadline - Date.now()), waiting.signal);
        return;
      } catch (err) {
        last = err;
      }
      if (!dead) await sleep(5);
    }
  } finally {
    // Not awaited: a check under way (a runc run) must not hold back a boot that is done.
    waiting.abort();
  }
  if (dead) throw new Error("the unit stopped while booting (see its agent.log)");
  throw new Error(`the unit's agent did not start within ${timeoutMs} ms: ${String(last)}`);
}
