import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { parseFastExec } from "./fast-exec-args.js";

describe("the ums exec fast path's parser", () => {
  it("takes NAME, its options in any order and in both spellings, and the command after --", () => {
    assert.deepEqual(
      parseFastExec([
        "-e",
        "A=1",
        "web",
        "--env=B=2",
        "-w",
        "/tmp",
        "--root",
        "--timeout",
        "5s",
        "--context=prod",
        "--",
        "sh",
        "-c",
        "x -- y",
      ]),
      {
        name: "web",
        context: "prod",
        command: ["sh", "-c", "x -- y"],
        env: ["A=1", "B=2"],
        cwd: "/tmp",
        root: true,
        timeout: "5s",
      },
    );
    assert.deepEqual(parseFastExec(["--", "true"]), {
      name: undefined,
      context: undefined,
      command: ["true"],
      env: [],
      cwd: undefined,
      root: false,
      timeout: undefined,
    });
  });

  it("leaves to the whole command line what it does not plainly take", () => {
    for (const line of [
      ["web", "true"], // no --
      ["web", "--"], // nothing after --
      ["-t", "web", "--", "top"], // a terminal
      ["--tty", "web", "--", "top"],
      ["--help"],
      ["web", "-h", "--", "true"],
      ["web", "other", "--", "true"], // two NAMEs
      ["web", "--bogus", "--", "true"],
      ["web", "-rt", "--", "true"], // combined short flags
      ["web", "-e", "--", "true"], // a value missing
      ["web", "-w", "-x", "--", "true"], // a value that looks like a flag
      ["web", "--cwd", "/a", "--cwd", "/b", "--", "true"], // given twice
      ["", "--", "true"],
    ]) {
      assert.equal(parseFastExec(line), undefined, JSON.stringify(line));
    }
  });
});
