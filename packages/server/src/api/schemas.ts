import { Type } from "@sinclair/typebox";
import { ErrorBody, ValidationErrorBody } from "@ums/protocol";

/** Path parameter `{name}`: any string; names that cannot exist simply are not found (404). */
export const UnitParams = Type.Object({ name: Type.String({ maxLength: 256 }) });

/** The error responses every authenticated route may give (spec section 7). */
export const commonErrors = {
  400: ValidationErrorBody,
  401: ErrorBody,
} as const;

export const notFound = { 404: ErrorBody } as const;
