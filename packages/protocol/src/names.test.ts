import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { namePrefixProblem, UNIT_NAME_PATTERN, unitNameProblem } from "./names.js";

describe("unit name rules", () => {
  it("accepts DNS-label-safe names", () => {
    for (const n of ["a", "abc", "a-b", "a1-2b", "z".repeat(54)]) assert.equal(unitNameProblem(n), undefined, n);
  });

  it("says what is wrong with a bad name", () => {
    const cases: [string, RegExp][] = [
      ["", /must not be empty/],
      ["z".repeat(55), /55 characters long; the most is 54/],
      ["1a", /must start with a lowercase letter/],
      ["-a", /must start with a lowercase letter/],
      ["Ab", /must start with a lowercase letter/],
      ["aB", /contains "B"/],
      ["a_b", /contains "_"/],
      ["a b", /contains " "/],
      ["a--b", /two hyphens in a row/],
      ["ab-", /must not end with a hyphen/],
    ];
    for (const [n, re] of cases) assert.match(unitNameProblem(n) ?? "", re, n);
  });

  it("agrees with the schema pattern on every string", () => {
    const re = new RegExp(UNIT_NAME_PATTERN);
    fc.assert(
      fc.property(fc.oneof(fc.string({ maxLength: 60 }), fc.stringMatching(/^[a-z0-9-]{0,60}$/)), (n) => {
        const valid = unitNameProblem(n) === undefined;
        assert.equal(valid, re.test(n) && n.length <= 54, JSON.stringify(n));
        if (valid) assert.ok(`${n}-abcdefgh`.length <= 63, "the URL label fits in 63 characters");
      }),
      { numRuns: 2000 },
    );
  });

  it("accepts any beginning of a valid name as a prefix", () => {
    fc.assert(
      fc.property(fc.stringMatching(/^[a-z](?:-?[a-z0-9]){0,40}$/), fc.nat(), (name, cut) => {
        const prefix = name.slice(0, cut % (name.length + 1));
        assert.equal(namePrefixProblem(prefix), undefined, prefix);
      }),
    );
    for (const bad of ["A", "a--", "-", "a_", "1"]) assert.ok(namePrefixProblem(bad), bad);
  });
});
