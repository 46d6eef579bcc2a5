import { type Compilable, CompiledQuery, type QueryResult } from "kysely";

/** What runs a compiled query: a Kysely instance or a transaction of any database. */
interface Executor {
  executeQuery<R>(query: CompiledQuery<R>): Promise<QueryResult<R>>;
}

/**
 * Runs a read synchronously on the database behind a Kysely instance, or says it cannot now
 * (undefined). The SQLite store has one (store/sqlite/store.ts): a read on its one connection
 * while no transaction is open on it needs none of Kysely's queueing, which costs more than the
 * read itself on the paths every request takes.
 */
export type DirectReader = (sql: string, values: readonly unknown[]) => unknown[] | undefined;

const directReaders = new WeakMap<object, DirectReader>();

/** Gives `prepared` queries on `db` (not on its transactions) a direct way to run their reads. */
export function registerDirectReader(db: object, reader: DirectReader): void {
  directReaders.set(db, reader);
}

/** The placeholder a prepared query's `i`th parameter is built with (no real value looks like it). */
const slot = (i: number) => `\u0000ums-prepared-parameter-${i}\u0000`;

interface Template {
  readonly sql: string;
  readonly parameters: readonly unknown[];
  /** For each bound parameter, the argument it takes (or -1: a constant of the query's shape). */
  readonly from: readonly number[];
}

function compileTemplate(built: Compilable<unknown>, arity: number): Template {
  const { sql, parameters } = built.compile();
  const from = parameters.map((p) => {
    for (let i = 0; i < arity; i++) if (p === slot(i)) return i;
    return -1;
  });
  for (let i = 0; i < arity; i++) {
    const uses = from.filter((f) => f === i).length;
    if (uses !== 1) throw new Error(`prepared query: argument ${i} is bound ${uses} times, not once: ${sql}`);
  }
  return { sql, parameters, from };
}

/**
 * A query of a fixed shape, built and compiled by Kysely once and then run with new arguments. On
 * the paths every request takes (its token, its unit), building and compiling a query cost more
 * than the database's own work (issue #16 part 2: about 80 µs a query, mostly in freezing the
 * builder's nodes). `build` is called once, with a placeholder (a string, whatever the argument's
 * type) for each argument, and each must end up as exactly one bound parameter (a value compared or
 * set); anything else throws at first use.
 * Results are the rows as Kysely returns them for the query's own `execute()` (Kysely's SQLite
 * driver returns the driver's rows as they are, which is what a direct read returns).
 */
export function prepared<A extends readonly unknown[], R>(
  db: Executor,
  arity: A["length"],
  build: (...args: A) => Compilable<R>,
): (...args: A) => Promise<R[]> {
  let template: Template | undefined;
  const direct = directReaders.get(db);
  return async (...args: A) => {
    template ??= compileTemplate(build(...(Array.from({ length: arity }, (_, i) => slot(i)) as unknown as A)), arity);
    const { sql, parameters, from } = template;
    const values = parameters.map((p, j) => {
      const i = from[j] as number;
      return i < 0 ? p : args[i];
    });
    const rows = direct?.(sql, values);
    if (rows) return rows as R[];
    const result = await db.executeQuery<R>(CompiledQuery.raw(sql, values));
    return result.rows as R[];
  };
}
