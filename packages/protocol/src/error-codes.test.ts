// One list of error codes (issue #11): every `"UMS_…"` code the code of any package emits is an
// `ErrorCode`, an `AgentErrorCode` or (the SDK's own failures) an `SdkErrorCode`. Scans the sources of
// packages/*/src (tests aside) for UMS_ string literals; environment variable names (read as `env[…]`,
// `env.…` or passed with `env` to a reader) are not codes.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { AgentErrorCode, ErrorCode } from "./error-codes.js";

const packagesDir = fileURLToPath(new URL("../../", import.meta.url));
const sdkErrorsFile = join(packagesDir, "sdk", "src", "errors.ts");

const LITERAL = /(env\[\s*|env,\s*)?["'](UMS_[A-Z0-9_]+)["']/g;

/** The UMS_ literals of a source text that are not environment variable names. */
function codeLiterals(source: string): string[] {
  const found: string[] = [];
  for (const m of source.matchAll(LITERAL)) if (m[1] === undefined) found.push(m[2] as string);
  return found;
}

function* sources(dir: string): Generator<string> {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) yield* sources(p);
    else if (e.name.endsWith(".ts") && !e.name.endsWith(".test.ts") && !e.name.endsWith(".d.ts")) yield p;
  }
}

/** SdkErrorCode's values, read from the SDK's source (the SDK depends on protocol, not the reverse). */
function sdkCodes(): string[] {
  const text = readFileSync(sdkErrorsFile, "utf8");
  const block = /export const SdkErrorCode = \{([\s\S]*?)\} as const;/.exec(text)?.[1];
  assert.ok(block, `no SdkErrorCode declaration in ${sdkErrorsFile}`);
  return codeLiterals(block);
}

describe("error codes", () => {
  it("tells codes from environment variable names", () => {
    const source = `
      const a = { code: "UMS_MADE_UP" };
      if (code === 'UMS_OTHER') {}
      const b = intVar(env, "UMS_AGENT_UID", 1000);
      const c = env["UMS_TOKEN"];
      const d = process.env.UMS_URL;
    `;
    assert.deepEqual(codeLiterals(source), ["UMS_MADE_UP", "UMS_OTHER"]);
  });

  it("codes are unique, and the SDK's and the agent's own never collide with the server's", () => {
    const server = Object.values(ErrorCode);
    assert.equal(new Set(server).size, server.length);
    const sdk = sdkCodes();
    assert.ok(sdk.length > 0);
    for (const code of sdk) {
      assert.ok(code.startsWith("UMS_SDK_"), code);
      assert.ok(!server.includes(code as ErrorCode), code);
    }
    for (const code of server) assert.ok(!code.startsWith("UMS_SDK_"), code);
    for (const [name, code] of Object.entries(AgentErrorCode)) {
      const shared = (ErrorCode as Record<string, string>)[name];
      if (shared !== undefined) assert.equal(code, shared, `AgentErrorCode.${name} is ErrorCode.${name}`);
      else assert.ok(!server.includes(code as ErrorCode), `AgentErrorCode.${name} reuses a server code`);
    }
  });

  it("every code the sources emit is in the one list", () => {
    const known = new Set<string>([...Object.values(ErrorCode), ...Object.values(AgentErrorCode), ...sdkCodes()]);
    const files = readdirSync(packagesDir).flatMap((pkg) => {
      try {
        return [...sources(join(packagesDir, pkg, "src"))];
      } catch {
        return []; // not a package with sources
      }
    });
    const unknown: string[] = [];
    let literals = 0;
    for (const file of files) {
      for (const code of codeLiterals(readFileSync(file, "utf8"))) {
        literals++;
        if (!known.has(code)) unknown.push(`${relative(packagesDir, file)}: ${code}`);
      }
    }
    assert.ok(
      files.length > 100 && literals > 20,
      `scanned ${files.length} files, ${literals} literals: is ${packagesDir} right?`,
    );
    assert.deepEqual(unknown, [], "codes not in ErrorCode, AgentErrorCode or SdkErrorCode");
  });
});
