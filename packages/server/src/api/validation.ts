import { Ajv, type Options } from "ajv";
import addFormats from "ajv-formats";
import type { FastifySchemaCompiler } from "fastify";
import type { FastifySchemaValidationError } from "fastify/types/schema.js";
import { ApiError } from "../errors/api-error.js";
import { formatValidationErrors } from "../errors/validation-messages.js";

/**
 * Two validators: query strings, params and headers arrive as text and are coerced to the
 * declared types; JSON bodies are checked strictly, so `{"name": 5}` is an error, not "5".
 * The `x-message` keyword lets a schema say, in words, what a valid value looks like.
 */
function makeAjv(coerce: boolean): Ajv {
  const opts: Options = {
    allErrors: true,
    verbose: true,
    coerceTypes: coerce ? "array" : false,
    useDefaults: true,
    removeAdditional: false,
    strict: false,
  };
  const ajv = new Ajv(opts);
  addFormats.default(ajv);
  ajv.addKeyword({ keyword: "x-message", schemaType: "string" });
  return ajv;
}

const bodyAjv = makeAjv(false);
const textAjv = makeAjv(true);

type Check = ((data: unknown) => boolean) & { errors?: FastifySchemaValidationError[] | null };

/**
 * A route's validator, compiled at its first request rather than when the server starts (issue #16:
 * compiling every route's schemas took about 0.45 s of each `ums serve` start, and most routes of a
 * short-lived server never see a request). Its `errors` are those of its last call, as fastify reads them.
 */
function lazyCheck(compile: () => Check): Check {
  let fn: Check | undefined;
  const check: Check = (data) => {
    fn ??= compile();
    const ok = fn(data);
    check.errors = fn.errors ?? null;
    return ok;
  };
  return check;
}

export const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) =>
  lazyCheck(() => (httpPart === "body" ? bodyAjv : textAjv).compile(schema as object) as Check);

/** Compiles `schema` now: a schema that cannot compile is found before any request needs it (tests). */
export function compileNow(schema: object, httpPart: string): void {
  (httpPart === "body" ? bodyAjv : textAjv).compile(schema);
}

export { formatValidationErrors };

/**
 * Validates `value` against `schema` as a route's schema would (for a request part a route cannot
 * declare, e.g. fields that come as a JSON body or as query parameters); returns it typed, or
 * throws the same 400 a route's validation answers.
 */
export function validate<T>(schema: object, value: unknown, part: "body" | "querystring"): T {
  const check = validatorCompiler({ schema, httpPart: part, method: "POST", url: "" }) as ((v: unknown) => boolean) & {
    errors?: unknown[] | null;
  };
  if (!check(value)) throw ApiError.validation(formatValidationErrors(check.errors ?? [], part));
  return value as T;
}
