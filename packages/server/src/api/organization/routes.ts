import { OrganizationInfo } from "@ums/protocol";
import type { Store } from "../../store/store.js";
import type { ApiInstance } from "../instance.js";
import { commonErrors } from "../schemas.js";
import { tokenRoutes } from "./tokens.js";

/** Spec 2.5: the caller's organization; its tokens (tokens.ts). */
export function organizationRoutes(app: ApiInstance, store: Store): void {
  tokenRoutes(app, store);
  app.get(
    "/v1/organization",
    {
      schema: {
        tags: ["organization"],
        summary: "The organization of the calling token",
        response: { 200: OrganizationInfo, ...commonErrors },
      },
    },
    async (req) => {
      const org = req.auth.org;
      return {
        organization: {
          slug: org.slug,
          sprites_enabled: org.unitsEnabled,
          active_sprites: await store.units.namesWithStatus(org.id, "running"),
          max_sprites: org.maxUnits,
          active_sprite_limit: org.runningLimit,
        },
      };
    },
  );
}
