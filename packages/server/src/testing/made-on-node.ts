import assert from "node:assert/strict";
import type { TestServer } from "./server.js";

// A helper of the images and templates API tests (not shipped: only *.test.ts import them).

/**
 * Issue #15: an organization's image or template (`from`, as a create names it: `{ image: "app" }`,
 * `{ template: "base" }`) names the node that made it, the test server's one node, and units made
 * from it go to that node alone. With the node cordoned, both a create from it and a plain create
 * answer 503 UMS_NO_NODE, but only the first says it goes to that node alone (for its files). The
 * node is active again afterwards.
 */
export async function assertMadeOnItsNodeAlone(
  s: TestServer,
  token: string,
  org: string,
  from: { image: string } | { template: string },
): Promise<void> {
  const store = s.server.store;
  const [node] = await store.nodes.list();
  assert.ok(node);
  const orgId = (await store.orgs.getBySlug(org))?.id ?? "";
  const made =
    "image" in from ? await store.images.get(orgId, from.image) : await store.templates.get(orgId, from.template);
  assert.equal(made?.nodeId, node.id);
  await store.nodes.setState(node.name, "cordoned");
  try {
    const name = "image" in from ? "i-cordoned" : "t-cordoned";
    const fromIt = await s.api("POST", "/v1/units", { token, json: { name, ...from } });
    assert.equal(fromIt.status, 503, fromIt.text);
    assert.equal(fromIt.body.code, "UMS_NO_NODE");
    assert.match(fromIt.body.error, /on that node alone/);
    const plain = await s.api("POST", "/v1/units", { token, json: { name: "p-cordoned" } });
    assert.equal(plain.status, 503, plain.text);
    assert.doesNotMatch(plain.body.error, /on that node alone/);
  } finally {
    await store.nodes.setState(node.name, "active");
  }
}
