import type { UnitRecord } from "../../store/records.js";

/** Spec 4.1: the port a unit's HTTP traffic goes to when no service claims one with `http_port`. */
export const DEFAULT_HTTP_PORT = 8080;

/**
 * The unit's HTTP target port. Services (issue 4, item 2) will make the `http_port` service the
 * target; until then every unit answers on 8080. Async so that it can ask the agent or the store.
 */
export type HttpTargetPort = (unit: UnitRecord) => Promise<number> | number;

export const defaultHttpTargetPort: HttpTargetPort = () => DEFAULT_HTTP_PORT;
