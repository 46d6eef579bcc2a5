import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { describe, it } from "node:test";
import { signSigV4 } from "./sigv4.js";

/**
 * An independent SigV4 check, written from the AWS documentation's worked example
 * ("GET Object" in the S3 SigV4 header-based auth docs), not from sigv4.ts.
 */
describe("AWS SigV4", () => {
  it("reproduces the S3 documentation's GET Object example signature", () => {
    const h = signSigV4({
      method: "GET",
      host: "examplebucket.s3.amazonaws.com",
      path: "/test.txt",
      query: "",
      accessKeyId: "AKIAIOSFODNN7EXAMPLE",
      secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
      region: "us-east-1",
      service: "s3",
      now: new Date("2013-05-24T00:00:00Z"),
      payloadHash: createHash("sha256").update("").digest("hex"),
      headers: { range: "bytes=0-9" },
    });
    assert.equal(
      h.authorization,
      "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, " +
        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, " +
        "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41",
    );
  });

  it("signs a query in canonical order", () => {
    const sign = (query: string) =>
      signSigV4({
        method: "GET",
        host: "h",
        path: "/b",
        query,
        accessKeyId: "A",
        secretAccessKey: "S",
        region: "r",
        service: "s3",
        now: new Date(0),
      }).authorization;
    assert.equal(sign("b=2&a=1"), sign("a=1&b=2"));
  });
});
