// `ums policy network …`, `ums completion`, and the contract every user command keeps
// (--help with examples, usage errors exit 2), against a real server.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { after, before, describe, it } from "node:test";
import { startUserCli, UMS, type UserCli } from "../testing/user-cli.js";

describe("ums policy network, completion, help", () => {
  let cli: UserCli;
  before(async () => {
    cli = await startUserCli();
    await cli.ok(["login", "--url", cli.server.url, "--token", await cli.token("policy-org")]);
    await cli.ok(["create", "guarded"]);
  });
  after(async () => {
    await cli?.close();
  });

  it("get, allow, deny, set from stdin, --clear; a bad rule is the server's 400 code", async () => {
    assert.match(await cli.ok(["policy", "network", "get", "guarded"]), /^no rules: nothing is enforced/);
    await cli.ok(["policy", "network", "allow", "guarded", "api.example.com", "*.example.org"]);
    const denied = JSON.parse(await cli.ok(["policy", "network", "deny", "guarded", "*", "--json"]));
    assert.deepEqual(denied.rules, [
      { action: "allow", domain: "api.example.com" },
      { action: "allow", domain: "*.example.org" },
      { action: "deny", domain: "*" },
    ]);
    const text = await cli.ok(["policy", "network", "get", "guarded"]);
    assert.match(text, /^#\s+ACTION\s+DOMAIN \/ INCLUDE$/m);
    assert.match(text, /^3\s+deny\s+\*$/m);

    const rules = { rules: [{ action: "allow", domain: "only.example.net" }] };
    await cli.ok(["policy", "network", "set", "guarded", "-"], { stdin: JSON.stringify(rules) });
    assert.deepEqual(JSON.parse(await cli.ok(["policy", "network", "get", "guarded", "--json"])), rules);

    const bad = await cli.run(["policy", "network", "allow", "guarded", "not a domain!"]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /^ums: UMS_NETWORK_POLICY_INVALID: .+\n$/);
    assert.deepEqual(JSON.parse(await cli.ok(["policy", "network", "get", "guarded", "--json"])), rules, "unchanged");
    const notJson = await cli.run(["policy", "network", "set", "guarded", "-"], { stdin: "rules: []" });
    assert.equal(notJson.code, 2);

    await cli.ok(["policy", "network", "set", "guarded", "--clear"]);
    assert.deepEqual(JSON.parse(await cli.ok(["policy", "network", "get", "guarded", "--json"])), { rules: [] });
  });

  it("completion bash completes commands, subcommands and options; zsh gives a compdef script", async () => {
    const script = await cli.ok(["completion", "bash"]);
    const complete = (words: string[]) =>
      execFileSync("bash", [
        "-c",
        `${script}\nCOMP_WORDS=(${words.map((w) => `'${w}'`).join(" ")}); COMP_CWORD=${words.length - 1}; _ums; echo "\${COMPREPLY[*]}"`,
      ])
        .toString()
        .trim();
    assert.equal(complete(["ums", "checkp"]), "checkpoint");
    assert.equal(complete(["ums", "checkpoint", "res"]), "restore");
    assert.equal(complete(["ums", "exec", "--ro"]), "--root");
    assert.deepEqual(complete(["ums", "ser"]).split(" ").sort(), ["serve", "service", "services"]);
    assert.match(await cli.ok(["completion", "zsh"]), /^#compdef ums\n/);
    assert.equal((await cli.run(["completion", "fish"])).code, 2);
  });

  it("every user command has --help with examples; usage mistakes exit 2 with one line", async () => {
    const commands = [
      ["login"],
      ["logout"],
      ["whoami"],
      ["create"],
      ["list"],
      ["info"],
      ["delete"],
      ["use"],
      ["exec"],
      ["console"],
      ["sessions"],
      ["attach"],
      ["kill"],
      ["cp"],
      ["ls"],
      ["rm"],
      ["checkpoint"],
      ["fork"],
      ["services"],
      ["service"],
      ["url"],
      ["policy"],
    ];
    for (const c of commands) {
      const help = await cli.ok([...c, "--help"]);
      assert.match(help, /\nExamples:\n {2}\$ ums /, `${c.join(" ")} --help`);
    }
    const top = execFileSync(UMS, ["--help"], { env: cli.env() }).toString();
    for (const name of ["serve", "token", "login", "exec", "console", "cp", "policy", "completion"]) {
      assert.match(top, new RegExp(`^  ${name} `, "m"), name);
    }
    const unknownOption = await cli.run(["list", "--nope"]);
    assert.equal(unknownOption.code, 2);
    assert.match(unknownOption.stderr, /^error: unknown option '--nope'\n/);
    const missing = await cli.run(["create"]);
    assert.equal(missing.code, 2);
  });
});
