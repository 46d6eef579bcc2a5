import { request } from "node:http";

/** GET /health on the agent's socket; resolves when it answers 200, rejects otherwise. */
export function agentHealth(socketPath: string, timeoutMs = 1000): Promise<{ ok: boolean; pid: number }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, path: "/health", method: "GET", timeout: timeoutMs }, (res) => {
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

/** Polls the agent until it answers or `timeoutMs` passes. */
export async function waitForAgent(
  socketPath: string,
  timeoutMs: number,
  isAlive: () => Promise<boolean>,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let delay = 2;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      await agentHealth(socketPath, 500);
      return;
    } catch (err) {
      last = err;
    }
    if (!(await isAlive())) throw new Error("the unit stopped while booting (see its agent.log)");
    await new Promise((r) => setTimeout(r, delay));
    delay = Math.min(delay * 2, 50);
  }
  throw new Error(`the unit's agent did not start within ${timeoutMs} ms: ${String(last)}`);
}
