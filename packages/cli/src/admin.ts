// The host-admin commands (their names are in program.ts, NOT_USER): they load @ums/server, which only the
// host has. main.ts imports this module only for them (or for help), so user commands start fast.

export { ConfigError } from "@ums/server/config";
export { doctorCommand } from "./commands/doctor.js";
export { imageCommand } from "./commands/image.js";
export { installCommand } from "./commands/install.js";
export { keysCommand } from "./commands/keys.js";
export { nodeCommand } from "./commands/node.js";
export { orgCommand } from "./commands/org.js";
export { serveCommand } from "./commands/serve.js";
export { tokenCommand } from "./commands/token.js";
export { uninstallCommand } from "./commands/uninstall.js";
