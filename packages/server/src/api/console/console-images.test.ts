// Issue #18 in the web console: the Images and Templates pages, the create form's choice of image
// or template, and publishing a template from a unit's checkpoint, in Chromium against a real
// server with real units (the set-up of browser.test.ts). An imported image is made through the
// API first (a tiny archive the test builds), then shown and deleted from the console.
import assert from "node:assert/strict";
import { mkdtemp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { type Browser, chromium, type Page } from "playwright-core";
import { dockerSaveArchive, makeTar } from "../../runtime/image/oci/test-archives.js";
import { startSqliteServer, type TestServer } from "../../testing/server.js";
import { tools } from "../../testing/services.js";
import { tinyRootfs } from "../../testing/tiny-rootfs.js";

const WAIT = { timeout: 20_000 };

describe("console: images and templates", { timeout: 120_000 }, () => {
  let s: TestServer;
  let token: string;
  let browser: Browser;
  let page: Page;
  let shots: string;
  const errors: string[] = [];
  /** The bodies of the page's POST /v1/units. */
  const creates: Record<string, unknown>[] = [];

  const noErrors = () => assert.deepEqual(errors.splice(0), [], "console errors");
  const shot = (name: string, p: Page = page) => p.screenshot({ path: join(shots, `${name}.png`), fullPage: true });
  const open = async (hash: string) => {
    await page.goto(`${s.url}/console/${hash}`);
    await page.waitForSelector("main section h2", WAIT);
  };
  /** Creates a unit through the units page's form, starting from `start` (`image:…`, `template:…`). */
  const createUnit = async (name: string, start?: string) => {
    await open("#/");
    const form = page.locator("form[aria-label='Create a unit']");
    // The same hash again keeps the page (and the form, if it was opened).
    if (!(await form.isVisible())) await page.click("summary:text('Create a unit')");
    await form.locator("input[name=name]").fill(name);
    if (start) await form.locator("select[name=start]").selectOption(start, WAIT);
    await form.locator("button[type=submit]").click();
    await page.waitForSelector(`tr[data-unit=${name}]`, WAIT);
    return creates.at(-1);
  };

  before(async () => {
    shots = process.env.UMS_CONSOLE_SHOTS ?? (await mkdtemp(join(tmpdir(), "ums-console-images-")));
    s = await startSqliteServer();
    token = await s.token("console-img");
    const layer = await makeTar([
      ...tinyRootfs({ passwd: ["app:x:1000:1000:app:/home/app:/bin/sh"], group: ["app:x:1000:"] }),
      { name: "home/", type: "directory" },
      { name: "home/app/", type: "directory", uid: 1000, gid: 1000 },
      { name: "srv/", type: "directory", uid: 1000, gid: 1000 },
    ]);
    const archive = await dockerSaveArchive({ layers: [layer], workingDir: "/srv", user: "app" });
    const r = await s.api("POST", "/v1/images?name=tiny", {
      token,
      body: archive,
      headers: { "content-type": "application/x-tar" },
    });
    assert.match(r.text, /"type":"complete"/, r.text);
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
    page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
    page.on("console", (m) => {
      if (m.type() === "error") errors.push(`${page.url()}: ${m.text()}`);
    });
    page.on("pageerror", (e) => errors.push(`${page.url()}: uncaught ${e.message}`));
    page.on("request", (req) => {
      if (req.method() === "POST" && new URL(req.url()).pathname === "/v1/units") creates.push(req.postDataJSON());
    });
    await page.goto(`${s.url}/console/`);
    await page.fill("#token", token);
    await page.click("button[type=submit]");
    await page.waitForSelector("h2:text('Units')", WAIT);
  });
  after(async () => {
    await browser?.close().catch(() => {});
    await s?.close();
    console.log(`# console screenshots in ${shots}`);
  });

  it("lists the images: base, and an imported one with its config; the CLI line to import", async () => {
    await page.click("nav.mainnav a:text('Images')");
    await page.waitForSelector("tr[data-image=base]", WAIT);
    const base = page.locator("tr[data-image=base]");
    assert.match((await base.textContent()) ?? "", /base@/);
    assert.equal(await base.locator("button:text('Delete')").count(), 0, "the host's image is not deleted here");
    const tiny = page.locator("tr[data-image=tiny] td");
    assert.deepEqual((await tiny.allTextContents()).slice(0, 2), ["tiny", "imported"]);
    assert.deepEqual((await tiny.allTextContents()).slice(4, 6), ["app", "/srv"]);
    assert.match((await page.textContent("main section .hint")) ?? "", /ums image import FILE\.tar --name NAME/);
    await shot("images");
    noErrors();
  });

  it("creates units from an image through the form: {name, image}", async () => {
    assert.deepEqual(await createUnit("from-base"), { name: "from-base", image: "base" }, "base is the default");
    assert.deepEqual(await createUnit("on-tiny", "image:tiny"), { name: "on-tiny", image: "tiny" });
    const r = await tools(s, token).sh("on-tiny", "id -un; pwd");
    assert.equal(r.out.trim(), "app\n/srv", r.err);
    noErrors();
  });

  it("shows why an image in use is not deleted, and deletes it once it is not", async () => {
    await open("#/images");
    const row = page.locator("tr[data-image=tiny]");
    await row.locator("button:text('Delete')").click();
    await row.locator("button:text('Yes')").click();
    await page.waitForSelector("section .error:has-text(\"image 'tiny' is used by 1 unit\")", WAIT);
    errors.splice(0); // the 409 is logged by Chromium as a failed load
    assert.equal((await s.api("DELETE", "/v1/units/on-tiny", { token })).status, 204);
    await row.locator("button:text('Delete')").click();
    await row.locator("button:text('Yes')").click();
    await row.waitFor({ state: "detached", ...WAIT });
    assert.equal((await s.api("GET", "/v1/images/tiny", { token })).status, 404);
    noErrors();
  });

  it("publishes a template from a unit's checkpoint; a taken name shows the API's message", async () => {
    const w = await tools(s, token).sh("from-base", "echo from-the-template > /home/unit/marker");
    assert.equal(w.code, 0, w.err);
    const cp = await s.api("POST", "/v1/units/from-base/checkpoint", { token, json: { comment: "for a template" } });
    assert.match(cp.text, /"type":"complete"/);
    await open("#/units/from-base/checkpoints");
    const publish = async (name: string) => {
      await page.click("li[data-checkpoint=v0] button:text('Publish as template')");
      const form = page.locator("form[aria-label='Publish a template']");
      await form.locator("input[name=template-name]").fill(name);
      await form.locator("input[name=template-description]").fill("a unit with a marker");
      await form.locator("button[type=submit]").click();
    };
    await publish("starter");
    await page.waitForSelector("p[role=status]:has-text('Published template starter')", WAIT);
    const list = (await s.api("GET", "/v1/templates", { token })).body.templates as Record<string, unknown>[];
    assert.deepEqual(
      list.map((t) => [t.name, t.description, t.source]),
      [["starter", "a unit with a marker", { unit: "from-base", checkpoint: "v0" }]],
    );
    await publish("starter");
    await page.waitForSelector("form[aria-label='Publish a template'] .error:has-text('already exists')", WAIT);
    errors.splice(0); // the 409's failed load
    await shot("publish-template");
  });

  it("lists the template and creates a unit from it through the form: {name, template}", async () => {
    await page.click("nav.mainnav a:text('Templates')");
    const row = page.locator("tr[data-template=starter]");
    await row.waitFor(WAIT);
    assert.match((await row.textContent()) ?? "", /a unit with a marker.*from-base v0/);
    await shot("templates");
    assert.deepEqual(await createUnit("from-tpl", "template:starter"), { name: "from-tpl", template: "starter" });
    const r = await tools(s, token).sh("from-tpl", "cat /home/unit/marker");
    assert.equal(r.out.trim(), "from-the-template", r.err);
    noErrors();
  });

  it("deletes the template; the unit made from it stays", async () => {
    await open("#/templates");
    const row = page.locator("tr[data-template=starter]");
    await row.locator("button:text('Delete')").click();
    await row.locator("button:text('Yes')").click();
    await page.waitForSelector("text=No templates yet.", WAIT);
    assert.deepEqual((await s.api("GET", "/v1/templates", { token })).body.templates, []);
    assert.equal((await s.api("GET", "/v1/units/from-tpl", { token })).status, 200);
    noErrors();
  });

  it("fits a phone's width", async () => {
    await page.setViewportSize({ width: 375, height: 740 });
    for (const hash of ["#/images", "#/templates"]) {
      await open(hash);
      await page.waitForSelector("main .loading", { state: "detached", ...WAIT });
      const overflow = await page.evaluate<number>(
        "document.documentElement.scrollWidth - document.documentElement.clientWidth",
      );
      assert.ok(overflow <= 1, `${hash}: ${overflow}px wider than the window`);
      await shot(`phone-${hash.slice(2)}`);
    }
    noErrors();
  });
});
