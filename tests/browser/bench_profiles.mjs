// The Profiles page over a store of N agents x W 10-second windows (default 100 x 360: one
// hour), as profstore-bench (bench/profstore_bench.c) writes it with -d: a real controller on
// that database and the console in headless Chromium. Prints the figures docs/benchmarks.md
// quotes, each run interleaved with its baselines (A, B, A, B…), medians and spread:
//   - load: navigation to #/profiles over the hour until the timeline and the flame graph are
//     drawn and the page's main thread is free (the page is interactive), against the same API
//     calls timed from Node;
//   - brush: a brush on the timeline until the flame graph of that range is drawn and the main
//     thread is free, against the API calls it made for the graph and its table (the page's
//     own URLs, from its resource timing) timed from Node;
//   - with --ui-base DIR, a second controller on a copy of the same database serving the console
//     built in DIR (another version of ui/: a same-run A/B of the page itself), each step of
//     both consoles interleaved and their ratio printed; with --controller-base BIN as well,
//     that second controller is BIN (another build: an A/B of controller and console).
// For each step, where its time goes, on the page's clock from the step's start (the change of
// the URL's hash or the mouse's release): when the flame graph's tree and the top table's answers had arrived
// (resource timing), when the graph was drawn and when the main thread was free; and
// Chromium's own accounting of the main thread over the step (CDP Performance.getMetrics:
// script, layout, style recalculation, all tasks; polling from Node adds tasks of its own).
// Not a test (nothing to pass or fail). Usage:
//   PF_CONTROLLER_BIN=... PF_PROFSTORE_BENCH_BIN=... PF_UI_DIR=... node bench_profiles.mjs [--db DIR]
//     [--ui-base DIR [--controller-base BIN]] [--runs N] [--agents N --windows W]
// (--db: a directory where profstore-bench -d already wrote bench.db; else it runs it).
// Bounded: a deadline on every wait; everything started is stopped.
import { chromium } from "playwright-core";
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { Fleet, UI_DIR, waitUntil } from "./harness.mjs";

const arg = (k, d) => { const i = process.argv.indexOf(k); return i > 0 ? process.argv[i + 1] : d; };
const AGENTS = Number(arg("--agents", 100)), WINDOWS = Number(arg("--windows", 360));
const RUNS = Number(arg("--runs", 5));
const UI_BASE = arg("--ui-base", "");
const CONTROLLER_BASE = arg("--controller-base", "");
const CHROMIUM = process.env.PF_CHROMIUM || "/usr/bin/chromium";
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
  "--disable-component-update", "--no-first-run"];
const T0 = 1700000000000; // profstore-bench's first window
const FROM = T0, TO = T0 + WINDOWS * 10e3;

const median = (a) => a.slice().sort((x, y) => x - y)[Math.floor(a.length / 2)];
const spread = (a) => `${Math.min(...a).toFixed(0)}–${Math.max(...a).toFixed(0)}`;
const fig = (a) => `${median(a).toFixed(0)} ms (${spread(a)})`;

// A controller on a copy of the store's database, serving the console in uiDir.
async function controllerOn(db, uiDir, bin) {
  const fleet = new Fleet();
  mkdirSync(join(fleet.dir, "controller-data"), { recursive: true });
  copyFileSync(join(db, "bench.db"), join(fleet.dir, "controller-data", "profleet.db"));
  if (existsSync(join(db, "bench.db-wal"))) copyFileSync(join(db, "bench.db-wal"), join(fleet.dir, "controller-data", "profleet.db-wal"));
  // profstore-bench's database holds tokens already (no bootstrap): an admin token imported on
  // start, where the harness reads the bootstrap's
  writeFileSync(join(fleet.dir, "controller-data", "admin.token"), randomBytes(24).toString("hex") + "\n", { mode: 0o600 });
  // the bench's profiles were received in 2023: a retention that keeps them
  await fleet.startController(["--admin-token-file", join(fleet.dir, "controller-data", "admin.token"),
    "--profile-retention-hours", String(24 * 366 * 10), "--profile-max-bytes", String(2 ** 40)], bin ? { uiDir, bin } : { uiDir });
  return fleet;
}

// A signed-in tab on fleet's console, with a CDP session for the page's metrics.
async function tabOn(browser, fleet) {
  const ctx = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const page = await ctx.newPage();
  await page.goto(`${fleet.base}/ui/#/login`);
  await page.fill("#token", fleet.adminToken);
  await page.click("form.login button[type=submit]");
  await page.waitForSelector("[data-testid=role]");
  const cdp = await ctx.newCDPSession(page);
  await cdp.send("Performance.enable");
  const requested = [];
  page.on("request", (r) => requested.push(r.url()));
  return { fleet, page, cdp, requested, load: [], loadApi: [], brush: [], brushApi: [], metrics: { load: [], brush: [] }, marks: { load: [], brush: [] } };
}

const METRICS = ["ScriptDuration", "LayoutDuration", "RecalcStyleDuration", "TaskDuration"];
async function metrics(cdp) {
  const m = Object.fromEntries((await cdp.send("Performance.getMetrics")).metrics.map((x) => [x.name, x.value]));
  return METRICS.map((k) => (m[k] || 0) * 1000);
}

// drawn: the flame graph of the selection is on the page (an SVG of frames, or a canvas that
// says how many it drew), different from the one before when before is given: the page's
// clock then, else false
const drawnIn = (b) => {
  const f = document.querySelector(".flame[data-total]");
  return !!(f && (b === null || f.getAttribute("data-total") !== b) &&
    f.querySelector("[data-testid=flame-chart] svg rect, [data-testid=flame-chart] canvas[data-frames]")) && performance.now();
};
// (polled from Node: the page's CSP refuses the string evaluation waitForFunction uses)
async function drawn(page, before, what) {
  let at = 0;
  await waitUntil(async () => (at = await page.evaluate(drawnIn, before)), { timeout: 60000, interval: 5, what });
  return at;
}
// the main thread free again: a frame painted and a task after it (the page's clock then)
const settled = (page) => page.evaluate(() => new Promise((r) => requestAnimationFrame(() => setTimeout(() => r(performance.now()), 0))));
// when the answers of the flame graph and the top table arrived, on the page's clock (one
// answer for both from a console that asks /flamegraph?top=N)
const answered = (page) => page.evaluate(() => {
  const at = (re) => Math.max(0, ...performance.getEntriesByType("resource").filter((e) => re.test(e.name)).map((e) => e.responseEnd));
  return [at(/\/api\/v1\/flamegraph\?/), at(/\/api\/v1\/top\?|\/api\/v1\/flamegraph\?.*[?&]top=/)];
});
// the API paths (below /api/v1) of the graph and the table among the requests urls
const treeCalls = (urls) => urls.map((s) => new URL(s))
  .filter((u) => /^\/api\/v1\/(flamegraph|top)$/.test(u.pathname)).map((u) => u.pathname.slice(7) + u.search);
const MARKS = ["tree answered", "top answered", "graph drawn", "main thread free"];

async function apiMs(fleet, paths) {
  const t = performance.now();
  await Promise.all(paths.map((p) => fleet.api("GET", p)));
  return performance.now() - t;
}

// One step of tab timed (step: "load" or "brush"): act() starts it; it ends when a flame graph
// other than before is drawn and the main thread is free.
async function timed(tab, step, act, before) {
  const { page, cdp } = tab;
  // (a navigation changes the hash only: the same document, its clock goes on)
  const p0 = await page.evaluate(() => { performance.clearResourceTimings(); return performance.now(); });
  const m0 = await metrics(cdp);
  const t = performance.now();
  tab.requested.length = 0;
  await act();
  const at = await drawn(page, before, `the flame graph (${step})`);
  const free = await settled(page);
  tab[step].push(performance.now() - t);
  tab.marks[step].push([...(await answered(page)), at, free].map((v) => v - p0));
  tab.calls = treeCalls(tab.requested);
  const m1 = await metrics(cdp);
  tab.metrics[step].push(m1.map((v, i) => v - m0[i]));
}

async function loadOnce(tab) {
  const { page, fleet } = tab;
  await page.goto(`${fleet.base}/ui/#/fleet`);
  await page.waitForSelector("main#main");
  await timed(tab, "load", async () => {
    await page.goto(`${fleet.base}/ui/#/profiles?from=${FROM}&to=${TO}`);
    await page.waitForSelector("[data-testid=timeline] svg .timeline-area", { timeout: 60000 });
  }, null);
  tab.loadApi.push(await apiMs(fleet, [`/profiles?from=${FROM}&to=${TO}&type=cpu&limit=1000`, ...tab.calls]));
}

async function brushOnce(tab, r) {
  const { page, fleet } = tab;
  const box = await page.locator("[data-testid=timeline] svg").boundingBox();
  const x0 = 0.3 + 0.1 * (r % 3);
  await page.mouse.move(box.x + box.width * x0, box.y + 40);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * (x0 + 0.25), box.y + 40, { steps: 4 });
  const before = await page.getAttribute(".flame[data-total]", "data-total");
  await timed(tab, "brush", () => page.mouse.up(), before);
  tab.brushApi.push(await apiMs(fleet, tab.calls));
}

function report(name, tab) {
  const m = (step) => METRICS.map((k, i) => `${k.replace("Duration", "").replace("RecalcStyle", "style")} ${median(tab.metrics[step].map((x) => x[i])).toFixed(0)}`).join(", ");
  const at = (step) => MARKS.map((k, i) => `${k} +${median(tab.marks[step].map((x) => x[i])).toFixed(0)}`).join(", ");
  console.log(`${name}: load until interactive ${fig(tab.load)}, its API calls from Node ${fig(tab.loadApi)}, ratio ${(median(tab.load) / median(tab.loadApi)).toFixed(2)}`);
  console.log(`  from navigation: ${at("load")}; main thread ms: ${m("load")}`);
  console.log(`${name}: brush until redrawn ${fig(tab.brush)}, its API calls from Node ${fig(tab.brushApi)}, ratio ${(median(tab.brush) / median(tab.brushApi)).toFixed(2)}`);
  console.log(`  from the release: ${at("brush")}; main thread ms: ${m("brush")}`);
}

const fleets = [];
let browser = null;
try {
  let db = arg("--db", "");
  if (!db) {
    const scratch = new Fleet();
    fleets.push(scratch);
    db = join(scratch.dir, "bench");
    mkdirSync(db, { recursive: true });
    execFileSync(process.env.PF_PROFSTORE_BENCH_BIN, ["-a", String(AGENTS), "-w", String(WINDOWS), "-q", "1", "-d", db], { stdio: "inherit" });
  }
  if (!existsSync(join(db, "bench.db"))) throw new Error("no bench.db in " + db);
  const consoles = [["console", UI_DIR]];
  if (UI_BASE) consoles.unshift(["base console", UI_BASE]);
  const tabs = [];
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS });
  for (const [name, dir] of consoles) {
    const fleet = await controllerOn(db, dir, name === "base console" ? CONTROLLER_BASE : "");
    fleets.push(fleet);
    const tab = await tabOn(browser, fleet);
    tab.name = name;
    tabs.push(tab);
  }
  const newest = (await tabs[0].fleet.api("GET", `/profiles?from=${FROM}&to=${TO}&limit=1`)).body.profiles[0];
  if (!newest) throw new Error("no profiles in the store's range");
  console.log(`store: ${AGENTS} agents x ${WINDOWS} windows of 10 s from ${new Date(FROM).toISOString()}; newest window ${new Date(newest.start_ms).toISOString()}`);
  // one unmeasured load each: caches warm on both controllers alike
  for (const tab of tabs) await loadOnce(tab);
  for (const tab of tabs) for (const k of ["load", "loadApi"]) tab[k].length = 0;
  tabs.forEach((t) => { t.metrics.load.length = 0; t.marks.load.length = 0; });
  for (let r = 0; r < RUNS; r++) {
    for (const tab of tabs) await loadOnce(tab);
    for (const tab of tabs) await brushOnce(tab, r);
  }
  for (const tab of tabs) report(tab.name, tab);
  for (const tab of tabs) console.log(`${tab.name} asks for: ${tab.calls.join(" ")}`);
  if (tabs.length === 2) {
    const [a, b] = tabs;
    console.log(`console ÷ base console: load ${(median(b.load) / median(a.load)).toFixed(2)}, brush ${(median(b.brush) / median(a.brush)).toFixed(2)}`);
  }
} finally {
  if (browser) await browser.close();
  for (const f of fleets) await f.stop();
}
