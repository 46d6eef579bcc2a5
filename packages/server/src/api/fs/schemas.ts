import { Type } from "@sinclair/typebox";
import { ErrorBody, FsErrorBody, FsListQuery, FsReadQuery } from "@ums/protocol";

export const ReadQuery = Type.Object(
  { ...FsReadQuery.properties, asRoot: Type.Optional(Type.Boolean({ default: false })) },
  { additionalProperties: false },
);
export const ListQuery = Type.Object(
  { ...FsListQuery.properties, asRoot: Type.Optional(Type.Boolean({ default: false })) },
  { additionalProperties: false },
);

/** Spec 4.4: a failed operation answers `{error, code: <errno>, path}`; bad input the validation shape. */
export const fsErrors = {
  400: Type.Union([FsErrorBody, Type.Object({ errors: Type.Array(Type.String()), code: Type.String() })]),
  401: ErrorBody,
  403: FsErrorBody,
  404: Type.Union([FsErrorBody, ErrorBody]),
  500: FsErrorBody,
  502: ErrorBody,
} as const;
