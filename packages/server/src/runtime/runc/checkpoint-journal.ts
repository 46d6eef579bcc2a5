import { existsSync } from "node:fs";
import { readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { writeFileDurably } from "../../util/durable-file.js";

/**
 * The restore journal, `restore.json` in the unit's disk directory: which checkpoint a restore
 * puts in place and how far it got (restore.ts). `replacing` until the new files are at rootfs,
 * then `replaced`.
 */
export interface RestoreJournal {
  readonly checkpoint: string;
  readonly phase: "replacing" | "replaced";
  /** An upgrade (upgrade.ts): the image build whose system files the new disk has. */
  readonly image?: { readonly id: string; readonly version: string };
}

const FILE = "restore.json";
const TMP = "restore.json.tmp";

export function hasJournal(dir: string): boolean {
  return existsSync(join(dir, FILE));
}

/** Replaces the journal atomically and durably (written aside, synced, renamed over, dir synced). */
export async function writeJournal(dir: string, entry: RestoreJournal): Promise<void> {
  await writeFileDurably(join(dir, FILE), JSON.stringify(entry), { tmp: join(dir, TMP) });
}

/** Undefined when the journal is unreadable (torn write of the first phase): roll back. */
export async function readJournal(dir: string): Promise<RestoreJournal | undefined> {
  try {
    const entry = JSON.parse(await readFile(join(dir, FILE), "utf8")) as Partial<RestoreJournal>;
    if (typeof entry.checkpoint !== "string") return undefined;
    const image =
      typeof entry.image?.id === "string" && typeof entry.image.version === "string"
        ? { id: entry.image.id, version: entry.image.version }
        : undefined;
    return {
      checkpoint: entry.checkpoint,
      phase: entry.phase === "replaced" ? "replaced" : "replacing",
      ...(image && { image }),
    };
  } catch {
    return undefined;
  }
}

export async function removeJournal(dir: string): Promise<void> {
  await rm(join(dir, FILE), { force: true });
}

/** A journal written aside that a crash kept from being renamed in. */
export async function removeJournalLeftover(dir: string): Promise<void> {
  await rm(join(dir, TMP), { force: true });
}
