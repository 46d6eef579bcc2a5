/** Test utilities shared by the packages' suites (not part of the server's API). */

export { dockerSaveArchive, makeTar } from "../runtime/image/oci/test-archives.js";
export { testDialects } from "./dialects.js";
export { type FakeInternet, startFakeInternet } from "./fake-internet.js";
export { freePort } from "./free-port.js";
export { cleanupStoppedServer, deleteUnitDisk, removeServerHostResources, testServeEnv } from "./host-cleanup.js";
export { lockSubnet, TEST_NETWORK_ENV } from "./runtime.js";
export { prepareServe, type ServeProcess, UMS_BIN } from "./serve-process.js";
export { startTestServer } from "./server.js";
export { tinyRootfs } from "./tiny-rootfs.js";
