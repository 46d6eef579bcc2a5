import { type Static, Type } from "@sinclair/typebox";

/** Spec 2.5, wrapped in `{organization: ...}`. */
export const OrganizationInfo = Type.Object(
  {
    organization: Type.Object({
      slug: Type.String(),
      sprites_enabled: Type.Boolean(),
      active_sprites: Type.Array(Type.String(), { description: "Names of running units" }),
      max_sprites: Type.Integer(),
      active_sprite_limit: Type.Integer(),
    }),
  },
  { title: "OrganizationInfo" },
);
export type OrganizationInfo = Static<typeof OrganizationInfo>;
