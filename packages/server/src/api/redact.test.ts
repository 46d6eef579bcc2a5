import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { redactQuery } from "./redact.js";

describe("request log redaction", () => {
  it("hides OAuth codes, states, keys and exec environments and argv, and keeps the rest", () => {
    assert.equal(
      redactQuery("/v1/units/a/exec?cmd=env&env=TOKEN%3Ds3cret&env=B=2&dir=/tmp"),
      "/v1/units/a/exec?cmd=[redacted]&env=[redacted]&env=[redacted]&dir=/tmp",
    );
    assert.equal(
      redactQuery("/v1/units/a/exec?tty=true&cmd=curl&CMD=-H&cmd=Authorization%3A%20Bearer%20s3cret&cmd=&stdin=1"),
      "/v1/units/a/exec?tty=true&cmd=[redacted]&CMD=[redacted]&cmd=[redacted]&cmd=[redacted]&stdin=1",
    );
    assert.equal(
      redactQuery("/v1/oauth/github/callback?code=abc&state=xyz"),
      "/v1/oauth/github/callback?code=[redacted]&state=[redacted]",
    );
    assert.equal(redactQuery("/v1/units?prefix=env"), "/v1/units?prefix=env");
  });
});
