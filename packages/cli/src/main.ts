#!/usr/bin/env node
// The `ums` command. A plain `ums exec NAME -- CMD` (the call a script or an agent makes most) takes
// the fast path, which loads neither commander nor the other commands; everything else, and any
// exec the fast path's parser does not take, is the whole command line's (cli-main.ts). bin/ums
// runs the same from one file for an exec (exec-main.ts, bundled by build.mjs).
import { execMain } from "./exec-main.js";

await execMain(() => import("./cli-main.js"));
