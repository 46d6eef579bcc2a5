import { existsSync } from "node:fs";
import { chmod, mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { run } from "../runtime/exec/host-command.js";

export const SERVICE_NAME = "ums.service";
export const DEFAULT_UNIT_DIR = "/etc/systemd/system";

export interface ServiceOpts {
  /** The `ums` launcher to run (absolute). */
  readonly bin: string;
  readonly dataDir: string;
  /** More `ums serve` arguments (e.g. `--listen 0.0.0.0:7070`). */
  readonly args?: readonly string[];
}

/** Quotes a word for a systemd command line (systemd.syntax(7)): only when it needs it. */
function quote(word: string): string {
  return /^[\w@%+=:,./-]+$/.test(word) ? word : `"${word.replace(/(["\\])/g, "\\$1")}"`;
}

/**
 * The unit file of `ums serve` (systemd.service(5)). Restarts on failure; units outlive a restart
 * of the server (they run in their own cgroups, ums-<rid>, not the service's: KillMode=mixed only
 * ends what runs in the service's own). Logs go to the journal, as JSON lines.
 */
export function serviceUnit(o: ServiceOpts): string {
  const exec = [o.bin, "serve", "--data-dir", resolve(o.dataDir), ...(o.args ?? [])].map(quote).join(" ");
  return `# Written by \`ums install\`; \`ums uninstall\` removes it.
[Unit]
Description=ums, the Unit Management Service
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
ExecStart=${exec}
Environment=UMS_LOG_FORMAT=json
Restart=on-failure
RestartSec=2s
KillMode=mixed
TimeoutStopSec=30s
LimitNOFILE=1048576
StandardOutput=journal
StandardError=journal

[Install]
WantedBy=multi-user.target
`;
}

/** Whether systemd is the running init (sd_booted(3): /run/systemd/system exists). */
export function systemdRunning(): boolean {
  return existsSync("/run/systemd/system");
}

export interface InstallResult {
  readonly file: string;
  /** What was done with systemd, or why not. */
  readonly systemd: string;
}

/** Writes the unit file into `unitDir` and, when systemd runs and `start`, enables and starts it. */
export async function installService(o: ServiceOpts & { unitDir: string; start: boolean }): Promise<InstallResult> {
  await mkdir(o.unitDir, { recursive: true });
  const file = join(o.unitDir, SERVICE_NAME);
  await writeFile(file, serviceUnit(o));
  await chmod(file, 0o644);
  if (!o.start) return { file, systemd: "not enabled (--no-start)" };
  if (!systemdRunning()) {
    return {
      file,
      systemd:
        "systemd is not running on this host: start `ums serve` with your init system (docs/OPERATIONS.md, hosts without systemd)",
    };
  }
  await run("systemctl", ["daemon-reload"]);
  await run("systemctl", ["enable", "--now", SERVICE_NAME]);
  return { file, systemd: "enabled and started (systemctl status ums; journalctl -u ums)" };
}

/** Stops, disables and removes the unit file, if it is there; says what it did. */
export async function removeService(unitDir: string): Promise<string | undefined> {
  const file = join(unitDir, SERVICE_NAME);
  if (!existsSync(file)) return undefined;
  if (!(await readFile(file, "utf8")).includes("Written by `ums install`")) {
    return `${file} was not written by ums install; left as it is`;
  }
  if (systemdRunning()) {
    await run("systemctl", ["disable", "--now", SERVICE_NAME]).catch(() => {});
  }
  await rm(file, { force: true });
  if (systemdRunning()) await run("systemctl", ["daemon-reload"]).catch(() => {});
  return `the service file ${file}`;
}
