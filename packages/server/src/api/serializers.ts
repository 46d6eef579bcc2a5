import { SerializerSelector } from "@fastify/fast-json-stringify-compiler";

type BuildSerializer = ReturnType<typeof SerializerSelector>;

const defaults = SerializerSelector();

/**
 * Fastify's response serializers (fast-json-stringify, as by default), each built at its route's
 * first answer with that status rather than when the server starts (issue #16: building them all
 * took about 0.5 s of each `ums serve` start; validation.ts does the same for validators).
 */
export const lazySerializers: BuildSerializer = (externalSchemas, options) => {
  const compile = defaults(externalSchemas, options);
  return ((route: Parameters<typeof compile>[0]) => {
    let fn: ((data: unknown) => string) | undefined;
    return (data: unknown) => {
      fn ??= compile(route);
      return fn(data);
    };
  }) as ReturnType<BuildSerializer>;
};
