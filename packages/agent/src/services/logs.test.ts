import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import type { ServiceEvent } from "@ums/protocol";
import { ServiceLog } from "./logs.js";
import { loadServices, saveServices } from "./persist.js";

describe("service logs and definitions file", () => {
  const dir = mkdtempSync(join(tmpdir(), "ums-svc-"));
  after(() => rmSync(dir, { recursive: true, force: true }));

  it("timestamps lines, splits streams, joins partial chunks, tails", () => {
    const log = new ServiceLog(dir, "a");
    const seen: ServiceEvent[] = [];
    const off = log.subscribe((e) => seen.push(e));
    log.output("stdout", Buffer.from("one\ntw"));
    log.output("stderr", Buffer.from("bad\n"));
    log.output("stdout", Buffer.from("o\nthree"));
    log.flush();
    off();
    log.output("stdout", Buffer.from("four\n"));
    assert.deepEqual(
      seen.map((e) => `${e.type}:${"data" in e ? e.data : ""}`),
      ["stdout:one", "stderr:bad", "stdout:two", "stdout:three"],
    );
    const combined = readFileSync(join(dir, "a.log"), "utf8").trim().split("\n");
    assert.equal(combined.length, 5);
    assert.match(combined[1] ?? "", /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \[stderr\] bad$/);
    assert.equal(readFileSync(join(dir, "a.stderr.log"), "utf8").split("\n").length, 2);
    const tail = log.tail(2);
    assert.deepEqual(
      tail.map((e) => ("data" in e ? e.data : "")),
      ["three", "four"],
    );
    assert.ok(tail.every((e) => Math.abs(e.timestamp - Date.now()) < 5000));
    assert.equal(log.tail().length, 5);
    log.close();
  });

  it("keeps each file bounded, with one older generation", () => {
    const log = new ServiceLog(dir, "big", 4096);
    for (let i = 0; i < 500; i++) log.output("stdout", Buffer.from(`line ${i}\n`));
    log.close();
    assert.ok(statSync(join(dir, "big.log")).size <= 4096);
    assert.ok(statSync(join(dir, "big.log.1")).size <= 4096);
    const tail = new ServiceLog(dir, "big", 4096).tail();
    const last = tail.at(-1);
    assert.equal(last && "data" in last ? last.data : "", "line 499");
  });

  it("writes the definitions file atomically and reads it back", () => {
    const file = join(dir, "state", "services.json");
    assert.equal(loadServices(file).size, 0);
    saveServices(file, new Map([["web", { def: { cmd: "x", args: [], needs: [] }, stopped: true }]]));
    assert.deepEqual(loadServices(file).get("web"), { def: { cmd: "x", args: [], needs: [] }, stopped: true });
    assert.equal(statSync(file).mode & 0o777, 0o600);
  });
});
