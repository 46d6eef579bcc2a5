import { randomBytes } from "node:crypto";

// Event ids (docs/EVENTS.md): `evt_` + the time in ms (9 base-36 digits) + a sequence number
// within that ms (4 base-36 digits) + 6 random hex digits. Ids of one organization increase in the
// order its events are recorded, so a string comparison orders them, and a reader that has seen an
// id can ask for what came after it.

const SEQ_SPAN = 36 ** 4;

/** Whether an id has the shape of the ids this log issues (a `since` or a continuation token). */
export function isEventId(id: string): boolean {
  return /^evt_[0-9a-z]{13}[0-9a-f]{6}$/.test(id);
}

/** The id of the `seq`-th event of millisecond `ms`. */
export function eventId(ms: number, seq: number): string {
  return `evt_${ms.toString(36).padStart(9, "0")}${seq.toString(36).padStart(4, "0")}${randomBytes(3).toString("hex")}`;
}

/** The time and sequence an id was made of. */
function parts(id: string): { ms: number; seq: number } {
  return { ms: Number.parseInt(id.slice(4, 13), 36), seq: Number.parseInt(id.slice(13, 17), 36) };
}

/**
 * An id larger than `last` (issue #15: an organization's events recorded by several processes
 * whose clocks differ; the database serialises them, and an id not larger than the last one
 * recorded takes the next after it): the next sequence number of its millisecond, or the next
 * millisecond's first.
 */
export function eventIdAfter(last: string): string {
  const { ms, seq } = parts(last);
  return seq + 1 < SEQ_SPAN ? eventId(ms, seq + 1) : eventId(ms + 1, 0);
}

/** The smallest id of millisecond `ms`: every event recorded at or after it has an id above it. */
export function eventIdFloor(ms: number): string {
  return `evt_${Math.max(0, ms).toString(36).padStart(9, "0")}0000000000`;
}

/** Issues increasing ids in one process. */
export class EventIds {
  private lastMs = 0;
  private seq = 0;

  next(now: number): string {
    if (now > this.lastMs) {
      this.lastMs = now;
      this.seq = 0;
    } else {
      this.seq += 1;
      if (this.seq >= SEQ_SPAN) {
        this.lastMs += 1;
        this.seq = 0;
      }
    }
    return eventId(this.lastMs, this.seq);
  }
}
