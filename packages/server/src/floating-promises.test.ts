// Keeps floating promises out of the server (issue #11, issue #19 finding 6): every promise in
// packages/server/src (tests aside) is awaited, returned, stored or ends in `.catch`; no async
// callback goes where its promise is ignored (a listener, a timer). See testing/floating-promises.ts.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { type Finding, findFloatingPromises } from "./testing/floating-promises.js";

/**
 * The floating promises that are safe, each with why. `file` is relative to packages/server/src;
 * `code` a piece of the finding's code. An entry that matches nothing any more fails the test.
 */
const ALLOWED: readonly { file: string; code: string; why: string }[] = [
  {
    file: "util/keyed-mutex.ts",
    code: "void tail.then(",
    why: "`tail` is `next.catch(() => {})`, which never rejects, and the callback only deletes from a Map",
  },
  {
    file: "node/local/internal-api/host-sockets.ts",
    code: "void this.restore(unit, cp.id)",
    why: "restore() catches and logs every error of its own",
  },
];

const serverDir = fileURLToPath(new URL("..", import.meta.url));

function compilerOptions(): { files: string[]; options: ts.CompilerOptions } {
  const config = ts.readConfigFile(join(serverDir, "tsconfig.json"), ts.sys.readFile);
  const parsed = ts.parseJsonConfigFileContent(config.config, ts.sys, serverDir);
  return { files: parsed.fileNames, options: parsed.options };
}

const where = (f: Finding) => `${relative(join(serverDir, "src"), f.file)}:${f.line} ${f.why}: ${f.code}`;

describe("floating promises", () => {
  it("the check finds each kind, and passes what is handled", () => {
    const dir = mkdtempSync(join(tmpdir(), "ums-floating-"));
    try {
      const file = join(dir, "fixture.ts");
      writeFileSync(
        file,
        [
          "declare function later(cb: () => void): void;",
          "declare const emitter: { on(event: string, listener: (x: number) => void): void };",
          "async function work(): Promise<number> { return 1; }",
          "export async function cases(): Promise<unknown> {",
          "  work();", // 5: floating
          "  void work();", // 6: void drops it
          "  work().then((n) => n, () => 0);", // 7: a throw in onFulfilled is not handled
          "  later(() => void work());", // 8: void in a timer callback
          "  emitter.on('x', async () => { await work(); });", // 9: async listener
          "  later(() => work());", // 10: promise returned to a caller that ignores it
          "  await work();",
          "  work().catch(() => {});",
          "  later(() => void work().catch(() => {}));",
          "  let stored: Promise<number> | undefined;",
          "  stored ??= work();",
          "  stored = work();",
          "  return work();",
          "}",
        ].join("\n"),
      );
      const found = findFloatingPromises([file], {
        strict: true,
        target: ts.ScriptTarget.ES2022,
        lib: ["lib.es2023.d.ts"],
        types: [],
        noEmit: true,
      });
      assert.deepEqual(
        found.map((f) => f.line),
        [5, 6, 7, 8, 9, 10],
        found.map((f) => `${f.line}: ${f.why}: ${f.code}`).join("\n"),
      );
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("packages/server/src has none but the allowed ones", { timeout: 240_000 }, () => {
    const { files, options } = compilerOptions();
    const product = files.filter((f) => !f.endsWith(".test.ts"));
    assert.ok(product.length > 50, `found ${product.length} source files under ${serverDir}`);
    const findings = findFloatingPromises(product, options);
    const allowed = (f: Finding) =>
      ALLOWED.some((a) => relative(join(serverDir, "src"), f.file) === a.file && f.code.includes(a.code));
    assert.deepEqual(findings.filter((f) => !allowed(f)).map(where), [], "handle these promises' rejections");
    const stale = ALLOWED.filter(
      (a) => !findings.some((f) => relative(join(serverDir, "src"), f.file) === a.file && f.code.includes(a.code)),
    );
    assert.deepEqual(stale, [], "allowed entries that match nothing any more: remove them");
  });
});
