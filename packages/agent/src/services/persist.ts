import { closeSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, writeSync } from "node:fs";
import { dirname, join } from "node:path";
import type { ServiceDefinition } from "./definition.js";

// Service definitions live with the unit's state (docs/ARCHITECTURE.md section 5): a root-owned JSON file on the
// unit's own filesystem (/var/lib/ums/services.json), so checkpoints carry it and every boot starts
// the services again. `stopped` is the sticky stop: such a service waits for an explicit start.

export interface StoredService {
  def: ServiceDefinition;
  stopped: boolean;
}

export interface ServicesFile {
  version: 1;
  services: Record<string, StoredService>;
}

export function loadServices(path: string): Map<string, StoredService> {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch {
    return new Map();
  }
  const parsed = JSON.parse(text) as ServicesFile;
  return new Map(Object.entries(parsed.services ?? {}));
}

/** Writes the file atomically: a temp file, fsync, rename over the old one, fsync of the directory. */
export function saveServices(path: string, services: ReadonlyMap<string, StoredService>): void {
  const dir = dirname(path);
  mkdirSync(dir, { recursive: true, mode: 0o755 });
  const body: ServicesFile = { version: 1, services: Object.fromEntries(services) };
  const tmp = join(dir, `.services.json.${process.pid}.tmp`);
  const fd = openSync(tmp, "w", 0o600);
  try {
    writeSync(fd, `${JSON.stringify(body, null, 1)}\n`);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, path);
  const dfd = openSync(dir, "r");
  try {
    fsyncSync(dfd);
  } finally {
    closeSync(dfd);
  }
}
