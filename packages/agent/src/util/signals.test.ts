import assert from "node:assert/strict";
import { test } from "node:test";
import { exitCodeForSignal, parseSignal } from "./signals.js";

test("parseSignal accepts SIGTERM, TERM, term and numbers", () => {
  assert.deepEqual(parseSignal("SIGTERM"), { name: "SIGTERM", number: 15 });
  assert.deepEqual(parseSignal("TERM"), { name: "SIGTERM", number: 15 });
  assert.deepEqual(parseSignal("term"), { name: "SIGTERM", number: 15 });
  assert.deepEqual(parseSignal("9"), { name: "SIGKILL", number: 9 });
  assert.deepEqual(parseSignal("HUP"), { name: "SIGHUP", number: 1 });
  for (const bad of ["", "SIGNOPE", "999", "TERM;", "-9"]) assert.equal(parseSignal(bad), null, bad);
});

test("exitCodeForSignal is 128 + n", () => {
  assert.equal(exitCodeForSignal("SIGKILL"), 137);
  assert.equal(exitCodeForSignal("SIGTERM"), 143);
  assert.equal(exitCodeForSignal(2), 130);
});
