import assert from "node:assert/strict";
import { describe, it } from "node:test";
import * as dns from "dns-packet";
import fc from "fast-check";
import { formErr, packetId, parseQuery, RCODE, readAnswer, respond, withId } from "./packets.js";

const query = (name: string, type: dns.RecordType = "A") =>
  dns.encode({ type: "query", id: 4242, flags: dns.RECURSION_DESIRED, questions: [{ type, name }] });

/** RFC 1035 messages as the unit resolver reads and writes them. */
describe("resolver packets", () => {
  it("reads one question, lower-cased without the root dot", () => {
    const q = parseQuery(query("API.GitHub.com."));
    assert.equal(q?.name, "api.github.com");
    assert.equal(q?.type, "A");
    assert.equal(q?.id, 4242);
    assert.equal(q?.rd, true);
  });

  it("answers REFUSED with the question and id echoed", () => {
    const q = parseQuery(query("evil.example"));
    assert.ok(q);
    const a = dns.decode(respond(q, RCODE.REFUSED));
    assert.equal(a.type, "response");
    assert.equal(a.id, 4242);
    assert.equal((a as { rcode?: string }).rcode, "REFUSED");
    assert.equal(a.questions?.[0]?.name, "evil.example");
    assert.equal(a.flag_rd, true);
    assert.equal(a.flag_ra, true);
  });

  it("reads the IPv4 addresses and TTLs of an answer, CNAMEs followed", () => {
    const raw = dns.encode({
      type: "response",
      id: 1,
      flags: dns.RECURSION_AVAILABLE,
      questions: [{ type: "A", name: "www.example" }],
      answers: [
        { type: "CNAME", name: "www.example", ttl: 300, data: "edge.example" },
        { type: "A", name: "edge.example", ttl: 20, data: "203.0.113.7" },
        { type: "A", name: "edge.example", ttl: 40, data: "203.0.113.8" },
      ],
    });
    assert.deepEqual(readAnswer(raw), {
      rcode: 0,
      truncated: false,
      addresses: [
        { ip: "203.0.113.7", ttlS: 20 },
        { ip: "203.0.113.8", ttlS: 40 },
      ],
    });
    assert.equal(readAnswer(query("x.example")), undefined, "a query is no answer");
  });

  it("swaps ids without touching the rest", () => {
    const q = query("a.example");
    const swapped = withId(q, 7);
    assert.equal(packetId(swapped), 7);
    assert.deepEqual(swapped.subarray(2), q.subarray(2));
    assert.equal(packetId(q), 4242, "the original is left alone");
  });

  it("never throws on arbitrary bytes; FORMERR only when there is a header (fuzz)", () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 600 }), (bytes) => {
        const buf = Buffer.from(bytes);
        parseQuery(buf);
        readAnswer(buf);
        const err = formErr(buf);
        assert.equal(err === undefined, buf.length < 12);
        if (err) assert.equal((dns.decode(err) as { rcode?: string }).rcode, "FORMERR");
      }),
      { numRuns: 3000 },
    );
  });
});
