import assert from "node:assert/strict";
import { connect, createServer, type Server } from "node:net";
import { after, before, describe, it } from "node:test";
import { type PinnedAddress, pinnedLookup, pinTarget, TargetRefused } from "./pinned-target.js";
import { parseRanges } from "./target-address.js";

/** A resolver from a table, counting its lookups (no DNS). */
function table(answers: Record<string, PinnedAddress[][]>) {
  const asked: string[] = [];
  return {
    asked,
    resolve: async (name: string) => {
      asked.push(name);
      const sets = answers[name] ?? [];
      const n = asked.filter((a) => a === name).length - 1;
      return sets[Math.min(n, sets.length - 1)] ?? [];
    },
  };
}
const v4 = (address: string): PinnedAddress => ({ address, family: 4 });
const v6 = (address: string): PinnedAddress => ({ address, family: 6 });
const PUBLIC = v4("93.184.216.34");

describe("pinned gateway targets (issue #19 finding 7)", () => {
  it("a literal is checked as is, without a lookup", async () => {
    const t = table({});
    const policy = { resolve: t.resolve, allowed: [] };
    assert.deepEqual(await pinTarget(new URL("http://93.184.216.34/x"), policy), PUBLIC);
    assert.deepEqual(await pinTarget(new URL("https://[2606:4700::1111]/"), policy), v6("2606:4700::1111"));
    for (const u of ["http://[::ffff:127.0.0.1]:1/", "http://2130706433/", "http://[::]/", "http://LOCALHOST./"]) {
      await assert.rejects(pinTarget(new URL(u), policy), TargetRefused, u);
    }
    assert.deepEqual(t.asked, []);
  });

  it("every answer of a name is checked: one bad answer refuses the name", async () => {
    const t = table({
      "ok.test": [[PUBLIC, v6("2606:4700::1111")]],
      "mixed.test": [[PUBLIC, v4("127.0.0.1")]],
      "mapped.test": [[v6("::ffff:169.254.169.254")]],
      "none.test": [[]],
    });
    const policy = { resolve: t.resolve, allowed: [] };
    assert.deepEqual(await pinTarget(new URL("http://ok.test/"), policy), PUBLIC, "IPv4 first");
    await assert.rejects(
      pinTarget(new URL("http://mixed.test/"), policy),
      /'mixed.test' resolves to a loopback address/,
    );
    await assert.rejects(pinTarget(new URL("http://mapped.test/"), policy), /link-local/);
    await assert.rejects(pinTarget(new URL("http://none.test/"), policy), /resolves to no address/);
    // The refusal names the range, never the address (the host's DNS view stays its own).
    await assert.rejects(
      pinTarget(new URL("http://mixed.test/"), policy),
      (e: Error) => !e.message.includes("127.0.0.1"),
    );
  });

  it("allowed ranges pass; the name is resolved once per pin", async () => {
    const t = table({ "fake.test": [[v4("203.0.113.7")], [v4("127.0.0.1")]] });
    const policy = { resolve: t.resolve, allowed: parseRanges(["203.0.113.0/24"], "t") };
    assert.deepEqual(await pinTarget(new URL("http://fake.test/"), policy), v4("203.0.113.7"));
    assert.deepEqual(t.asked, ["fake.test"]);
    await assert.rejects(pinTarget(new URL("http://fake.test/"), policy), TargetRefused);
  });

  it("a resolver that hangs is given up on", async () => {
    const policy = { resolve: () => new Promise<never>(() => {}), allowed: [], timeoutMs: 50 };
    await assert.rejects(pinTarget(new URL("http://slow.test/"), policy), /took longer than/);
  });

  describe("pinnedLookup", () => {
    let server: Server;
    let port = 0;
    before(async () => {
      server = createServer((s) => s.end());
      await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
      port = (server.address() as { port: number }).port;
    });
    after(() => new Promise<void>((r) => server.close(() => r())));

    it("connects to the pinned address whatever the name, with and without autoSelectFamily", async () => {
      for (const autoSelectFamily of [true, false]) {
        const remote = await new Promise<string | undefined>((resolve, reject) => {
          const s = connect({
            host: "never-resolved.invalid",
            port,
            autoSelectFamily,
            lookup: pinnedLookup(v4("127.0.0.1")),
          });
          s.once("connect", () => {
            resolve(s.remoteAddress);
            s.destroy();
          });
          s.once("error", reject);
        });
        assert.equal(remote, "127.0.0.1");
      }
    });
  });
});
