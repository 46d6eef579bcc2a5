import assert from "node:assert/strict";
import { describe, it } from "node:test";
import type { ResolvedProvider } from "../registry/registry.js";
import { strippedHeader } from "./credential.js";

const provider = (auth: ResolvedProvider["auth"]) => ({ auth }) as ResolvedProvider;

describe("gateway: the caller's headers kept from the provider", () => {
  it("strips credentials, hop-by-hop fields, the provider's own key header and what Connection lists", () => {
    const dropped = strippedHeader(provider({ kind: "header", name: "X-Key" }), "keep-alive, X-Hop-Secret ,");
    for (const name of ["authorization", "cookie", "host", "x-forwarded-for", "x-key", "x-hop-secret", "keep-alive"]) {
      assert.equal(dropped(name), true, name);
    }
    for (const name of ["accept", "content-type", "x-other", ""]) assert.equal(dropped(name), false, name);
  });

  it("keeps a header no list names, with no Connection header and a bearer provider", () => {
    const dropped = strippedHeader(provider({ kind: "bearer" }), undefined);
    assert.equal(dropped("x-hop-secret"), false);
    assert.equal(dropped("x-key"), false);
    assert.equal(dropped("proxy-authorization"), true);
  });
});
