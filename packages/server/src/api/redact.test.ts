import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { redactQuery } from "./app.js";

describe("request log redaction", () => {
  it("hides OAuth codes, states, keys and exec environments, and keeps the rest", () => {
    assert.equal(
      redactQuery("/v1/units/a/exec?cmd=env&env=TOKEN%3Ds3cret&env=B=2&dir=/tmp"),
      "/v1/units/a/exec?cmd=env&env=[redacted]&env=[redacted]&dir=/tmp",
    );
    assert.equal(
      redactQuery("/v1/oauth/github/callback?code=abc&state=xyz"),
      "/v1/oauth/github/callback?code=[redacted]&state=[redacted]",
    );
    assert.equal(redactQuery("/v1/units?prefix=env"), "/v1/units?prefix=env");
  });
});
