// `ums exec` without commander (issue #13: the CLI's start-up is most of what a short exec costs, and
// commander with every command's module is most of the CLI's). main.ts reads the line with this
// parser first; anything it does not take as plainly valid (a TTY, help, an unknown or malformed
// option, a missing `--`) goes to the whole command line, which runs it or explains the mistake
// exactly as before. No imports: main.ts loads it before anything else.

export interface FastExec {
  /** NAME when given (else the context's default unit). */
  name: string | undefined;
  context: string | undefined;
  command: string[];
  env: string[];
  cwd: string | undefined;
  root: boolean;
  /** The `--timeout` value as given (fast-exec.ts parses it). */
  timeout: string | undefined;
}

/** What `ums exec` options take a value, by every name commander knows them by. */
const VALUE_OPTIONS: Record<string, "env" | "cwd" | "timeout" | "context"> = {
  "-e": "env",
  "--env": "env",
  "-w": "cwd",
  "--cwd": "cwd",
  "--timeout": "timeout",
  "--context": "context",
};

/** The words after `exec`: the run, or undefined when the whole command line should handle it. */
export function parseFastExec(args: readonly string[]): FastExec | undefined {
  const dash = args.indexOf("--");
  if (dash < 0 || dash === args.length - 1) return undefined;
  const out: FastExec = {
    name: undefined,
    context: undefined,
    command: args.slice(dash + 1),
    env: [],
    cwd: undefined,
    root: false,
    timeout: undefined,
  };
  const before = args.slice(0, dash);
  for (let i = 0; i < before.length; i++) {
    const word = before[i] as string;
    if (!word.startsWith("-")) {
      if (out.name !== undefined || word === "") return undefined; // one NAME at most
      out.name = word;
      continue;
    }
    if (word === "--root") {
      out.root = true;
      continue;
    }
    const eq = word.startsWith("--") ? word.indexOf("=") : -1;
    const flag = eq > 0 ? word.slice(0, eq) : word;
    const key = VALUE_OPTIONS[flag];
    if (!key) return undefined; // -t, --help, combined or unknown flags: the whole parser's
    let value: string | undefined;
    if (eq > 0) value = word.slice(eq + 1);
    else {
      value = before[i + 1];
      i++;
    }
    if (value === undefined || value.startsWith("-")) return undefined;
    if (key === "env") out.env.push(value);
    else if (out[key] !== undefined)
      return undefined; // given twice: let commander decide
    else out[key] = value;
  }
  return out;
}
