import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { FastifyBaseLogger } from "fastify";
import pino from "pino";
import { resolveConfig } from "../config.js";
import { type AppDeps, buildApp } from "./app.js";

/**
 * A stand-in for a dependency the OpenAPI document does not need: reading a property gives another
 * stand-in, calling one throws. Building the routes only passes dependencies around; a route that
 * used one while being registered would fail here loudly instead of booting a unit.
 */
function unused(name: string): never {
  const stub: object = new Proxy(() => {}, {
    get: (_t, key) => (typeof key === "symbol" || key === "then" ? undefined : unused(`${name}.${key}`)),
    apply: () => {
      throw new Error(`the OpenAPI document is built without units, but registering the routes called ${name}()`);
    },
    construct: () => {
      throw new Error(`the OpenAPI document is built without units, but registering the routes made a new ${name}`);
    },
  });
  return stub as never;
}

/**
 * The OpenAPI 3.1 document the server serves at `GET /v1/openapi.json`, built in-process from the
 * route schemas with default configuration (no environment), a silent logger and every other
 * dependency (store, runtime, lifecycle, connectors, …) a stand-in: nothing boots a unit, opens a
 * database or listens. `scripts/api-reference.mjs` renders it into `docs/API.md`.
 */
export async function openApiDocument(): Promise<Record<string, unknown>> {
  const dataDir = await mkdtemp(join(tmpdir(), "ums-openapi-"));
  try {
    const given: Partial<AppDeps> = {
      config: resolveConfig({ dataDir }, {}),
      logger: pino({ level: "silent" }) as FastifyBaseLogger,
    };
    const deps = new Proxy(given, {
      get: (t, key) => (typeof key === "string" && !(key in t) ? unused(key) : Reflect.get(t, key)),
    }) as AppDeps;
    const app = await buildApp(deps);
    try {
      return app.swagger() as unknown as Record<string, unknown>;
    } finally {
      await app.close();
    }
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
}
