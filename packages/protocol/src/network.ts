import { type Static, Type } from "@sinclair/typebox";

/**
 * Spec 2.10: one rule of a network policy. Exactly one of `domain` or `include` is given
 * (checked by the server, which names the rule in its 400 answer); `action` is required with a
 * `domain` and not allowed with an `include`.
 */
export const NetworkRule = Type.Object(
  {
    action: Type.Optional(Type.String({ description: "allow or deny" })),
    domain: Type.Optional(
      Type.String({
        maxLength: 253,
        description: "A DNS name (api.github.com), a leading wildcard (*.github.com) or a lone * (everything)",
      }),
    ),
    include: Type.Optional(Type.String({ maxLength: 64, description: "The name of a preset whose rules apply here" })),
  },
  { additionalProperties: false, title: "NetworkRule" },
);
export type NetworkRule = Static<typeof NetworkRule>;

/**
 * Spec 2.10. Matching (ours, docs/ARCHITECTURE.md section 7): the most specific rule wins, an exact name
 * before `*.sub.example` before `*.example` before `*`; among equally specific rules the later one
 * wins. `{"rules": []}` means no enforcement (the public internet is open, private ranges never).
 */
export const NetworkPolicy = Type.Object(
  { rules: Type.Array(NetworkRule, { maxItems: 1000 }) },
  { additionalProperties: false, title: "NetworkPolicy" },
);
export type NetworkPolicy = Static<typeof NetworkPolicy>;

/** One decision of the unit's resolver (ours): a lookup allowed or refused. */
export const NetworkDecision = Type.Object(
  {
    time: Type.String({ format: "date-time" }),
    name: Type.String(),
    type: Type.String({ description: "The query type: A, AAAA, TXT, …" }),
    verdict: Type.Union([Type.Literal("allowed"), Type.Literal("denied"), Type.Literal("open")], {
      description: "open: no policy is enforced, the lookup was forwarded",
    }),
    rule: Type.Optional(Type.String({ description: "The rule that decided, e.g. deny *.example.com (from defaults)" })),
    addresses: Type.Optional(Type.Array(Type.String(), { description: "IPv4 addresses the answer allowed" })),
  },
  { title: "NetworkDecision" },
);
export type NetworkDecision = Static<typeof NetworkDecision>;

/** A destination the unit's egress rules dropped (ours). */
export const NetworkDrop = Type.Object(
  {
    address: Type.String(),
    names: Type.Array(Type.String(), {
      description: "Names whose answers gave this address, as far as the resolver remembers",
    }),
    packets: Type.Integer(),
    last_time: Type.String({
      format: "date-time",
      description: "When a packet to it was last dropped (to the second)",
    }),
  },
  { title: "NetworkDrop" },
);
export type NetworkDrop = Static<typeof NetworkDrop>;

export const NetworkLog = Type.Object(
  {
    denied_lookups: Type.Integer({ description: "Lookups refused since the unit last booted on this server" }),
    dropped_packets: Type.Integer({
      description: "Packets to addresses the policy or the private ranges forbid, since the unit last booted",
    }),
    decisions: Type.Array(NetworkDecision, { description: "The most recent decisions, oldest first" }),
    dropped: Type.Array(NetworkDrop, {
      description: "Destinations dropped within the last hour (at most 256), the most recent first",
    }),
  },
  { title: "NetworkLog" },
);
export type NetworkLog = Static<typeof NetworkLog>;

export const NetworkLogQuery = Type.Object(
  { limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })) },
  { additionalProperties: false },
);
export type NetworkLogQuery = Static<typeof NetworkLogQuery>;
