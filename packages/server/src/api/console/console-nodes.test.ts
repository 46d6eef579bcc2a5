// Issue #15 in the web console: the Nodes page (GET /v1/nodes) in Chromium against a real server
// (the set-up of browser.test.ts): the host's node with its status, units, free memory and disk and
// heartbeat age, refreshed while it is open; shown to admin tokens only.
import assert from "node:assert/strict";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type Browser, chromium, type Page } from "playwright-core";
import { startSqliteServer, type TestServer } from "../../testing/server.js";

const WAIT = { timeout: 20_000 };

describe("console: nodes", { timeout: 120_000 }, () => {
  let s: TestServer;
  let admin: string;
  let member: string;
  let node: string;
  let browser: Browser;
  let shots: string;
  const errors: string[] = [];
  /** The paths of the API calls each page made. */
  const calls: string[] = [];

  const noErrors = () => assert.deepEqual(errors.splice(0), [], "console errors");
  const open = async (token: string, width = 1280): Promise<Page> => {
    const page = await (await browser.newContext({ viewport: { width, height: 800 } })).newPage();
    page.on("console", (m) => {
      if (m.type() === "error") errors.push(`${page.url()}: ${m.text()}`);
    });
    page.on("pageerror", (e) => errors.push(`${page.url()}: uncaught ${e.message}`));
    page.on("request", (req) => {
      const path = new URL(req.url()).pathname;
      if (path.startsWith("/v1/")) calls.push(path);
    });
    await page.goto(`${s.url}/console/`);
    await page.fill("#token", token);
    await page.click("button[type=submit]");
    await page.waitForSelector("h2:text('Units')", WAIT);
    return page;
  };
  const cells = async (page: Page) => page.locator(`tr[data-node=${node}] td`).allTextContents();

  before(async () => {
    shots = process.env.UMS_CONSOLE_SHOTS ?? (await mkdtemp(join(tmpdir(), "ums-console-nodes-")));
    s = await startSqliteServer();
    admin = await s.token("console-nodes");
    member = await s.token("console-nodes", { role: "member" });
    node = (await s.server.store.nodes.list())[0]?.name ?? "";
    assert.ok(node, "the server registered its node");
    browser = await chromium.launch({
      executablePath: "/usr/bin/chromium",
      headless: true,
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    });
  });
  after(async () => {
    await browser?.close().catch(() => {});
    await s?.close();
    console.log(`# console screenshots in ${shots}`);
  });

  it("shows an admin token the node: status, units, free memory and disk, heartbeat age; refreshed while open", async () => {
    const page = await open(admin);
    await page.click("nav.mainnav a:text('Nodes')");
    await page.waitForSelector(`tr[data-node=${node}]`, WAIT);
    const [name, status, units, memory, disk, , heartbeat] = await cells(page);
    assert.equal(name, node);
    assert.equal(status, "up");
    assert.equal(units, "0");
    assert.match(memory ?? "", /^\d+(\.\d)? (B|KiB|MiB|GiB) of \d+(\.\d)? (MiB|GiB)$/);
    assert.match(disk ?? "", /^\d+(\.\d)? (B|KiB|MiB|GiB) of \d+(\.\d)? (MiB|GiB)$/);
    assert.match(heartbeat ?? "", /^\d+ s ago$/);
    assert.equal(await page.locator(`tr[data-node=${node}] .status-up`).count(), 1);
    // A unit made elsewhere and the operator's cordon show without a reload (it polls every 5 s).
    await s.unit(admin, "on-the-node");
    await s.server.store.nodes.setState(node, "cordoned");
    await page.locator(`tr[data-node=${node}] td:nth-child(3)`, { hasText: /^1$/ }).waitFor(WAIT);
    await page.locator(`tr[data-node=${node}] .status-cordoned`, { hasText: "up, cordoned" }).waitFor(WAIT);
    await page.screenshot({ path: join(shots, "nodes.png"), fullPage: true });
    await s.server.store.nodes.setState(node, "active");
    // The unit's page names its node.
    await page.goto(`${s.url}/console/#/units/on-the-node`);
    await page.waitForSelector("dl.facts dt:text('Node')", WAIT);
    assert.equal(await page.locator("dl.facts dt:text('Node') + dd").textContent(), node);
    noErrors();
  });

  it("shows a member token no Nodes link, and a message instead of the table (nothing asked of the API)", async () => {
    const page = await open(member);
    assert.equal(await page.locator("nav.mainnav a:text('Units')").count(), 1);
    assert.equal(await page.locator("nav.mainnav a:text('Nodes')").count(), 0);
    calls.splice(0);
    await page.goto(`${s.url}/console/#/nodes`);
    await page.waitForSelector("main section h2:text('Nodes')", WAIT);
    assert.match((await page.textContent("main section")) ?? "", /admin tokens only/);
    assert.equal(await page.locator("table.nodes").count(), 0);
    assert.ok(!calls.includes("/v1/nodes"), calls.join(" "));
    noErrors();
  });

  it("fits a phone's width", async () => {
    const page = await open(admin, 375);
    await page.goto(`${s.url}/console/#/nodes`);
    await page.waitForSelector(`tr[data-node=${node}]`, WAIT);
    const overflow = await page.evaluate<number>(
      "document.documentElement.scrollWidth - document.documentElement.clientWidth",
    );
    assert.ok(overflow <= 1, `${overflow}px wider than the window`);
    await page.screenshot({ path: join(shots, "phone-nodes.png"), fullPage: true });
    noErrors();
  });
});
