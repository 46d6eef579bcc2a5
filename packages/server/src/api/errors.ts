import { ErrorCode } from "@ums/protocol";
import type { FastifyError, FastifyReply, FastifyRequest } from "fastify";
import { formatValidationErrors } from "./validation.js";

/**
 * The one HTTP error of the API. Handlers throw it; `sendError` (below) is the only place that
 * turns any error into a response, so every error body has the same shape (spec section 7):
 * `{error, code}` or `{errors, code}` for validation.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: ErrorCode,
    message: string,
    errors?: readonly string[],
    readonly headers?: Readonly<Record<string, string>>,
  ) {
    super(message);
    // Every 400 answers with the validation list shape, so clients read one shape for bad input.
    this.errors = errors ?? (status === 400 ? [message] : undefined);
  }

  readonly errors: readonly string[] | undefined;

  static validation(errors: readonly string[]): ApiError {
    return new ApiError(400, ErrorCode.Validation, errors.join("; "), errors);
  }

  static unitNotFound(name: string): ApiError {
    return new ApiError(404, ErrorCode.UnitNotFound, `unit '${name}' not found`);
  }
}

/** Fastify's own client errors (body parsing, content type, size), mapped to our codes. */
const FASTIFY_CODES: Record<string, { code: ErrorCode; message?: string }> = {
  FST_ERR_CTP_INVALID_JSON_BODY: { code: ErrorCode.BadJson, message: "request body is not valid JSON" },
  FST_ERR_CTP_EMPTY_JSON_BODY: {
    code: ErrorCode.BadJson,
    message: "request body is empty but Content-Type says application/json; send a JSON object",
  },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    code: ErrorCode.UnsupportedMediaType,
    message: "unsupported Content-Type; send application/json",
  },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: { code: ErrorCode.Validation, message: "Content-Length does not match the body" },
  FST_ERR_CTP_BODY_TOO_LARGE: { code: ErrorCode.PayloadTooLarge, message: "request body is too large" },
  FST_ERR_CTP_INVALID_TYPE: { code: ErrorCode.UnsupportedMediaType, message: "invalid Content-Type header" },
};

export function toApiError(err: unknown): ApiError | undefined {
  if (err instanceof ApiError) return err;
  const fe = err as FastifyError & { validation?: unknown[]; validationContext?: string };
  if (fe && Array.isArray(fe.validation)) {
    return ApiError.validation(formatValidationErrors(fe.validation, fe.validationContext));
  }
  const known = fe?.code ? FASTIFY_CODES[fe.code] : undefined;
  if (known && fe.statusCode) {
    return new ApiError(fe.statusCode, known.code, known.message ?? fe.message);
  }
  // Node's own JSON.parse errors surfaced by content-type parsers.
  if (fe instanceof SyntaxError && fe.statusCode === 400) {
    return new ApiError(400, ErrorCode.BadJson, "request body is not valid JSON");
  }
  return undefined;
}

export function sendError(err: unknown, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const api = toApiError(err);
  if (!api) {
    request.log.error({ err }, "internal error");
    return reply
      .code(500)
      .type("application/json; charset=utf-8")
      .serializer(JSON.stringify)
      .send({ error: "internal error; see the server log", code: ErrorCode.Internal });
  }
  if (api.headers) reply.headers(api.headers);
  const body = api.errors ? { errors: api.errors, code: api.code } : { error: api.message, code: api.code };
  // Serialised here, not by the route's response schema: an error body must never fail to serialise.
  return reply.code(api.status).type("application/json; charset=utf-8").serializer(JSON.stringify).send(body);
}
