// The entry of the CLI's V8 start-up snapshot (issue #13: `ums exec` in well under 150 ms). build.mjs
// bundles this file, with the SDK, the protocol and the libraries the user commands use, into one
// CommonJS script and runs `node --build-snapshot` on it: the modules are then loaded and compiled once,
// at build time, and a run starts from the heap they left (`node --snapshot-blob ums.blob -- ARGS`, see
// bin/ums). Only the user commands are in it: host-admin, help, completion and mcp run from the bundle.
// Node cannot hold node:http, node:https or node:tls in a snapshot: what needs them loads them when run.
import { startupSnapshot } from "node:v8";
import { addUserCommands, newProgram, runProgram } from "./program.js";

startupSnapshot.setDeserializeMainFunction(() => {
  // Node puts the first argument after `--` where a script's path would be: argv is [node, ...args].
  const argv = [process.argv[0] ?? "node", "ums", ...process.argv.slice(1)];
  const program = newProgram();
  addUserCommands(program);
  runProgram(program, argv).catch((err: unknown) => {
    process.stderr.write(`ums: ${err instanceof Error ? err.message : String(err)}\n`);
    process.exit(1);
  });
});
