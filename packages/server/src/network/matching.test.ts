import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { NetworkRule } from "@ums/protocol";
import fc from "fast-check";
import { isValidName, parsePattern } from "./domain.js";
import { CompiledPolicy } from "./matching.js";
import { PRESETS } from "./presets/index.js";

function compile(rules: NetworkRule[]): CompiledPolicy {
  const c = CompiledPolicy.compile({ rules });
  if (!(c instanceof CompiledPolicy)) throw new Error(c.errors.join("; "));
  return c;
}
const verdict = (rules: NetworkRule[], name: string) => compile(rules).decide(name).verdict;
const allow = (domain: string): NetworkRule => ({ action: "allow", domain });
const deny = (domain: string): NetworkRule => ({ action: "deny", domain });

/** Issue #6 / spec 2.10 matching, docs/ARCHITECTURE.md section 7 precedence. */
describe("network policy matching", () => {
  it("enforces nothing without rules", () => {
    assert.equal(verdict([], "anything.example"), "open");
    assert.equal(compile([]).enforced, false);
  });

  it("denies names no rule matches once any rule exists", () => {
    assert.equal(verdict([allow("api.github.com")], "example.com"), "denied");
    assert.equal(verdict([allow("api.github.com")], "API.GitHub.com."), "allowed");
  });

  it("ranks an exact name over *.sub.example over *.example over *", () => {
    const rules = [deny("*"), allow("*.example.com"), deny("*.sub.example.com"), allow("x.sub.example.com")];
    assert.equal(verdict(rules, "x.sub.example.com"), "allowed");
    assert.equal(verdict(rules, "y.sub.example.com"), "denied");
    assert.equal(verdict(rules, "a.example.com"), "allowed");
    assert.equal(verdict(rules, "other.org"), "denied");
    // Order does not matter across specificities.
    assert.equal(verdict([...rules].reverse(), "x.sub.example.com"), "allowed");
    assert.equal(verdict([...rules].reverse(), "y.sub.example.com"), "denied");
  });

  it("lets the later of equally specific rules win", () => {
    assert.equal(verdict([allow("a.example"), deny("a.example")], "a.example"), "denied");
    assert.equal(verdict([deny("a.example"), allow("a.example")], "a.example"), "allowed");
    assert.equal(verdict([allow("*"), deny("*")], "x.y"), "denied");
  });

  it("matches a wildcard below its suffix only, a lone * everything", () => {
    assert.equal(verdict([allow("*.example.com")], "example.com"), "denied");
    assert.equal(verdict([allow("*.example.com")], "a.b.example.com"), "allowed");
    assert.equal(verdict([allow("*.example.com")], "badexample.com"), "denied");
    assert.equal(verdict([allow("*")], "localhost"), "allowed");
  });

  it("expands presets in place and names the rule that decided", () => {
    const p = compile([{ include: "defaults" }, deny("gist.github.com")]);
    assert.equal(p.decide("registry.npmjs.org").verdict, "allowed");
    assert.equal(p.decide("api.github.com").rule, "rule 0: allow *.github.com (from preset defaults)");
    assert.deepEqual(p.decide("gist.github.com"), { verdict: "denied", rule: "rule 1: deny gist.github.com" });
    assert.equal(p.decide("pypi.org").verdict, "allowed");
    assert.equal(p.decide("api.anthropic.com").verdict, "allowed");
    assert.equal(p.decide("deb.debian.org").verdict, "allowed");
    assert.equal(p.decide("registry-1.docker.io").verdict, "allowed");
    assert.equal(p.decide("crates.io").verdict, "denied");
    assert.equal(verdict([{ include: "rust" }], "crates.io"), "allowed");
  });

  it("every preset pattern is valid", () => {
    for (const [name, patterns] of Object.entries(PRESETS)) {
      for (const p of patterns) assert.notEqual(typeof parsePattern(p), "string", `${name}: ${p}`);
    }
  });

  it("names each bad rule: unknown preset, bad pattern, bad action, mixed fields", () => {
    const c = CompiledPolicy.compile({
      rules: [
        allow("ok.example"),
        { include: "nope" },
        allow("a.*.example"),
        { action: "maybe", domain: "x.example" },
        { domain: "x.example" },
        { include: "npm", action: "allow" },
        {},
        allow("-bad.example"),
      ],
    });
    assert.ok(!(c instanceof CompiledPolicy));
    const errors = c.errors;
    assert.equal(errors.length, 7);
    assert.match(errors[0] ?? "", /^rules\[1\].*unknown preset 'nope'; known presets: ai, debian, defaults/);
    assert.match(errors[1] ?? "", /^rules\[2\].*wildcard is only allowed as the whole first label/);
    assert.match(errors[2] ?? "", /^rules\[3\].*action must be 'allow' or 'deny'/);
    assert.match(errors[3] ?? "", /^rules\[4\].*\(it is missing\)/);
    assert.match(errors[4] ?? "", /^rules\[5\].*either 'include' or 'action'/);
    assert.match(errors[5] ?? "", /^rules\[6\].*give 'domain'/);
    assert.match(errors[6] ?? "", /^rules\[7\].*is not a DNS name/);
  });

  it("never throws on any pattern, and accepts exactly valid names (fuzz)", () => {
    fc.assert(
      fc.property(fc.string({ maxLength: 300 }), (s) => {
        const p = parsePattern(s);
        if (typeof p !== "string" && p.kind === "exact") assert.ok(isValidName(p.name));
      }),
      { numRuns: 2000 },
    );
    fc.assert(
      fc.property(fc.domain(), (d) => {
        const p = parsePattern(d);
        assert.deepEqual(p, { kind: "exact", name: d.toLowerCase() });
        assert.deepEqual(parsePattern(`*.${d}`), { kind: "wildcard", suffix: d.toLowerCase() });
        assert.equal(verdict([allow(`*.${d}`)], `www.${d}`), "allowed");
        assert.equal(verdict([allow(`*.${d}`), deny(d)], `www.${d}`), "allowed");
      }),
    );
  });

  it("picks the most specific matching rule regardless of order (property)", () => {
    const label = fc.stringMatching(/^[a-z]{1,5}$/);
    fc.assert(
      fc.property(fc.array(label, { minLength: 1, maxLength: 4 }), fc.boolean(), (labels, wildFirst) => {
        const name = labels.join(".");
        const rules = [deny("*"), ...labels.slice(1).map((_, i) => deny(`*.${labels.slice(i + 1).join(".")}`))];
        const all = wildFirst ? [...rules, allow(name)] : [allow(name), ...rules];
        assert.equal(verdict(all, name), "allowed");
      }),
    );
  });
});
