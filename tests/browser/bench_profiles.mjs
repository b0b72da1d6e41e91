// The Profiles page over a store of N agents x W 10-second windows (default 100 x 360: one
// hour), as profstore-bench (bench/profstore_bench.c) writes it with -d: a real controller on
// that database and the console in headless Chromium. Prints the figures docs/benchmarks.md
// quotes, each run interleaved with its baseline (A, B, A, B…), medians and spread:
//   - load: navigation to #/profiles over the hour until the timeline and the flame graph are
//     drawn (the page is interactive), against the same API calls timed from Node;
//   - brush: a brush on the timeline until the flame graph of that range is drawn, against
//     the two API calls it makes (flame graph and top) timed from Node.
// Not a test (nothing to pass or fail). Usage:
//   PF_CONTROLLER_BIN=... PF_PROFSTORE_BENCH_BIN=... PF_UI_DIR=... node bench_profiles.mjs [--db DIR]
// (--db: a directory where profstore-bench -d already wrote bench.db; else it runs it).
// Bounded: a deadline on every wait; everything started is stopped.
import { chromium } from "playwright-core";
import { execFileSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, writeFileSync } from "node:fs";
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { Fleet, waitUntil } from "./harness.mjs";

const arg = (k, d) => { const i = process.argv.indexOf(k); return i > 0 ? process.argv[i + 1] : d; };
const AGENTS = Number(arg("--agents", 100)), WINDOWS = Number(arg("--windows", 360));
const RUNS = Number(arg("--runs", 5));
const CHROMIUM = process.env.PF_CHROMIUM || "/usr/bin/chromium";
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
  "--disable-component-update", "--no-first-run"];
const T0 = 1700000000000; // profstore-bench's first window
const FROM = T0, TO = T0 + WINDOWS * 10e3;

const median = (a) => a.slice().sort((x, y) => x - y)[Math.floor(a.length / 2)];
const spread = (a) => `${Math.min(...a).toFixed(0)}–${Math.max(...a).toFixed(0)}`;
const fmt = (name, a, b) => console.log(`${name}: ${median(a).toFixed(0)} ms (${spread(a)}), baseline ${median(b).toFixed(0)} ms (${spread(b)}), ratio ${(median(a) / median(b)).toFixed(2)}`);

const fleet = new Fleet();
let browser = null;
try {
  let db = arg("--db", "");
  if (!db) {
    db = join(fleet.dir, "bench");
    mkdirSync(db, { recursive: true });
    execFileSync(process.env.PF_PROFSTORE_BENCH_BIN, ["-a", String(AGENTS), "-w", String(WINDOWS), "-q", "1", "-d", db], { stdio: "inherit" });
  }
  mkdirSync(join(fleet.dir, "controller-data"), { recursive: true });
  if (!existsSync(join(db, "bench.db"))) throw new Error("no bench.db in " + db);
  copyFileSync(join(db, "bench.db"), join(fleet.dir, "controller-data", "profleet.db"));
  if (existsSync(join(db, "bench.db-wal"))) copyFileSync(join(db, "bench.db-wal"), join(fleet.dir, "controller-data", "profleet.db-wal"));
  // profstore-bench's database holds tokens already (no bootstrap): an admin token imported on
  // start, where the harness reads the bootstrap's
  writeFileSync(join(fleet.dir, "controller-data", "admin.token"), randomBytes(24).toString("hex") + "\n", { mode: 0o600 });
  // the bench's profiles were received in 2023: a retention that keeps them
  await fleet.startController(["--admin-token-file", join(fleet.dir, "controller-data", "admin.token"),
    "--profile-retention-hours", String(24 * 366 * 10), "--profile-max-bytes", String(2 ** 40)]);
  const newest = (await fleet.api("GET", `/profiles?from=${FROM}&to=${TO}&limit=1`)).body.profiles[0];
  if (!newest) throw new Error("no profiles in the store's hour");
  console.log(`store: ${AGENTS} agents x ${WINDOWS} windows of 10 s from ${new Date(FROM).toISOString()}; newest window ${new Date(newest.start_ms).toISOString()}`);

  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS });
  const ctx = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  const page = await ctx.newPage();
  await page.goto(`${fleet.base}/ui/#/login`);
  await page.fill("#token", fleet.adminToken);
  await page.click("form.login button[type=submit]");
  await page.waitForSelector("[data-testid=role]");

  const hash = `#/profiles?from=${FROM}&to=${TO}`;
  const apiMs = async (paths) => {
    const t = performance.now();
    await Promise.all(paths.map((p) => fleet.api("GET", p)));
    return performance.now() - t;
  };
  const drawn = () => page.waitForSelector(".flame[data-total] [data-testid=flame-chart] svg rect", { timeout: 60000 });
  const load = [], loadBase = [], brush = [], brushBase = [];
  for (let r = 0; r < RUNS; r++) {
    await page.goto(`${fleet.base}/ui/#/fleet`);
    await page.waitForSelector("main#main");
    let t = performance.now();
    await page.goto(`${fleet.base}/ui/${hash}`);
    await page.waitForSelector("[data-testid=timeline] svg .timeline-area", { timeout: 60000 });
    await drawn();
    load.push(performance.now() - t);
    loadBase.push(await apiMs([`/profiles?from=${FROM}&to=${TO}&type=cpu&limit=1000`,
      `/flamegraph?from=${FROM}&to=${TO}&type=cpu&max_nodes=20000`, `/top?from=${FROM}&to=${TO}&type=cpu&limit=200`]));

    const box = await page.locator("[data-testid=timeline] svg").boundingBox();
    const x0 = 0.3 + 0.1 * (r % 3);
    await page.mouse.move(box.x + box.width * x0, box.y + 40);
    await page.mouse.down();
    await page.mouse.move(box.x + box.width * (x0 + 0.25), box.y + 40, { steps: 4 });
    const before = await page.getAttribute(".flame[data-total]", "data-total");
    t = performance.now();
    await page.mouse.up();
    // (polled from Node: the page's CSP refuses the string evaluation waitForFunction uses)
    await waitUntil(() => page.evaluate((b) => {
      const f = document.querySelector(".flame[data-total]");
      return !!(f && f.getAttribute("data-total") !== b && f.querySelector("svg rect"));
    }, before), { timeout: 60000, interval: 5, what: "the brushed flame graph" });
    brush.push(performance.now() - t);
    const sel = new URLSearchParams(new URL(page.url()).hash.split("?")[1]).get("sel").split("-");
    brushBase.push(await apiMs([`/flamegraph?from=${sel[0]}&to=${sel[1]}&type=cpu&max_nodes=20000`, `/top?from=${sel[0]}&to=${sel[1]}&type=cpu&limit=200`]));
  }
  fmt("load until interactive", load, loadBase);
  fmt("brush until redrawn", brush, brushBase);
} finally {
  if (browser) await browser.close();
  await fleet.stop();
}
