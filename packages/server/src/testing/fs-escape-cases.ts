import { type FsAccess, isReservedPath } from "@ums/protocol";
import fc from "fast-check";
import { resolveIn } from "../api/fs/paths.js";
import { LINK_NAMES, LINKS, OWNED_CANARY, RUN_CANARY, realOf, SANDBOX, type Spelling } from "./fs-escape-fixture.js";

// The generated cases of the path-escape suite (security/fs-escape-generated.test.ts): operations on
// paths made of /.unit's names, the planted links and noise, and the model's verdict on each.

export type Op = "read" | "list" | "write" | "delete" | "chmod" | "chown" | "copy" | "rename";
export const ACCESS: Record<Op, FsAccess> = {
  read: "read",
  list: "read",
  write: "write",
  delete: "write",
  chmod: "write",
  chown: "write",
  copy: "write",
  rename: "write",
};

export interface Case {
  op: Op;
  path: string;
  path2: string;
  workingDir: string;
  asRoot: boolean;
  recursive: boolean;
  /** How the query string spells the path. */
  spelling: Spelling;
  /** delete: the fields as query parameters instead of a JSON body. */
  query: boolean;
}

const segment = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.constantFrom(
      ".unit",
      "run",
      "agent.sock",
      "host.sock",
      "api.sock",
      RUN_CANARY,
      OWNED_CANARY,
      "logs",
      "services",
      "policy",
      "network.json",
      "checkpoints",
      "agent",
    ),
  },
  { weight: 6, arbitrary: fc.constantFrom(...LINK_NAMES) },
  { weight: 3, arbitrary: fc.constantFrom(".", "..", "") },
  { weight: 3, arbitrary: fc.constantFrom("tmp", "esc", "d", "f", "sub", "new", "proc", "self", "root", "1") },
  { weight: 1, arbitrary: fc.constantFrom("fifo", "s.sock") },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      "%2e",
      "%2e%2e",
      "%2F",
      "..%2f",
      "é",
      "日本語",
      "\u202e",
      "🙂",
      " ",
      "-n",
      "a".repeat(255),
      "b".repeat(256),
    ),
  },
  { weight: 1, arbitrary: fc.string({ unit: "grapheme", minLength: 1, maxLength: 6 }) },
  { weight: 1, arbitrary: fc.constantFrom("x\u0000y", "\u0000") },
);
const prefix = fc.constantFrom(
  "/",
  "//",
  "/./",
  `${SANDBOX}/`,
  `${SANDBOX}/d/`,
  `${SANDBOX}/d/../`,
  "/proc/self/root/",
  "/proc/1/root/",
  "/proc/1/root/../",
  "/proc/self/cwd/",
  `/proc/self/root${SANDBOX}/`,
  "", // relative: against workingDir
);
const tail = fc.constantFrom("", "", "", "/", "//", "/.");
/** Anything: a prefix and up to five segments of the vocabulary above. */
const randomPath = fc
  .tuple(prefix, fc.array(segment, { minLength: 0, maxLength: 5 }), tail)
  .map(([p, segs, t]) => `${p}${segs.join("/")}${t}`);
/** Paths that exist (in /.unit, or through the planted links), spelled with noise between their components. */
const BASES = [
  "/.unit",
  "/.unit/run",
  "/.unit/run/agent.sock",
  "/.unit/run/host.sock",
  `/.unit/run/${OWNED_CANARY}`,
  `/.unit/run/${RUN_CANARY}`,
  "/.unit/api.sock",
  "/.unit/bin/node",
  "/.unit/agent",
  "/.unit/logs",
  "/.unit/logs/services",
  "/.unit/policy",
  "/.unit/checkpoints",
  "/proc/self/root/.unit/run",
  "/proc/1/root/.unit",
  "/proc/self/cwd/.unit/run",
  "/proc/1/root/../.unit/run",
  SANDBOX,
  `${SANDBOX}/d`,
  `${SANDBOX}/d/f`,
  `${SANDBOX}/d/fifo`,
  `${SANDBOX}/d/s.sock`,
  ...Object.keys(LINKS).filter((p) => p.startsWith(SANDBOX)),
];
const separator = fc.constantFrom("/", "/", "/", "//", "/./", "/zz/../", `/${RUN_CANARY}/../`);
const structuredPath = fc
  .tuple(
    fc.constantFrom(...BASES),
    fc.array(separator, { minLength: 12, maxLength: 12 }),
    fc.array(
      fc.constantFrom("agent.sock", "host.sock", RUN_CANARY, OWNED_CANARY, "new", "f", "sub", "services", ".."),
      {
        maxLength: 2,
      },
    ),
    tail,
  )
  .map(([b, seps, suffix, t]) => {
    const comps = [...b.split("/").filter(Boolean), ...suffix];
    return comps.map((c, i) => `${seps[i] ?? "/"}${c}`).join("") + t;
  });
export const pathArb = fc.oneof({ weight: 3, arbitrary: structuredPath }, { weight: 2, arbitrary: randomPath });
export const caseArb: fc.Arbitrary<Case> = fc.record({
  op: fc.constantFrom<Op>("read", "list", "write", "delete", "chmod", "chown", "copy", "rename"),
  path: pathArb,
  path2: fc.oneof(pathArb, fc.constant(`${SANDBOX}/new`), fc.constant(`${SANDBOX}/d/sub`)),
  workingDir: fc.constantFrom(SANDBOX, "/", `${SANDBOX}/d`, "/.unit", `${SANDBOX}/to-run`, "/proc/1/root"),
  asRoot: fc.boolean(),
  recursive: fc.boolean(),
  spelling: fc.constantFrom<Spelling>("plain", "dots", "slashes"),
  query: fc.boolean(),
});

/** The directories the plant hangs from. */
export const PLANTED_DIRS = ["/", "/tmp", SANDBOX, `${SANDBOX}/d`];
/** Paths of the plant (and the directories above it): a case that deletes or renames one of them makes the model stale. */
export const PLANTED = [
  ...PLANTED_DIRS,
  `${SANDBOX}/d/sub`,
  ...Object.keys(LINKS).filter((p) => p.startsWith(SANDBOX)),
];
/** Whether a change of `real` (a delete, a rename) changes the plant: it is planted, or above something planted. */
export const touches = (planted: string[], real: string) =>
  planted.some((p) => p === real || p.startsWith(real === "/" ? "/" : `${real}/`));

/** The model's verdict on a path of a case: must the API refuse it, and where it lands (nofollow) when it may not. */
export const judge = (c: Case, path: string, follow: boolean, access: FsAccess) => {
  let lex: string;
  try {
    lex = resolveIn(c.workingDir, path);
  } catch {
    return { mustFail: true, real: "" }; // NUL: refused by the server (400)
  }
  const real = realOf(lex, follow, LINKS);
  const mustFail = isReservedPath(lex, access) || real === "ELOOP" || isReservedPath(real, access);
  return { mustFail, real };
};
