import type { NetworkPolicy, NetworkRule } from "@ums/protocol";
import type { UmsClient } from "./client.js";
import type { RequestOpts } from "./config.js";

const request = (o: RequestOpts) => ({ timeoutMs: o.timeoutMs, signal: o.signal });

/**
 * `unit.policies`: the unit's network policy (spec 4.5, 2.10): DNS names it may reach, in force at
 * once when it runs. A bad rule throws `ValidationError` (`UMS_NETWORK_POLICY_INVALID`) naming it.
 */
export class Policies {
  constructor(
    private readonly client: UmsClient,
    private readonly path: () => string,
  ) {}

  /** The network policy; `{ rules: [] }` means none is enforced. */
  network(opts: RequestOpts = {}): Promise<NetworkPolicy> {
    return this.client.request<NetworkPolicy>("GET", `${this.path()}/policy/network`, request(opts));
  }

  /** Replaces the network policy; resolves with it as stored. */
  setNetwork(rules: readonly NetworkRule[], opts: RequestOpts = {}): Promise<NetworkPolicy> {
    return this.client.request<NetworkPolicy>("POST", `${this.path()}/policy/network`, {
      ...request(opts),
      body: { rules },
    });
  }
}
