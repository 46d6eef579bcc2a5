import type { ServerResponse } from "node:http";
import { ErrorCode } from "@ums/protocol";
import { ApiError } from "./api-error.js";
import { fromNodeError } from "./node-errors.js";
import { formatValidationErrors } from "./validation-messages.js";

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
  FST_ERR_CTP_BODY_TOO_LARGE: {
    code: ErrorCode.PayloadTooLarge,
    message:
      "request body is over 1 MiB, the most a JSON body may be (file contents go to the fs routes, which stream)",
  },
  FST_ERR_CTP_INVALID_TYPE: { code: ErrorCode.UnsupportedMediaType, message: "invalid Content-Type header" },
};

/** The API error an error stands for; undefined for an internal error (a bug: answered 500, logged). */
export function toApiError(err: unknown): ApiError | undefined {
  if (err instanceof ApiError) return err;
  const mapped = fromNodeError(err);
  if (mapped) return mapped;
  const fe = err as {
    code?: string;
    statusCode?: number;
    message?: string;
    validation?: unknown;
    validationContext?: string;
  };
  if (fe && Array.isArray(fe.validation)) {
    return ApiError.validation(formatValidationErrors(fe.validation, fe.validationContext));
  }
  const known = fe?.code ? FASTIFY_CODES[fe.code] : undefined;
  if (known && fe.statusCode) return new ApiError(fe.statusCode, known.code, known.message ?? fe.message ?? "");
  // Node's own JSON.parse errors surfaced by content-type parsers.
  if (err instanceof SyntaxError && fe.statusCode === 400) {
    return new ApiError(400, ErrorCode.BadJson, "request body is not valid JSON");
  }
  return undefined;
}

/** An error's answer: status, headers and JSON body (spec section 7). */
export interface ErrorAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: object;
  /** Not a client's error: log it (with the error) where it happened. */
  readonly internal: boolean;
}

/** The one place an error becomes an answer; the API's handler and the hand-written routers use it. */
export function errorAnswer(err: unknown): ErrorAnswer {
  const api = toApiError(err);
  if (!api) {
    return {
      status: 500,
      headers: {},
      body: { error: "internal error; see the server log", code: ErrorCode.Internal },
      internal: true,
    };
  }
  return { status: api.status, headers: api.headers ?? {}, body: api.body(), internal: false };
}

/** Answers `err` on a plain node:http response (routers without fastify: the internal API, the gateway). */
export function writeError(res: ServerResponse, err: unknown): ErrorAnswer {
  const answer = errorAnswer(err);
  if (res.headersSent) {
    res.end();
    return answer;
  }
  res.writeHead(answer.status, { ...answer.headers, "content-type": "application/json; charset=utf-8" });
  res.end(JSON.stringify(answer.body));
  return answer;
}
