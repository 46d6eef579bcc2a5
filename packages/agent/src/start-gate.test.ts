import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";

// The start gate (start-gate.ts) as a unit's agent gets it: descriptor 4 of a process the host
// started, a socket whose other end the host closes once the unit's link and disk limit are done.
const gateModule = join(fileURLToPath(new URL(".", import.meta.url)), "start-gate.js");

function child(fdVar: string | undefined) {
  const script = `import(${JSON.stringify(gateModule)}).then(({ startGate }) => startGate(process.env.GATE).then(() => process.stdout.write("open")))`;
  const env = { ...process.env, ...(fdVar !== undefined && { GATE: fdVar }) };
  if (fdVar === undefined) delete env.GATE;
  const p = spawn(process.execPath, ["-e", script], { env, stdio: ["ignore", "pipe", "inherit", "ignore", "pipe"] });
  let out = "";
  p.stdout?.on("data", (d) => {
    out += d;
  });
  const exited = new Promise<void>((resolve) => p.once("exit", () => resolve()));
  return { p, gate: p.stdio[4], output: () => out, exited };
}

describe("start gate", () => {
  it("opens only when the host closes its end", async () => {
    const c = child("4");
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(c.output(), "", "opened before the host closed its end");
    c.gate?.destroy();
    await c.exited;
    assert.equal(c.output(), "open");
  });

  it("is open at once without a descriptor, or with one that is not a number", async () => {
    for (const v of [undefined, "", "x"]) {
      const c = child(v);
      await c.exited;
      assert.equal(c.output(), "open", `with ${JSON.stringify(v)}`);
      c.gate?.destroy();
    }
  });
});
