export { type Check, type DoctorOpts, doctor } from "./doctor.js";
export { serversOn } from "./running.js";
export {
  DEFAULT_UNIT_DIR,
  installService,
  removeService,
  SERVICE_NAME,
  serviceUnit,
  systemdRunning,
} from "./systemd.js";
export { ServerRunningError, type UninstallOpts, type UninstallReport, uninstall } from "./uninstall.js";
