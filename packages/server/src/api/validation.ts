import { Ajv, type Options } from "ajv";
import addFormats from "ajv-formats";
import type { FastifySchemaCompiler } from "fastify";
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

export const validatorCompiler: FastifySchemaCompiler<unknown> = ({ schema, httpPart }) =>
  (httpPart === "body" ? bodyAjv : textAjv).compile(schema as object);

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
