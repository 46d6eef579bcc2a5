import { type Static, Type } from "@sinclair/typebox";

export * from "./error-codes.js";

/** Spec section 7: a single message. */
export const ErrorBody = Type.Object(
  { error: Type.String(), code: Type.String() },
  { title: "ErrorBody", description: "A single error message with a stable code." },
);
export type ErrorBody = Static<typeof ErrorBody>;

/** Spec section 7: a validation list. */
export const ValidationErrorBody = Type.Object(
  { errors: Type.Array(Type.String()), code: Type.String() },
  { title: "ValidationErrorBody", description: "Each entry names one bad field and what to fix." },
);
export type ValidationErrorBody = Static<typeof ValidationErrorBody>;
