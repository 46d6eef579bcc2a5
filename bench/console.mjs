#!/usr/bin/env node
// Console benchmark (issue #14), in Debian's headless Chromium on loopback:
//   size        every asset of packages/console/dist as sent (brotli), and what the first load
//               (sign-in done, the units page) actually transfers; goal <= 300 KiB
//   units table time from navigation start to the units table on screen, cold cache, against a
//               blank page of the same server (its load event); goal <= 500 ms
//   echo        a key pressed in the console's terminal to its echo's bytes arriving in the page
//               (keydown, first listener, to the websocket's message event), p50, against the same
//               over a bare exec websocket from a page script (a textarea whose keydown sends the
//               key); goal <= 1.2x
//
//   npx tsc -b && npm run build:agent && npm run build && node bench/console.mjs [--keys 200] [--loads 10]
//   (--url URL --token TOKEN uses a running server instead of starting one)
import { readdirSync, statSync } from "node:fs";
import { join } from "node:path";
import { chromium } from "playwright-core";
import { arg, fmt, percentile, ROOT, startBenchServer } from "./lib.mjs";

const KEYS = arg("keys", 200);
const LOADS = arg("loads", 10);
const flag = (name) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : undefined;
};

const server = flag("url")
  ? { url: flag("url"), token: flag("token"), auth: { authorization: `Bearer ${flag("token")}` }, stop: async () => {} }
  : await startBenchServer({ org: "console-bench" });
const { url, auth } = server;
let browser;
try {
  // Every asset as the server sends it to a browser that accepts brotli.
  const dist = join(ROOT, "packages", "console", "dist");
  let all = 0;
  for (const dir of [dist, join(dist, "assets")])
    for (const f of readdirSync(dir))
      if (!f.endsWith(".br") && !f.endsWith(".gz") && statSync(join(dir, f)).isFile())
        all += statSync(join(dir, `${f}.br`)).size;

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
  const signedIn = async () => {
    const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
    const r = await ctx.request.post(`${url}/v1/console/session`, { data: { token: server.token } });
    if (!r.ok()) throw new Error(`sign-in: ${r.status()} ${await r.text()}`);
    const { csrf } = await r.json();
    // The page's mark that a session exists (main.tsx), as a page that signed in leaves it.
    await ctx.addInitScript(() => localStorage.setItem("ums-console", "1"));
    return { ctx, csrf };
  };

  // A unit for the units table and the terminal.
  const unit = `cb-${Date.now().toString(36)}`;
  const made = await fetch(`${url}/v1/units`, {
    method: "POST",
    headers: { ...auth, "content-type": "application/json" },
    body: JSON.stringify({ name: unit }),
  });
  if (made.status !== 201) throw new Error(`create unit: ${made.status} ${await made.text()}`);

  // First load: cold cache each time (a new context), until the units table shows.
  const tables = [];
  const blanks = [];
  let firstLoad = 0;
  // Load 0 counts the bytes and is not timed: the size listener's calls into the browser (one per
  // request) would be timed with the page.
  for (let i = 0; i <= LOADS; i++) {
    const { ctx } = await signedIn();
    await ctx.addInitScript(() => {
      const seen = new MutationObserver(() => {
        if (document.querySelector("table.units")) {
          window.__unitsAt = performance.now();
          seen.disconnect();
        }
      });
      seen.observe(document, { childList: true, subtree: true });
    });
    const page = await ctx.newPage();
    let bytes = 0;
    if (i === 0)
      page.on("requestfinished", async (req) => {
        const s = await req.sizes().catch(() => undefined);
        if (s) bytes += s.responseBodySize + s.responseHeadersSize;
      });
    await page.goto(`${url}/console/`);
    await page.waitForSelector("table.units", { timeout: 30_000 });
    // When the table was inserted (the observer above); it is painted in the next frame.
    const at = await page.evaluate(() => window.__unitsAt ?? performance.now());
    await page.waitForLoadState("networkidle").catch(() => {});
    if (i === 0) {
      firstLoad = bytes;
      await ctx.close();
      continue;
    }
    tables.push(at);
    // A blank page of the same server: its load event from navigation start.
    const blank = await ctx.newPage();
    await blank.goto(`${url}/healthz`);
    blanks.push(await blank.evaluate(() => performance.getEntriesByType("navigation")[0]?.loadEventEnd ?? 0));
    await ctx.close();
  }

  // Keystroke echo.
  const instrument = () => {
    window.__samples = [];
    window.__t0 = 0;
    addEventListener(
      "keydown",
      () => {
        window.__t0 = performance.now();
      },
      true,
    );
    const Native = WebSocket;
    window.WebSocket = class extends Native {
      constructor(...a) {
        super(...a);
        // Registered before the page's own handler: it runs first.
        this.addEventListener("message", (ev) => {
          if (typeof ev.data !== "string" && window.__t0) {
            window.__samples.push(performance.now() - window.__t0);
            window.__t0 = 0;
          }
        });
      }
    };
  };
  const typeKeys = async (page, n) => {
    const chars = "abcdefghijklmnopqrstuvwxyz";
    for (let i = 0; i < n; i++) {
      const before = await page.evaluate(() => window.__samples.length);
      await page.keyboard.press(chars[i % chars.length]);
      await page.waitForFunction((b) => window.__samples.length > b, before, { timeout: 10_000, polling: 5 });
      // Keys spaced as typing spaces them: the next comes after the page has drawn this one's echo
      // (two frames), not in the middle of that drawing (the bare page has nothing to draw).
      await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
      // A fresh line now and then (not measured): ctrl-u clears what bash holds.
      if (i % 50 === 49) {
        await page.evaluate(() => {
          window.__t0 = 0;
        });
        await page.keyboard.press("Control+u");
        await page.waitForTimeout(50);
        await page.evaluate(() => {
          window.__t0 = 0;
        });
      }
    }
    const s = await page.evaluate(() => window.__samples);
    await page.evaluate(() => {
      window.__samples = [];
    });
    return s;
  };

  const { ctx } = await signedIn();
  await ctx.addInitScript(instrument);
  const page = await ctx.newPage();
  await page.goto(`${url}/console/#/units/${unit}/terminal`);
  await page.waitForSelector(".term-status:text('connected')", { timeout: 30_000 });
  await page.waitForFunction(() => document.querySelector(".xterm-rows")?.textContent?.includes("$"), null, {
    timeout: 30_000,
  });
  await page.evaluate(() => {
    window.__samples = [];
    window.__t0 = 0;
  });
  await page.click(".term");

  // The bare websocket: the same command, TTY, same origin (the cookie), a textarea's keydown sends.
  const bare = await ctx.newPage();
  await bare.goto(`${url}/healthz`);
  await bare.evaluate(
    ({ unit }) =>
      new Promise((resolve, reject) => {
        document.body.innerHTML = "<textarea id=t></textarea>";
        const q = new URLSearchParams({ tty: "true", stdin: "true", cols: "80", rows: "24" });
        q.append("cmd", "bash");
        q.append("cmd", "-l");
        const ws = new WebSocket(`ws://${location.host}/v1/units/${unit}/exec?${q}`);
        ws.binaryType = "arraybuffer";
        const enc = new TextEncoder();
        const t = document.getElementById("t");
        t.addEventListener("keydown", (e) => {
          if (e.key.length === 1 && !e.ctrlKey) {
            e.preventDefault();
            ws.send(enc.encode(e.key));
          } else if (e.key === "u" || e.ctrlKey) {
            e.preventDefault();
            ws.send(new Uint8Array([21]));
          }
        });
        ws.onopen = () => setTimeout(resolve, 500);
        ws.onerror = () => reject(new Error("bare websocket failed"));
      }),
    { unit },
  );
  await bare.focus("#t");
  for (const p of [page, bare])
    await p.evaluate(() => {
      window.__samples = [];
      window.__t0 = 0;
    });
  await typeKeys(page, 20);
  await typeKeys(bare, 20);
  // In alternating blocks, so that a change of the machine's load falls on both alike.
  const consoleEcho = [];
  const bareEcho = [];
  for (let done = 0; done < KEYS; done += 25) {
    await page.bringToFront();
    consoleEcho.push(...(await typeKeys(page, Math.min(25, KEYS - done))));
    await bare.bringToFront();
    bareEcho.push(...(await typeKeys(bare, Math.min(25, KEYS - done))));
  }
  await ctx.close();

  const kib = (n) => `${(n / 1024).toFixed(1)} KiB`;
  const p50c = percentile(consoleEcho, 50);
  const p50b = percentile(bareEcho, 50);
  console.log(
    `console size: all assets ${kib(all)} (brotli); first load ${kib(firstLoad)} transferred (goal <= 300 KiB)`,
  );
  console.log(
    `units table: p50 ${fmt(percentile(tables, 50))} (max ${fmt(Math.max(...tables))}) from navigation start, ${LOADS} cold loads; blank page p50 ${fmt(percentile(blanks, 50))} (goal <= 500 ms)`,
  );
  console.log(
    `keystroke echo p50: console ${fmt(p50c)} (p90 ${fmt(percentile(consoleEcho, 90))}), bare websocket ${fmt(p50b)} (p90 ${fmt(percentile(bareEcho, 90))}): ${(p50c / p50b).toFixed(2)}x over ${KEYS} keys each (goal <= 1.2x)`,
  );
} finally {
  await browser?.close().catch(() => {});
  await server.stop();
}
