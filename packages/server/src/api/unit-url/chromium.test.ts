import assert from "node:assert/strict";
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import WebSocket from "ws";
import { testDialects } from "../../testing/dialects.js";
import { startTestServer, type TestServer } from "../../testing/server.js";
import { startUnitApp } from "../../testing/unit-app.js";

const sqlite = testDialects[0];
const chromium = ["chromium", "chromium-browser", "google-chrome"].find(
  (c) => spawnSync(c, ["--version"], { stdio: "ignore" }).status === 0,
);

/** A minimal Chrome DevTools Protocol client: one page, commands by method name. */
class Page {
  private nextId = 1;
  private readonly pending = new Map<number, (msg: { result?: unknown; error?: unknown }) => void>();
  private constructor(
    private readonly ws: WebSocket,
    private sessionId = "",
  ) {
    ws.on("message", (data) => {
      const msg = JSON.parse(String(data)) as { id?: number; result?: unknown; error?: unknown };
      if (msg.id !== undefined) this.pending.get(msg.id)?.(msg);
    });
  }

  static async open(browserWs: string): Promise<Page> {
    const ws = new WebSocket(browserWs);
    await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));
    const page = new Page(ws);
    const { targetId } = (await page.send("Target.createTarget", { url: "about:blank" })) as { targetId: string };
    const { sessionId } = (await page.send("Target.attachToTarget", { targetId, flatten: true })) as {
      sessionId: string;
    };
    page.sessionId = sessionId;
    return page;
  }

  send(method: string, params: Record<string, unknown> = {}): Promise<unknown> {
    const id = this.nextId++;
    this.ws.send(JSON.stringify({ id, method, params, ...(this.sessionId && { sessionId: this.sessionId }) }));
    return new Promise((resolve, reject) =>
      this.pending.set(id, (msg) => (msg.error ? reject(new Error(JSON.stringify(msg.error))) : resolve(msg.result))),
    );
  }

  async eval<T>(expression: string): Promise<T> {
    const r = (await this.send("Runtime.evaluate", { expression, returnByValue: true })) as { result: { value: T } };
    return r.result.value;
  }

  /** Waits until `expression` is truthy in the page (navigations in between are fine). */
  async until(expression: string, ms = 10_000): Promise<void> {
    const deadline = Date.now() + ms;
    for (;;) {
      const ok = await this.eval<boolean>(`document.readyState === "complete" && !!(${expression})`).catch(() => false);
      if (ok) return;
      if (Date.now() > deadline) {
        throw new Error(`timed out waiting for ${expression} at ${await this.eval<string>("location.href")}`);
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  close(): void {
    this.ws.close();
  }
}

/** Issue 4: the unit URL in a real browser, `*.units.localhost` resolving to loopback with no DNS set-up. */
describe("unit URL in headless Chromium", { skip: chromium ? false : "chromium is not installed" }, () => {
  let s: TestServer;
  let token: string;
  let browser: ChildProcess;
  let profile: string;
  let page: Page;
  let unitUrl: string;

  before(async () => {
    if (!sqlite || !chromium) throw new Error("unreachable");
    s = await startTestServer(sqlite);
    token = await s.token("browser");
    const created = await s.api("POST", "/v1/units", { token, json: { name: "site" } });
    unitUrl = created.body.url;
    await startUnitApp(s.url, token, "site");
    profile = await mkdtemp(join(tmpdir(), "ums-chromium-"));
    browser = spawn(
      chromium,
      [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-extensions",
        // Never a packet beyond this machine: no background fetches, no DNS but for localhost.
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-quic",
        "--disable-domain-reliability",
        "--no-default-browser-check",
        "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE *.localhost, EXCLUDE 127.0.0.1",
        `--user-data-dir=${profile}`,
        "--remote-debugging-port=0",
        "about:blank",
      ],
      { stdio: ["ignore", "ignore", "pipe"] },
    );
    const wsUrl = await new Promise<string>((resolve, reject) => {
      let err = "";
      const timer = setTimeout(() => reject(new Error(`chromium did not start: ${err}`)), 20_000);
      browser.stderr?.on("data", (d) => {
        err += String(d);
        const m = /DevTools listening on (ws:\/\/\S+)/.exec(err);
        if (m?.[1]) {
          clearTimeout(timer);
          resolve(m[1]);
        }
      });
    });
    page = await Page.open(wsUrl);
  });
  after(async () => {
    try {
      page?.close();
      if (browser && browser.exitCode === null) {
        browser.kill("SIGTERM");
        await new Promise((r) => browser.once("exit", r));
      }
      // Chromium's helper processes can still be writing the profile for a moment after the
      // browser's own exit (a CI run failed here with ENOTEMPTY): retried, as rm allows.
      if (profile) await rm(profile, { recursive: true, force: true, maxRetries: 20, retryDelay: 100 });
    } finally {
      await s?.close();
    }
  });

  it("logs in through the login page and then reaches the unit with the session cookie", async () => {
    await page.send("Page.navigate", { url: `${unitUrl}/hello?x=1` });
    await page.until(`location.pathname === "/.ums/login"`);
    assert.match(await page.eval<string>("document.title"), /^Log in to site-/);
    await page.eval(
      `document.querySelector("#token").value = ${JSON.stringify(token)}; document.querySelector("form").submit(); true`,
    );
    await page.until(`location.pathname === "/hello"`);
    const seen = JSON.parse(await page.eval<string>("document.body.innerText")) as {
      path: string;
      headers: [string, string][];
    };
    assert.equal(seen.path, "/hello?x=1");
    assert.ok(!seen.headers.some(([k]) => /^(cookie|authorization)$/i.test(k)), "no ums credentials reach the unit");
    const cookies = await page.eval<string>("document.cookie");
    assert.equal(cookies, "a=1; b=2", "the unit's own cookies are set; the session cookie is HttpOnly");
    // A websocket from the page carries the cookie.
    const viaPromise = (await page.send("Runtime.evaluate", {
      expression: `new Promise((resolve) => {
        const ws = new WebSocket(location.origin.replace("http", "ws") + "/ws/from-page");
        ws.onmessage = (e) => { resolve(JSON.parse(e.data).path); ws.close(); };
        ws.onerror = () => resolve("error");
      })`,
      awaitPromise: true,
      returnByValue: true,
    })) as { result: { value: string } };
    assert.equal(viaPromise.result.value, "/ws/from-page");
  });
});
