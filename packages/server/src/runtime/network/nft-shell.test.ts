import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { NftShell } from "./nft-shell.js";

const table = `ums_t${process.pid}`;

/** The resolver's long-lived nft: lines applied in order, errors reported, and recovery after them. */
describe("nft shell", () => {
  const shell = new NftShell();
  before(() => {
    execFileSync("nft", ["-f", "-"], {
      input: `table inet ${table} {\n set s { type ipv4_addr; flags timeout; }\n}\n`,
    });
  });
  after(() => {
    shell.close();
    execFileSync("nft", ["delete", "table", "inet", table]);
  });
  const elements = () => execFileSync("nft", ["list", "set", "inet", table, "s"]).toString();

  it("applies lines in order and recovers after an error", async () => {
    await shell.run(`add element inet ${table} s { 198.51.100.1 timeout 60s }`);
    await assert.rejects(shell.run(`add element inet ${table} nope { 198.51.100.2 }`), /No such file or directory/);
    await Promise.all([
      shell.run(`add element inet ${table} s { 198.51.100.3 timeout 60s }`),
      shell.run(`add element inet ${table} s { 198.51.100.5 }; delete element inet ${table} s { 198.51.100.1 }`),
    ]);
    const list = elements();
    assert.match(list, /198\.51\.100\.3/);
    assert.doesNotMatch(list, /198\.51\.100\.1\b/);
    await assert.rejects(shell.run("a\nb"), /one nft line/);
    await assert.rejects(shell.run(`delete element inet ${table} s { 198.51.100.3 }`), /must add something/);
  });

  it("refreshes a timeout with add; delete; add in one line", async () => {
    const el = `{ 198.51.100.4 timeout 5s }`;
    await shell.run(`add element inet ${table} s ${el}`);
    const longer = `add element inet ${table} s { 198.51.100.4 timeout 3600s }`;
    await shell.run(`${longer}; delete element inet ${table} s { 198.51.100.4 }; ${longer}`);
    assert.match(elements(), /198\.51\.100\.4 timeout 1h/);
  });
});
