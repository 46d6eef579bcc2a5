// What the soak client was told (acknowledged) and what may be true after an operation that did not
// answer (a kill in flight): every fact is a set of allowed values, widened before a request is
// sent and narrowed to one when the server acknowledges it or a read shows which one happened.

/** A file's allowed contents; `null` means "absent". */
export type Allowed = Set<string | null>;
export type Files = Map<string, Allowed>;

export const copyFiles = (f: Files): Files => new Map([...f].map(([k, v]) => [k, new Set(v)]));

/** The files one of `a` or `b` may be (an operation between them that may or may not have happened). */
export function unionFiles(a: Files, b: Files): Files {
  const out = copyFiles(a);
  for (const [path, vals] of b) {
    const cur = out.get(path) ?? new Set([null]);
    for (const v of vals) cur.add(v);
    out.set(path, cur);
  }
  for (const [path, cur] of out) if (!b.has(path)) cur.add(null);
  return out;
}

/** The one content of a file when it is known, else undefined. */
export function known(a: Allowed | undefined): string | null | undefined {
  return a?.size === 1 ? [...a][0] : undefined;
}

export interface CheckpointModel {
  readonly files: Files;
  /** A delete of it was sent and not acknowledged: it may be gone. */
  maybeDeleted: boolean;
}

export interface UnitModel {
  readonly name: string;
  id: string | undefined;
  /** A create or fork was sent and not acknowledged (or a delete sent): it may or may not exist. */
  maybe: boolean;
  /** Files of this run under /home/unit/soak (by name there). */
  files: Files;
  /** Acknowledged checkpoints by id. */
  readonly checkpoints: Map<string, CheckpointModel>;
  /** A checkpoint (or restore, whose backup is one) was sent and not acknowledged: its files. */
  pendingCheckpoint: Files | undefined;
  /** Service names the server acknowledged; undefined when unknown (after a restore or fork). */
  services: Set<string> | undefined;
  /** An operation holds the unit (one at a time per unit keeps the model exact). */
  busy: boolean;
  /** Operations started on this unit so far (the chaos check skips a unit one touched meanwhile). */
  ops: number;
}

export function newUnit(name: string, files: Files = new Map()): UnitModel {
  return {
    name,
    id: undefined,
    maybe: true,
    files,
    checkpoints: new Map(),
    pendingCheckpoint: undefined,
    services: new Set(),
    busy: false,
    ops: 0,
  };
}
