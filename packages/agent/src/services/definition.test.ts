import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { checkDefinition, findCycle, type ServiceDefinition, startOrder } from "./definition.js";

const def = (needs: string[] = [], http_port?: number): ServiceDefinition => ({
  cmd: "sleep",
  args: [],
  needs,
  ...(http_port !== undefined && { http_port }),
});

describe("service definitions (spec 2.7, 4.6)", () => {
  it("orders services after the ones they need", () => {
    const defs = new Map([
      ["web", def(["db", "cache"])],
      ["db", def()],
      ["cache", def(["db"])],
      ["lone", def()],
    ]);
    const order = startOrder(defs);
    assert.deepEqual(order, ["db", "cache", "lone", "web"]);
  });

  it("finds cycles, including long ones, and only real ones", () => {
    assert.deepEqual(findCycle(new Map([["a", def(["a"])]])), ["a", "a"]);
    assert.deepEqual(
      findCycle(
        new Map([
          ["a", def(["b"])],
          ["b", def(["c"])],
          ["c", def(["a"])],
        ]),
      ),
      ["a", "b", "c", "a"],
    );
    assert.equal(
      findCycle(
        new Map([
          ["a", def(["b", "c"])],
          ["b", def(["c"])],
          ["c", def()],
        ]),
      ),
      null,
    );
  });

  it("names the bad field", () => {
    const others = new Map([["db", def([], 8080)]]);
    const check = (body: unknown, name = "svc") => {
      const r = checkDefinition(name, body, others);
      return r.ok ? "ok" : `${r.status} ${r.errors.join("; ")}`;
    };
    assert.match(check({ args: [] }), /^400 cmd: is required/);
    assert.match(check({ cmd: "x", needs: ["nope"] }), /^400 needs: unknown service 'nope'/);
    assert.match(check({ cmd: "x", needs: ["svc"] }), /^400 needs: a service cannot need itself/);
    assert.match(check({ cmd: "x", http_port: 8080 }), /^409 http_port: 8080 is already the HTTP port of service 'db'/);
    assert.match(check({ cmd: "x", http_port: 0 }), /^400 http_port/);
    assert.match(check({ cmd: "x", env: { "A=B": "c" } }), /^400 env: invalid variable name/);
    assert.match(check({ cmd: "x", args: [1] }), /^400 args: must be an array of strings/);
    assert.match(check({ cmd: "x", color: "red" }), /^400 color: unknown field/);
    assert.match(check({ cmd: "x" }, "../etc"), /^400 name:/);
    assert.equal(check({ cmd: "x", args: ["-c"], needs: ["db"], dir: "app", env: { A: "1" }, http_port: null }), "ok");
    // Replacing a service with its own port is no conflict.
    assert.equal(checkDefinition("db", { cmd: "x", http_port: 8080 }, others).ok, true);
  });

  it("a cycle through an update is refused", () => {
    const others = new Map([
      ["a", def(["b"])],
      ["b", def()],
    ]);
    const r = checkDefinition("b", { cmd: "x", needs: ["a"] }, others);
    assert.equal(r.ok, false);
    assert.match(r.ok ? "" : (r.errors[0] ?? ""), /needs: would form a cycle \(a → b → a\)/);
  });

  it("never throws, whatever the body (fuzz)", () => {
    const others = new Map([["db", def()]]);
    fc.assert(
      fc.property(fc.string(), fc.anything(), (name, body) => {
        const r = checkDefinition(name, body, others);
        if (r.ok) assert.equal(typeof r.def.cmd, "string");
        else assert.ok(r.errors.length > 0);
      }),
      { numRuns: 2000 },
    );
  });
});
