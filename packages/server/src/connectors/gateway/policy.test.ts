import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { normalizeBySegments, normalizeGatewayPath } from "./path.js";
import { evaluatePolicy, ruleMatches } from "./policy.js";

const unit = (name = "web-1", labels: string[] = []) => ({ name, labels });
const allowed = (p: Parameters<typeof evaluatePolicy>[0], path = "/x", caller = unit()) =>
  evaluatePolicy(p, caller, path).allowed;

describe("access policy (spec 2.11)", () => {
  it("an empty or missing policy denies", () => {
    assert.equal(allowed(undefined), false);
    assert.equal(allowed({}), false);
    assert.equal(allowed({ allowed_endpoints: ["/x"] }), false, "endpoints alone admit no unit");
    assert.equal(allowed({ allow_all: false }), false);
  });

  it("allow_all admits every unit; name_prefix and sprite_labels narrow", () => {
    assert.equal(allowed({ allow_all: true }), true);
    assert.equal(allowed({ name_prefix: "web-" }), true);
    assert.equal(allowed({ name_prefix: "db-" }), false);
    assert.equal(allowed({ allow_all: true, name_prefix: "db-" }), false, "a prefix is required even with allow_all");
  });

  it("sprite_labels: all are required, and the denial names the missing ones", () => {
    const p = { sprite_labels: ["ci", "prod", "eu"] };
    assert.equal(allowed(p, "/x", unit("a", ["ci", "prod", "eu", "x"])), true);
    const d = evaluatePolicy(p, unit("a", ["prod"]), "/x");
    assert.equal(d.allowed, false);
    assert.ok(!d.allowed && d.missingLabels);
    assert.deepEqual(!d.allowed && d.missingLabels, ["ci", "eu"]);
    assert.match(!d.allowed ? d.reason : "", /'ci', 'eu'/);
  });

  it("blocked_endpoints win over allowed_endpoints; exact and trailing-* patterns", () => {
    const p = { allow_all: true, allowed_endpoints: ["/repos/*", "/user"], blocked_endpoints: ["/repos/secret/*"] };
    assert.equal(allowed(p, "/repos/a/issues"), true);
    assert.equal(allowed(p, "/user"), true);
    assert.equal(allowed(p, "/repos"), false, "an allow of /repos/* is for what is below it");
    assert.equal(allowed(p, "/user/emails"), false, "exact means exact");
    assert.equal(allowed(p, "/repos/secret/keys"), false);
    assert.equal(allowed(p, "/repos/secret"), false, "a block of /a/* covers /a");
    assert.equal(allowed(p, "/REPOS/SECRET/keys"), false, "blocks compare case-insensitively");
    assert.equal(allowed(p, "/orgs"), false);
    assert.equal(
      allowed({ allow_all: true, blocked_endpoints: ["/admin"] }, "/other"),
      true,
      "no allow list: any path",
    );
    assert.equal(allowed({ allow_all: true, allowed_endpoints: [] }, "/other"), false, "an empty allow list: none");
  });

  it("rule matching: a prefix without a slash is a plain string prefix", () => {
    assert.equal(ruleMatches("/v1/*", "/v1", true), true, "a block of /v1/* covers /v1");
    assert.equal(ruleMatches("/v1/*", "/v1"), false, "an allow of /v1/* does not");
    assert.equal(ruleMatches("/v1*", "/v10"), true);
    assert.equal(ruleMatches("/v1/", "/v1"), true, "rules are canonical like paths");
    assert.equal(ruleMatches("//a//b", "/a/b"), true);
  });
});

describe("gateway path normalisation", () => {
  const norm = (p: string) => normalizeGatewayPath(p);
  it("refuses dot segments, encoded dots and slashes, double encoding, backslashes", () => {
    for (const p of [
      "/a/../b",
      "/a/./b",
      "/a/%2e%2e/b",
      "/a/%2E%2e/b",
      "/a/.%2e/b",
      "/a%2fb",
      "/a%2Fb",
      "/a%5cb",
      "/a\\b",
      "/a/%252e%252e/b",
      "/a/%252fb",
      "/a/%00",
      "/a/%zz",
      "..",
    ]) {
      assert.equal(norm(p).ok, false, p);
    }
  });

  it("collapses double slashes; what is matched is what is forwarded", () => {
    const n = norm("//repos///a/b%20c/");
    assert.ok(n.ok);
    assert.equal(n.ok && n.match, "/repos/a/b c");
    assert.equal(n.ok && n.forward, "/repos/a/b%20c/");
    const root = norm("");
    assert.equal(root.ok && root.forward, "/");
  });

  // Issue #16 part 3: plain paths skip the segment by segment way; the answer must be the same.
  it("fuzz: the shortcut for plain paths answers exactly what the segment by segment way does", () => {
    const plain = ["/", "/a", "/a/", "/repos/o/r/issues", "/x:y@z/~a-b_c.d/", "/v1/a.b/c!$&'()*+,;="];
    for (const p of plain) assert.deepEqual(normalizeGatewayPath(p), normalizeBySegments(p), p);
    const chars = fc.constantFrom(..."/./a%2eZ09-_~!$&'()*+,;=:@ \\?#".split(""));
    fc.assert(
      fc.property(fc.array(chars, { maxLength: 24 }), (cs) => {
        const raw = `/${cs.join("")}`;
        assert.deepEqual(normalizeGatewayPath(raw), normalizeBySegments(raw), raw);
      }),
      { numRuns: 5000 },
    );
  });

  // Fuzz: whatever path a unit sends, the forwarded path re-normalises to the same match path, has
  // no dot segment, and a blocked prefix that matches the forwarded path's decoding is never bypassed.
  it("fuzz: normalisation is idempotent and never yields a dot segment", () => {
    const seg = fc.oneof(
      fc.constantFrom("..", ".", "%2e%2e", "%2E.", "%2f", "%5c", "admin", "ADMIN", "", "%252e", "a b", "%41dmin"),
      fc.string({ maxLength: 6 }),
    );
    fc.assert(
      fc.property(fc.array(seg, { maxLength: 8 }), fc.boolean(), (segs, trailing) => {
        const raw = `/${segs.join("/")}${trailing ? "/" : ""}`;
        const n = normalizeGatewayPath(raw);
        if (!n.ok) return;
        const again = normalizeGatewayPath(n.forward);
        assert.ok(again.ok, `${raw} -> ${n.forward}`);
        assert.equal(again.ok && again.match, n.match);
        const decoded = n.forward.split("/").map((s) => decodeURIComponent(s));
        assert.ok(!decoded.includes("..") && !decoded.includes("."), n.forward);
        // A block of /admin/* catches every spelling of /admin/... that survives normalisation.
        const policy = { allow_all: true, blocked_endpoints: ["/admin/*"] };
        if (n.match.toLowerCase().startsWith("/admin")) {
          const isAdmin = n.match.toLowerCase() === "/admin" || n.match.toLowerCase().startsWith("/admin/");
          if (isAdmin) assert.equal(evaluatePolicy(policy, unit(), n.match).allowed, false, raw);
        }
      }),
      { numRuns: 3000 },
    );
  });
});
