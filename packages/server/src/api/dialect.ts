// Two dialects of one API (docs/ARCHITECTURE.md section 1, "The compatibility prefix"). Every route
// under a unit is registered twice: under `/v1/units` in the spec's shapes and under `/v1/sprites` in
// the shapes the public Sprites clients expect where those differ (a session list wrapped as
// `{"sessions": [...]}`, a network policy POST answering 204, …). A route reads its dialect from
// its deps, never from the URL.

export type Dialect = "units" | "sprites";

export const DIALECTS: readonly Dialect[] = ["units", "sprites"];

/** The path prefix each dialect is served under. */
export const UNIT_PREFIX: Readonly<Record<Dialect, string>> = { units: "/v1/units", sprites: "/v1/sprites" };

/** `/v1/units/{name}/…` or `/v1/sprites/{name}/…`: the prefix and the rest, from the URL as sent. */
export const UNIT_URL = /^\/v1\/(?:units|sprites)\/([^/?#]*)\/?(.*)$/s;
