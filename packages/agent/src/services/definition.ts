import { AgentErrorCode } from "@ums/protocol/error-codes";
// Service definitions (spec 2.7) as the agent keeps them, and the checks a create/update must pass
// before anything changes (spec 4.6: 400 for a bad body; `needs` must name existing services and
// form no cycle; ums: one `http_port` per unit, else 409).

export interface ServiceDefinition {
  cmd: string;
  args: string[];
  needs: string[];
  dir?: string;
  env?: Record<string, string>;
  http_port?: number | null;
}

export const NAME_RE = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/;
const KEYS = new Set(["cmd", "args", "needs", "dir", "env", "http_port"]);

export type Checked =
  | { ok: true; def: ServiceDefinition }
  | { ok: false; status: 400 | 409; errors: string[]; code: string };

/**
 * Parses and checks a ServiceRequest body for service `name` against the other definitions
 * (`loading`: a stored definition, whose needs are resolved against the whole set later).
 */
export function checkDefinition(
  name: string,
  body: unknown,
  others: ReadonlyMap<string, ServiceDefinition>,
  opts: { loading?: boolean } = {},
): Checked {
  const errors: string[] = [];
  const bad = (e: string): Checked => ({ ok: false, status: 400, errors: [e], code: AgentErrorCode.Validation });
  if (!NAME_RE.test(name)) return bad("name: must be 1-63 letters, digits, '.', '_' or '-', not starting with '.'");
  if (typeof body !== "object" || body === null || Array.isArray(body)) return bad("body: must be a JSON object");
  const b = body as Record<string, unknown>;
  for (const k of Object.keys(b)) if (!KEYS.has(k)) errors.push(`${k}: unknown field`);
  if (typeof b.cmd !== "string" || b.cmd === "") errors.push("cmd: is required (the executable to run)");
  const args = strings(b.args, "args", errors);
  const needs = strings(b.needs, "needs", errors);
  if (b.dir !== undefined && (typeof b.dir !== "string" || b.dir === ""))
    errors.push("dir: must be a non-empty string");
  let env: Record<string, string> | undefined;
  if (b.env !== undefined) {
    if (typeof b.env !== "object" || b.env === null || Array.isArray(b.env)) errors.push("env: must be an object");
    else {
      env = {};
      for (const [k, v] of Object.entries(b.env)) {
        if (k === "" || k.includes("=") || k.includes("\0"))
          errors.push(`env: invalid variable name ${JSON.stringify(k)}`);
        else if (typeof v !== "string" || v.includes("\0")) errors.push(`env.${k}: must be a string without NUL`);
        else env[k] = v;
      }
    }
  }
  const port = b.http_port;
  if (
    port !== undefined &&
    port !== null &&
    !(Number.isInteger(port) && (port as number) >= 1 && (port as number) <= 65535)
  )
    errors.push("http_port: must be an integer from 1 to 65535, or null");
  for (const s of [b.cmd, b.dir, ...args])
    if (typeof s === "string" && s.includes("\0")) errors.push("cmd/args/dir: must not contain NUL");
  for (const n of opts.loading ? [] : needs) {
    if (n === name) errors.push(`needs: a service cannot need itself ('${n}')`);
    else if (!others.has(n)) errors.push(`needs: unknown service '${n}'`);
  }
  if (errors.length > 0) return { ok: false, status: 400, errors, code: AgentErrorCode.Validation };
  const def: ServiceDefinition = { cmd: b.cmd as string, args, needs: [...new Set(needs)] };
  if (b.dir !== undefined) def.dir = b.dir as string;
  if (env) def.env = env;
  if (port !== undefined) def.http_port = port as number | null;
  const all = new Map(others);
  all.set(name, def);
  const cycle = opts.loading ? null : findCycle(all);
  if (cycle) return bad(`needs: would form a cycle (${cycle.join(" → ")})`);
  if (typeof def.http_port === "number") {
    for (const [other, d] of others) {
      if (other !== name && d.http_port === def.http_port)
        return {
          ok: false,
          status: 409,
          errors: [`http_port: ${def.http_port} is already the HTTP port of service '${other}'`],
          code: AgentErrorCode.ServicePortTaken,
        };
    }
  }
  return { ok: true, def };
}

function strings(v: unknown, field: string, errors: string[]): string[] {
  if (v === undefined || v === null) return [];
  if (!Array.isArray(v) || v.some((x) => typeof x !== "string")) {
    errors.push(`${field}: must be an array of strings`);
    return [];
  }
  return v as string[];
}

/** A cycle in the `needs` graph as a path (first = last), or null. */
export function findCycle(defs: ReadonlyMap<string, Pick<ServiceDefinition, "needs">>): string[] | null {
  const state = new Map<string, 1 | 2>();
  const stack: string[] = [];
  const visit = (n: string): string[] | null => {
    if (state.get(n) === 2) return null;
    if (state.get(n) === 1) return [...stack.slice(stack.indexOf(n)), n];
    state.set(n, 1);
    stack.push(n);
    for (const m of defs.get(n)?.needs ?? []) {
      if (!defs.has(m)) continue;
      const c = visit(m);
      if (c) return c;
    }
    stack.pop();
    state.set(n, 2);
    return null;
  };
  for (const n of [...defs.keys()].sort()) {
    const c = visit(n);
    if (c) return c;
  }
  return null;
}

/** Names in an order where every service comes after the ones it needs (ties by name). */
export function startOrder(defs: ReadonlyMap<string, Pick<ServiceDefinition, "needs">>): string[] {
  const out: string[] = [];
  const done = new Set<string>();
  const visit = (n: string, path: Set<string>) => {
    if (done.has(n) || path.has(n) || !defs.has(n)) return;
    path.add(n);
    for (const m of [...(defs.get(n)?.needs ?? [])].sort()) visit(m, path);
    path.delete(n);
    done.add(n);
    out.push(n);
  };
  for (const n of [...defs.keys()].sort()) visit(n, new Set());
  return out;
}
