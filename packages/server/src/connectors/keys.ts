/** The key management entry point for the CLI (`ums keys rotate`). */
export { addKeyVersion, loadSecretBox, masterKeyPath } from "./secrets/master-key.js";
export { resealAll } from "./secrets/rotate.js";
