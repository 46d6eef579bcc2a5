// `ums events` (issue #17): the organization's lifecycle events as a table, as JSON, filtered, and
// followed with -f (the stored ones, then new ones as they happen).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { startUserCli, UMS, type UserCli } from "../testing/user-cli.js";

describe("ums events", { timeout: 120_000 }, () => {
  let cli: UserCli;
  before(async () => {
    cli = await startUserCli();
    await cli.ok(["login", "--url", cli.server.url, "--token", await cli.token("events-org")]);
  });
  after(async () => {
    await cli?.close();
  });

  it("lists events as a table and as JSON, filtered by unit and type; a bad type is refused", async () => {
    await cli.ok(["create", "seen"]);
    await cli.ok(["delete", "seen", "--yes"]);
    const text = await cli.ok(["events", "--unit", "seen"]);
    assert.match(text, /^TIME\s+TYPE\s+UNIT\s+ACTOR\s+DATA$/m);
    assert.match(text, /unit\.created\s+seen\s+token:tok_/);
    assert.match(text, /unit\.deleted\s+seen/);
    const json = JSON.parse(await cli.ok(["events", "--type", "unit.deleted", "--json"]));
    assert.deepEqual(
      json.map((e: { type: string; unit: string }) => `${e.type} ${e.unit}`),
      ["unit.deleted seen"],
    );
    const bad = await cli.run(["events", "--type", "unit.exploded"]);
    assert.notEqual(bad.code, 0);
    assert.match(bad.stderr, /unknown event type 'unit\.exploded'/);
  });

  it("-f prints the stored events, then new ones as they happen", async () => {
    const child = spawn(UMS, ["events", "-f", "--json", "--limit", "1"], {
      env: cli.env(),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout.setEncoding("utf8").on("data", (d: string) => {
      out += d;
    });
    const exited = new Promise<number | null>((r) => child.on("exit", (code) => r(code)));
    try {
      const lines = () =>
        out
          .split("\n")
          .filter((l) => l !== "")
          .map((l) => JSON.parse(l) as { type: string; unit: string });
      const wait = async (n: number) => {
        const deadline = Date.now() + 30_000;
        while (lines().length < n) {
          assert.ok(Date.now() < deadline, `only ${lines().length} lines: ${out}`);
          await new Promise((r) => setTimeout(r, 100));
        }
      };
      await wait(1);
      assert.equal(lines()[0]?.type, "unit.deleted", "the last stored event first");
      await cli.ok(["create", "followed"]);
      await wait(2);
      assert.deepEqual(lines()[1], { ...lines()[1], type: "unit.created", unit: "followed" });
    } finally {
      child.kill("SIGINT");
      await exited;
    }
  });
});
