import { ErrorCode } from "@ums/protocol";

/**
 * The one HTTP error of ums. Handlers throw it (or a typed error that respond.ts maps to it);
 * respond.ts is the only place that turns an error into an answer, so every error body has the
 * same shape (spec section 7): `{error, code}`, `{errors, code}` for validation, and
 * `{error, code, path}` for a failed filesystem operation (spec 4.4: `code` is the errno name).
 */
export class ApiError extends Error {
  readonly errors: readonly string[] | undefined;

  constructor(
    readonly status: number,
    readonly code: ErrorCode | string,
    message: string,
    errors?: readonly string[],
    readonly headers?: Readonly<Record<string, string>>,
    more: {
      /** The path a filesystem error concerns: the body is then `{error, code, path}` whatever the status. */
      readonly path?: string | undefined;
      /** Fields the body carries beside `error` and `code` (e.g. a policy's `missing_labels`). */
      readonly details?: Readonly<Record<string, unknown>> | undefined;
    } = {},
  ) {
    super(message);
    this.path = more.path;
    this.details = more.details;
    // Every 400 answers with the validation list shape, so clients read one shape for bad input
    // (a filesystem error keeps its own shape: its code is the errno).
    this.errors = errors ?? (status === 400 && this.path === undefined && !isErrno(code) ? [message] : undefined);
  }

  readonly path: string | undefined;
  readonly details: Readonly<Record<string, unknown>> | undefined;

  static validation(errors: readonly string[]): ApiError {
    return new ApiError(400, ErrorCode.Validation, errors.join("; "), errors);
  }

  static unitNotFound(name: string): ApiError {
    return new ApiError(404, ErrorCode.UnitNotFound, `unit '${name}' not found`);
  }

  /** The JSON body of this error (spec section 7). */
  body(): { error: string; code: string; path?: string } | { errors: readonly string[]; code: string } {
    if (this.errors) return { errors: this.errors, code: this.code };
    return {
      ...this.details,
      error: this.message,
      code: this.code,
      ...(this.path !== undefined && { path: this.path }),
    };
  }
}

/** An errno name (ENOENT, EACCES, ...): the code of a failed filesystem operation. */
export const isErrno = (code: string): boolean => /^E[A-Z0-9]+$/.test(code);
