// The fleet page at N simulated agents (default 15,000): a real controller, opamp-load
// (bench/opamp_load.c, idle mode, agents kept connected for the settle time) and the console
// in headless Chromium. Prints the figures docs/benchmarks.md quotes:
//   - first render: navigation to #/fleet until the first page of rows and the counts show;
//   - filtered view: typing a selector until the table shows the matching page and count;
//   - next page, and one live refresh (summary + page), as the page measures it;
//   - the two API calls behind the page, timed from Node.
// Not a test (nothing to pass or fail but a sanity check). Usage:
//   PF_CONTROLLER_BIN=... PF_LOAD_BIN=... PF_UI_DIR=... node bench_fleet.mjs [--agents N]
// Bounded: opamp-load's --timeout and a deadline on every wait; everything started is stopped.
import { chromium } from "playwright-core";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { openSync } from "node:fs";
import { Fleet, waitUntil } from "./harness.mjs";

const i = process.argv.indexOf("--agents");
const N = i > 0 ? Number(process.argv[i + 1]) : 15000;
const RUNS = 5;
const LOAD_BIN = process.env.PF_LOAD_BIN;
const CHROMIUM = process.env.PF_CHROMIUM || "/usr/bin/chromium";
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
  "--disable-component-update", "--no-first-run"];

const median = (a) => a.slice().sort((x, y) => x - y)[Math.floor(a.length / 2)];
const fleet = new Fleet();
let load = null, browser = null;
try {
  await fleet.startController(["--max-agents", String(N + 1000)]);
  const fd = openSync(join(fleet.dir, "opamp-load.log"), "a");
  load = spawn(LOAD_BIN, ["--mode", "idle", "--agents", String(N), "--port", String(fleet.port),
    "--data-dir", fleet.dataDir, "--settle", "240", "--timeout", "400"], { stdio: ["ignore", fd, fd] });
  await waitUntil(async () => (await fleet.api("GET", "/fleet/summary")).body.connected >= N,
    { timeout: 180000, interval: 500, what: `${N} agents connected` });

  const apiMs = async (path) => {
    const t = [];
    for (let k = 0; k < RUNS; k++) {
      const t0 = performance.now();
      const r = await fleet.api("GET", path);
      if (r.status !== 200) throw new Error(path + ": " + r.status);
      t.push(performance.now() - t0);
    }
    return median(t);
  };
  const results = {
    "api: GET /fleet/summary": await apiMs("/fleet/summary"),
    "api: GET /agents?limit=100": await apiMs("/agents?limit=100"),
    "api: GET /agents?selector=bench.shard=3&limit=100": await apiMs("/agents?selector=bench.shard%3D3&limit=100"),
    "api: GET /agents?limit=1000 (the API default page, for comparison)": await apiMs("/agents?limit=1000"),
  };

  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS });
  // waitForFunction evaluates strings, which the console's CSP forbids: bypass it here only
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 }, bypassCSP: true })).newPage();
  await page.goto(`${fleet.base}/ui/#/login`);
  await page.fill("#token", fleet.adminToken);
  await page.click("form.login button[type=submit]");
  await page.waitForSelector("tr[data-uid]");

  const first = [], filtered = [], next = [], refresh = [], card = [];
  for (let k = 0; k < RUNS; k++) {
    await page.goto("about:blank");
    const t0 = Date.now();
    await page.goto(`${fleet.base}/ui/#/fleet`);
    await page.waitForFunction((n) => document.querySelectorAll("tr[data-uid]").length === 100 &&
      document.querySelector("[data-testid=count-all] .n")?.textContent === n.toLocaleString("en-US"), N, { timeout: 30000 });
    first.push(Date.now() - t0);

    const t1 = Date.now();
    await page.fill("#selector", "bench.shard=3");
    await page.waitForFunction(() => /of [\d,]+ agents matching/.test(document.querySelector("[data-testid=fleet-info]").textContent) &&
      [...document.querySelectorAll("tr[data-uid] .label")].some((l) => l.textContent === "bench.shard=3"), null, { timeout: 30000 });
    filtered.push(Date.now() - t1 - 250); // minus the input debounce

    const before = await page.getAttribute("tr[data-uid]", "data-uid");
    const t2 = Date.now();
    await page.click("text=Next →");
    await page.waitForFunction((b) => document.querySelector("tr[data-uid]").getAttribute("data-uid") !== b, before, { timeout: 30000 });
    next.push(Date.now() - t2);

    await page.waitForFunction(() => /\((\d+) ms\)/.test(document.querySelector(".live").textContent), null, { timeout: 10000 });
    refresh.push(Number(/\((\d+) ms\)/.exec(await page.textContent(".live"))[1]));

    // a count card: only the healthy agents (state=healthy, evaluated by the controller)
    await page.fill("#selector", "");
    await page.goto(`${fleet.base}/ui/#/fleet`);
    await page.waitForSelector("[data-testid=count-healthy]");
    const t3 = Date.now();
    await page.click("[data-testid=count-healthy]");
    await page.waitForFunction(() => document.querySelector("[data-testid=count-healthy]").classList.contains("active") &&
      /matching/.test(document.querySelector("[data-testid=fleet-info]").textContent), null, { timeout: 30000 });
    card.push(Date.now() - t3);
  }
  const info = await page.textContent("[data-testid=fleet-info]");
  Object.assign(results, {
    "page: first render (navigation → 100 rows + counts)": median(first),
    "page: filtered view (selector typed → matching rows), debounce excluded": median(filtered),
    "page: next page": median(next),
    "page: count card filter (state=healthy → rows and counts)": median(card),
    "page: one live refresh (summary + page, every 3 s)": median(refresh),
  });
  console.log(`fleet page with ${N} connected agents (medians of ${RUNS}); filtered: ${info}`);
  for (const [k, v] of Object.entries(results)) console.log(`${k}: ${v.toFixed(1)} ms`);
} finally {
  if (browser) await browser.close();
  if (load) load.kill("SIGTERM");
  await fleet.stop();
}
