import type { OrganizationInfo as WireOrganizationInfo } from "@ums/protocol";
import { type ClientOpts, resolveClient } from "./client.js";
import type { RequestOpts } from "./config.js";

/** The token's organization and its limits (spec 2.5). */
export interface Organization {
  slug: string;
  /** Whether the organization may create units. */
  unitsEnabled: boolean;
  /** Names of its active (running) units. */
  activeUnits: string[];
  /** Most units it may have. */
  maxUnits: number;
  /** Most units it may have running at once. */
  activeUnitLimit: number;
}

export interface OrganizationOpts extends ClientOpts, RequestOpts {}

/** The organization the token belongs to. */
export async function organization(opts: OrganizationOpts = {}): Promise<Organization> {
  const { organization: o } = await resolveClient(opts).request<WireOrganizationInfo>("GET", "/v1/organization", {
    timeoutMs: opts.timeoutMs,
    signal: opts.signal,
  });
  return {
    slug: o.slug,
    unitsEnabled: o.sprites_enabled,
    activeUnits: [...o.active_sprites],
    maxUnits: o.max_sprites,
    activeUnitLimit: o.active_sprite_limit,
  };
}
