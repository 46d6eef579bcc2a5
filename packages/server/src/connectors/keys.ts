/** The key management entry point for the CLI (`ums keys rotate`). */
export { addKeyVersion, loadSecretBox, masterKeyPath } from "./master-key.js";
export { resealAll } from "./rotate.js";
