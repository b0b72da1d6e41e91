// The fleet console in headless Chromium (Debian's chromium, driven by playwright-core)
// against a real controller and real agents on loopback: login, fleet states, a bad
// selector, a config error with its key path and the fix turning agents APPLIED, a capture
// with its flame graph and top table, a profile found by trace id, a viewer without edit
// buttons, and no console errors or CSP violations on any page. Screenshots of every page go
// to PF_SCREENSHOT_DIR. The Profiles explorer runs against two Python workloads in two
// services (checkout, search): pick a service, add a label matcher from its autocompleted
// names and values, the type picker, brush the timeline (the graph's total follows the API's
// for the brushed range), compare two ranges, open a frame in a new tab, reload from the URL. Run through ctest (label browser); exits 77 (skipped) when chromium,
// playwright-core or the built console is missing. The capture steps need the agents' eBPF
// sampler (root): where the kernel refuses BPF they are skipped, and say so.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { Fleet, waitUntil, samplerLoaded, CONTROLLER_BIN, AGENT_BIN, UI_DIR } from "./harness.mjs";

const CHROMIUM = process.env.PF_CHROMIUM || "/usr/bin/chromium";
const SHOTS = process.env.PF_SCREENSHOT_DIR || join(process.cwd(), "browser-screenshots");
const FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
  "--disable-component-update", "--no-first-run"];
const TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const GOOD = (url, hz) => `profiling:
  sampling: {frequency_hz: ${hz}, duration_seconds: 5}
  exporters:
    - {type: otlp_http, endpoint: "${url}/v1development/profiles", auth: agent_token}
`;

let playwright;
try {
  playwright = await import("playwright-core");
} catch {
  console.log("SKIP: playwright-core is not installed (npm ci in tests/browser)");
  process.exit(77);
}
for (const [what, p] of [["chromium", CHROMIUM], ["PF_CONTROLLER_BIN", CONTROLLER_BIN], ["PF_AGENT_BIN", AGENT_BIN],
  ["the built console (PF_UI_DIR)", join(UI_DIR, "index.html")]]) {
  if (!p || !existsSync(p)) {
    console.log(`SKIP: ${what} not found (${p})`);
    process.exit(77);
  }
}

const fleet = new Fleet();
let browser, ctx, page, viewerToken;
const problems = []; // console errors, page errors, CSP violations, failed requests
// Chromium logs every 4xx answer to fetch() as a console error. These are the ones a step
// provokes on purpose; any other is a problem. The rollouts API is not on this controller
// yet: the configs page's probe is answered 404 and shows "rollouts not available".
// A controller without the store's label, timeline and profile-type routes answers them 404 and
// the Profiles page falls back to the profile list (probed once per tab).
const ALWAYS_EXPECTED = [[404, /\/api\/v1\/rollouts$/], [404, /\/api\/v1\/(labels|timeline|profile_types)(\/|\?|$)/]];
let expected = [];
function isExpected(msg, url) {
  const m = /^Failed to load resource: the server responded with a status of (\d+)/.exec(msg);
  if (!m) return false;
  return [...ALWAYS_EXPECTED, ...expected].some(([st, re]) => st === Number(m[1]) && re.test(url || ""));
}
const uids = {};
let ebpf = false;

async function shot(name) {
  mkdirSync(SHOTS, { recursive: true });
  await page.waitForTimeout(400); // let late redraws (a resize, the sandwich) settle
  await page.screenshot({ path: join(SHOTS, name + ".png"), fullPage: true });
}

// The flame graph is a canvas that says how many frames it drew; its frames (name, depth,
// value, highlighted, box) are read from it, and pointed at by their coordinates.
const FLAME_DRAWN = "[data-testid=flame-chart] canvas[data-frames]";
const drawnFrames = () => page.locator(FLAME_DRAWN).first().evaluate((c) => c.flameFrames());
async function atFrame(pick, act) {
  const canvas = page.locator(FLAME_DRAWN).first();
  const f = pick(await drawnFrames());
  assert.ok(f, "a frame drawn to point at");
  // the frame's row to the middle of the window first: a deep graph is taller than the window
  await canvas.evaluate((c, y) => window.scrollBy(0, c.getBoundingClientRect().top + y - innerHeight / 2), f.y + f.h / 2);
  const box = await canvas.boundingBox();
  await page.mouse[act](box.x + f.x + Math.min(f.w / 2, 40), box.y + f.y + f.h / 2);
  return f;
}
const hoverFrame = (pick) => atFrame(pick, "move");
const clickFrame = (pick) => atFrame(pick, "click");

// page.waitForSelector, but a timeout says what the page showed instead (its URL and text).
async function waitFor(sel, opts) {
  try {
    return await page.waitForSelector(sel, opts);
  } catch (e) {
    const text = await page.textContent("body").catch(() => "?");
    throw new Error(`${e.message.split("\n")[0]} on ${page.url()}; the page showed: ${(text || "").replace(/\s+/g, " ").slice(0, 600)}`);
  }
}

async function openPage(hash) {
  await page.goto(`${fleet.base}/ui/${hash}`);
  await waitFor("main#main");
}

async function login(token) {
  await openPage("#/login");
  await page.fill("#token", token);
  await page.click("form.login button[type=submit]");
  await waitFor("[data-testid=role]");
}

async function apiAgents() {
  return (await fleet.api("GET", "/agents")).body.agents;
}

function stateOf(a) {
  return !a.connected ? "disconnected" : a.stale ? "stale" : a.healthy ? "healthy" : "unhealthy";
}

function watch(p) {
  p.on("console", (m) => {
    if (m.type() === "error" && !isExpected(m.text(), m.location().url))
      problems.push(`${p.url()}: console: ${m.text()} (${m.location().url})`);
  });
  p.on("pageerror", (e) => problems.push(`${p.url()}: page error: ${e.message}`));
  p.on("requestfailed", (r) => {
    const e = r.failure()?.errorText || "";
    if (!/ERR_ABORTED/.test(e)) problems.push(`${p.url()}: request failed: ${r.url()} ${e}`);
  });
}

before(async () => {
  await fleet.startController();
  viewerToken = await fleet.addToken("viewer", "browser viewer");
  const put = await fleet.api("PUT", "/configs/default", GOOD(fleet.base, 49));
  assert.ok(put.status === 201, JSON.stringify(put));
  fleet.startAgent("web1", ["env=prod", "team=pay"]);
  fleet.startAgent("web2", ["env=prod", "team=web"]);
  fleet.startAgent("dev1", ["env=dev"], ["--no-sampler"]);
  fleet.startAgent("gone1", ["env=dev", "team=old"], ["--no-sampler"]);
  for (const n of ["web1", "web2", "dev1", "gone1"]) uids[n] = await fleet.agentUid(n);
  await waitUntil(async () => (await apiAgents()).filter((a) => a.connected && a.config.status === "APPLIED").length === 4,
    { timeout: 20000, what: "4 agents APPLIED" });
  await fleet.agents.gone1.proc.stop();
  await waitUntil(async () => (await apiAgents()).some((a) => a.instance_uid === uids.gone1 && !a.connected),
    { what: "gone1 disconnected" });
  // The sampler loads in the background: wait for both agents to say loaded or refused.
  const refused = (n) => /eBPF sampler unavailable/.test(fleet.agents[n].proc.output());
  await waitUntil(async () => ["web1", "web2"].every((n) => samplerLoaded(fleet, n) || refused(n)),
    { timeout: 30000, what: "the agents' samplers loaded or refused" });
  ebpf = samplerLoaded(fleet, "web1") && samplerLoaded(fleet, "web2");

  browser = await playwright.chromium.launch({ executablePath: CHROMIUM, headless: true, args: FLAGS });
  ctx = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  await ctx.addInitScript(() => {
    document.addEventListener("securitypolicyviolation", (e) =>
      console.error(`CSP violation: ${e.violatedDirective} blocked ${e.blockedURI}`));
  });
  page = await ctx.newPage();
  watch(page);
});

after(async () => {
  if (browser) await browser.close();
  const ctl = await fleet.stop({ keep: !!process.env.PF_KEEP_TEST_DIRS });
  // a clean exit on SIGTERM (under ASan: no leak or error report)
  assert.ok(ctl && ctl.code === 0, `controller exit ${JSON.stringify({ code: ctl?.code, sig: ctl?.sig })}:\n${ctl?.log.slice(-3000)}`);
});

test("the console's files carry a strict CSP, nosniff, caching and gzip", async () => {
  const r = await fetch(fleet.base + "/ui/", { headers: { "Accept-Encoding": "gzip" } });
  assert.equal(r.status, 200);
  const csp = r.headers.get("content-security-policy");
  assert.match(csp, /script-src 'self'/);
  assert.match(csp, /style-src 'self'/);
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
  assert.match(csp, /frame-ancestors 'none'/);
  assert.equal(r.headers.get("x-content-type-options"), "nosniff");
  assert.equal(r.headers.get("cache-control"), "no-cache");
  const html = await r.text();
  assert.doesNotMatch(html, /<script>|<style|style=/, "no inline script or style");
  const js = /src="(assets\/[^"]+\.js)"/.exec(html)[1];
  const a = await fetch(fleet.base + "/ui/" + js, { headers: { "Accept-Encoding": "gzip" } });
  assert.equal(a.status, 200);
  assert.match(a.headers.get("content-type"), /^text\/javascript/);
  assert.match(a.headers.get("cache-control"), /immutable/);
  const etag = a.headers.get("etag");
  const again = await fetch(fleet.base + "/ui/" + js, { headers: { "If-None-Match": etag } });
  assert.equal(again.status, 304);
  // API answers over 1 KiB go gzip'd to clients that accept it (fetch does)
  const agents = await fetch(fleet.base + "/api/v1/agents", { headers: { Authorization: "Bearer " + fleet.adminToken } });
  assert.equal(agents.headers.get("content-encoding"), "gzip");
  assert.equal((await agents.json()).agents.length, 4);
  const root = await fetch(fleet.base + "/", { redirect: "manual" });
  assert.equal(root.status, 302);
  assert.equal(root.headers.get("location"), "/ui/");
});

test("log in: a wrong token is refused, the admin token shows the fleet and the role", async () => {
  expected = [[401, /\/api\/v1\/whoami$/]];
  await openPage("#/login");
  await shot("01-login");
  await page.fill("#token", "pf_not_a_token");
  await page.click("form.login button[type=submit]");
  await waitFor(".login .error");
  assert.match(await page.textContent(".login .error"), /not valid/);
  await login(fleet.adminToken);
  assert.equal(await page.textContent("[data-testid=role]"), "admin");
  assert.equal(await page.evaluate(() => document.cookie), "", "no cookie");
  assert.ok(!page.url().includes(fleet.adminToken), "the token is not in the URL");
});

test("the fleet table shows every agent with its state, config and status", async () => {
  expected = [];
  await openPage("#/fleet");
  await waitFor("[data-testid=agents-table] tbody tr[data-uid]");
  const agents = await apiAgents();
  assert.equal(agents.length, 4);
  for (const a of agents) {
    const row = page.locator(`tr[data-uid="${a.instance_uid}"]`);
    assert.equal(await row.getAttribute("data-state"), stateOf(a), a.instance_uid);
    assert.match(await row.textContent(), /APPLIED/);
  }
  assert.equal(await page.getAttribute(`tr[data-uid="${uids.gone1}"]`, "data-state"), "disconnected");
  // which unwinders an agent's processes use (its "unwinders" health component): an agent
  // without a sampler has none
  assert.equal((await page.textContent(`tr[data-uid="${uids.dev1}"] [data-testid=unwinders]`)).trim(), "—");
  if (ebpf)
    await waitUntil(async () => /native \((unwind tables|frame pointers)\)/.test(
      await page.textContent(`tr[data-uid="${uids.web1}"] [data-testid=unwinders]`)),
      { what: "web1's unwinders in the fleet table" });
  assert.equal(await page.textContent("[data-testid=count-all] .n"), "4");
  assert.equal(await page.textContent("[data-testid=count-disconnected] .n"), "1");
  await shot("02-fleet");
  // a count card filters the table by state (the API's state=), a second click shows all
  await page.click("[data-testid=count-disconnected]");
  await waitUntil(async () => (await page.locator("tr[data-uid]").count()) === 1, { what: "1 disconnected row" });
  assert.equal(await page.getAttribute("tr[data-uid]", "data-uid"), uids.gone1);
  assert.match(page.url(), /state=disconnected/);
  await page.click("[data-testid=count-disconnected]");
  await waitUntil(async () => (await page.locator("tr[data-uid]").count()) === 4, { what: "4 rows again" });
  // a selector narrows the table, through the API's selector
  await page.fill("#selector", "env=prod");
  await waitUntil(async () => (await page.locator("[data-testid=agents-table] tbody tr[data-uid]").count()) === 2,
    { what: "2 prod agents" });
});

test("a bad selector shows its parse error inline", async () => {
  expected = [[400, /\/api\/v1\/agents\?/]];
  await page.fill("#selector", "env in (prod");
  await waitFor("[data-testid=selector-error]:not(:empty)");
  const msg = await page.textContent("[data-testid=selector-error]");
  assert.match(msg, /selector/);
  assert.equal(await page.locator("[data-testid=agents-table] tbody tr[data-uid]").count(), 0);
  await shot("03-fleet-bad-selector");
  await page.fill("#selector", "");
});

test("a config with an error shows the key path; the fix turns the agents APPLIED", async () => {
  await openPage("#/configs/default");
  await waitFor("#config-body");
  expected = [[400, /\/api\/v1\/configs\/default$/]];
  await page.fill("#config-body", GOOD(fleet.base, 49).replace("frequency_hz: 49", "frequency_hz: 5000"));
  await page.click("[data-testid=save]");
  await waitFor("[data-testid=config-error]");
  assert.equal(await page.textContent("[data-testid=config-error-path]"), "profiling.sampling.frequency_hz");
  assert.match(await page.textContent("[data-testid=config-error]"), /1\.\.1000/);
  assert.match(await page.textContent("[data-testid=config-error]"), /line 2/);
  await shot("04-config-error");
  expected = [];
  const before = (await fleet.api("GET", "/configs/default")).body.version;
  await page.fill("#config-body", GOOD(fleet.base, 29));
  await page.click("[data-testid=validate]");
  await waitFor("[data-testid=config-result] .ok");
  await page.click("[data-testid=save]");
  await waitFor("[data-testid=config-saved]");
  assert.match(await page.textContent("[data-testid=config-saved]"), new RegExp(`version ${before + 1}`));
  await openPage("#/fleet");
  const connected = (await apiAgents()).filter((a) => a.connected).map((a) => a.instance_uid);
  await waitUntil(async () => {
    for (const uid of connected) {
      const t = await page.locator(`tr[data-uid="${uid}"]`).textContent({ timeout: 1000 });
      if (!t.includes(`default v${before + 1}`) || !t.includes("APPLIED")) return false;
    }
    return true;
  }, { timeout: 20000, what: "connected agents APPLIED the new version in the table" });
  await openPage("#/configs/default");
  await waitFor("[data-testid=config-diff] .add");
  await shot("05-config-editor-diff");
  // A staged version rolled out in batches shows its per-batch progress and the actions its
  // state allows.
  const staged = await fleet.api("PUT", "/configs/default?stage=1", GOOD(fleet.base, 39));
  assert.ok(staged.status === 200 || staged.status === 201, JSON.stringify(staged.body));
  const ro = await fleet.api("POST", "/rollouts", JSON.stringify({ config: "default", strategy: { initial: 1, multiplier: 2, pause_seconds: 60 } }));
  assert.equal(ro.status, 202, JSON.stringify(ro.body));
  await openPage("#/configs");
  await waitFor(`[data-testid=rollout-row][data-id="${ro.body.id}"]`);
  const row = await page.textContent(`[data-testid=rollout-row][data-id="${ro.body.id}"]`);
  assert.match(row, /default v\d+/);
  assert.match(row, /#1 /);
  await shot("06-configs");
  page.once("dialog", (d) => d.accept());
  const answered = page.waitForResponse((r) => r.url().endsWith(`/rollouts/${ro.body.id}/cancel`));
  await page.click(`[data-testid=rollout-row][data-id="${ro.body.id}"] [data-testid=rollout-cancel]`);
  await waitUntil(async () => (await fleet.api("GET", "/rollouts/" + ro.body.id)).body.state === "cancelled",
    { timeout: 10000, what: "the rollout cancelled from the console" });
  // the page goes back to #/configs once its POST is answered: the next test navigates after
  // that, not before it (the console's own navigation would take the page back here)
  await answered;
  await waitUntil(async () => (await page.textContent(`[data-testid=rollout-row][data-id="${ro.body.id}"]`)
    .catch(() => "")).includes("cancelled"), { timeout: 10000, what: "the cancelled rollout shown" });
});

test("an agent page shows its description, health tree and effective config", async () => {
  await openPage(`#/agent/${uids.web1}`);
  await waitFor("[data-testid=health-tree]");
  assert.match(await page.textContent("main"), /env/);
  await waitFor("[data-testid=effective-config]");
  // 29 from the saved config, or 39 when the cancelled rollout's first batch moved this agent
  // (a cancel keeps moved agents on the new version).
  assert.match(await page.textContent("[data-testid=effective-config]"), /frequency_hz: (29|39)\b/);
  assert.equal(await page.locator("[data-testid=capture-now]").count(), 1);
  await shot("07-agent");
});

test("a capture shows live progress, then its flame graph and top table", async (t) => {
  if (!ebpf) return t.skip("the kernel refused BPF to the agents: no samples to capture");
  await openPage("#/captures");
  await page.fill("#cap-agents", "env=prod");
  await waitUntil(async () => /matches 2 agents/.test(await page.textContent("[data-testid=capture-matches]")),
    { what: "matches 2 agents" });
  await page.fill("#cap-duration", "3");
  await page.fill("[aria-label='trace id']", TRACE_ID);
  await page.fill("[aria-label=note]", "browser test");
  await shot("08-captures-form");
  await page.click("[data-testid=start-capture]");
  await waitFor("[data-testid=capture-agents]");
  await waitUntil(async () => /done|partial|failed/.test(await page.textContent("[data-testid=capture-state]")),
    { timeout: 45000, what: "capture ended" });
  assert.match(await page.textContent("[data-testid=capture-state]"), /done/);
  await waitFor(FLAME_DRAWN, { timeout: 20000 });
  assert.ok(Number(await page.getAttribute(FLAME_DRAWN, "data-frames")) > 3);
  assert.ok((await page.locator("[data-testid=top-table] tbody tr").count()) > 3);
  // hover shows self / total and share, and a tooltip with the frame's name
  const hovered = await hoverFrame((fs) => fs.find((f) => f.depth === 2) || fs.find((f) => f.depth === 1));
  assert.match(await page.textContent("[data-testid=flame-details]"), /self .*total/);
  assert.equal((await page.textContent("[data-testid=flame-chart] .flame-tip")).split("\n")[0], hovered.name);
  await shot("09-capture-done");
  // the agent page lists the capture that included it, with this agent's part
  const capId = decodeURIComponent(page.url().split("#/captures/")[1]);
  await openPage(`#/agent/${uids.web1}`);
  await waitFor(`[data-testid=agent-captures] a[href="#/captures/${capId}"]`);
  assert.match(await page.textContent("[data-testid=agent-captures]"), /this agent: done, [\d,]+ samples, \d+ profiles/);
  await shot("07-agent-captures");
});

test("a wall-clock capture: the type is sent, shown, and its flame graph is in time", async (t) => {
  if (!ebpf) return t.skip("the kernel refused BPF to the agents: no samples to capture");
  await openPage("#/captures");
  await page.fill("#cap-agents", "env=prod");
  await page.selectOption("[data-testid=capture-type]", "wall");
  await page.fill("#cap-duration", "3");
  await page.click("[data-testid=start-capture]");
  await waitFor("[data-testid=capture-agents]");
  assert.match(await page.textContent("[data-testid=capture-summary]"), /^wall profile/);
  await waitUntil(async () => /done|partial|failed/.test(await page.textContent("[data-testid=capture-state]")),
    { timeout: 45000, what: "capture ended" });
  assert.match(await page.textContent("[data-testid=capture-state]"), /done/);
  await waitFor(FLAME_DRAWN, { timeout: 20000 });
  await hoverFrame((fs) => fs.find((f) => f.depth === 1));
  assert.match(await page.textContent("[data-testid=flame-details]"), /\d (ns|µs|ms|s|min)\b/);
  const capId = decodeURIComponent(page.url().split("#/captures/")[1]);
  const cap = (await fleet.api("GET", `/captures/${encodeURIComponent(capId)}`)).body;
  assert.equal(cap.request.profile_type, "wall");
  assert.ok(cap.agents.every((a) => a.profile_type === "wall"));
});

test("a profile is found by trace id and shows its flame graph and top table", async (t) => {
  if (!ebpf) return t.skip("no captured profile without BPF");
  await openPage("#/profiles");
  await page.fill("#trace-id", TRACE_ID);
  await page.click("[data-testid=search]");
  // the list (folded when long) holds only profiles linked to the trace
  await waitFor("[data-testid=profiles-table] tbody tr", { state: "attached" });
  const api = await fleet.api("GET", `/profiles?trace_id=${TRACE_ID}&limit=100`);
  // the table may render again (a refresh) between the first row and the count
  const rows = () => page.locator("[data-testid=profiles-table] tbody tr").count();
  await waitUntil(async () => (await rows()) === api.body.profiles.length,
    { what: "the table lists the trace's profiles" });
  const listed = await rows();
  assert.equal(listed, api.body.profiles.length);
  assert.ok(listed > 0);
  await waitFor("[data-testid=trace-links]");
  assert.match(await page.textContent("[data-testid=trace-links]"), new RegExp(TRACE_ID));
  await waitFor(FLAME_DRAWN);
  assert.ok((await page.locator("[data-testid=top-table] tbody tr").count()) > 0);
  // pprof download: fetched with the token, saved from a blob (the token is never in a URL)
  const [dl] = await Promise.all([page.waitForEvent("download"), page.click("[data-testid=pprof-download]")]);
  assert.match(dl.suggestedFilename(), /^profile-\d+\.pb\.gz$/);
  const file = await dl.path();
  const bytes = readFileSync(file);
  assert.ok(bytes.length > 20 && bytes[0] === 0x1f && bytes[1] === 0x8b, "a gzip'd pprof");
  await shot("10-profile-by-trace");
  await openPage("#/profiles");
  await waitFor(FLAME_DRAWN, { timeout: 20000 });
  // search highlights the matching frames and counts matches; a top function opens its sandwich
  await page.fill(".flame-search", "syscall");
  await waitUntil(async () => /functions match/.test(await page.textContent(".flame-head .muted")), { what: "search result" });
  const searched = await drawnFrames();
  assert.deepEqual(searched.filter((f) => f.highlighted).map((f) => f.name), searched.filter((f) => /syscall/.test(f.name)).map((f) => f.name));
  await page.fill(".flame-search", "");
  await shot("11-profiles-merged");
  await page.locator("[data-testid=top-table] tbody tr td.fn a").first().click();
  await waitFor(".sandwich h3");
  await waitUntil(async () => (await page.locator(".sandwich .flame-chart canvas[data-frames]").count()) === 2, { what: "callers and callees" });
});

// The flame graph's total as the page shows it (the root's value).
async function pageTotal(p = page) {
  await p.waitForSelector(".flame[data-total] " + FLAME_DRAWN, { timeout: 20000 });
  return Number(await p.getAttribute(".flame[data-total]", "data-total"));
}

async function apiTotal(params) {
  const r = await fleet.api("GET", "/flamegraph?" + new URLSearchParams(params));
  assert.equal(r.status, 200, JSON.stringify(r.body));
  return r.body.value;
}

// The page's total equals the API's for the same query. Profiles keep arriving (the agents'
// windows reach the store late on a busy machine): a reading counts when the API answered the
// same before and after the page drew; else the page is reloaded (its URL holds the query) and
// read again, a bounded number of times.
async function totalMatchesApi(params) {
  let last = "";
  for (let i = 0; i < 8; i++) {
    const a = await apiTotal(params);
    if (i) await page.reload();
    const p = await pageTotal();
    const b = await apiTotal(params);
    if (a === b && p === a) return p;
    last = `page ${p}, API ${a} then ${b}`;
  }
  throw new Error(`the page's total never matched the API's for ${JSON.stringify(params)}: ${last}`);
}

function hashParams() {
  return new URLSearchParams(new URL(page.url()).hash.split("?")[1] || "");
}

test("the profiles explorer: service, label matcher, type, brush, compare, open a frame, reload", async (t) => {
  if (!ebpf) return t.skip("the kernel refused BPF to the agents: no profiles to explore");
  // started here, not with the fleet: the steps before (a capture's 3 s deadline) stay as light
  for (const svc of ["checkout", "search"])
    fleet.startWorkload(svc, ["python3", join(import.meta.dirname, "workload.py"), "600"], { OTEL_SERVICE_NAME: svc });
  // both services' windows from both agents are in the store
  await waitUntil(async () => {
    const c = (await fleet.api("GET", "/profiles?service=checkout&limit=1000")).body.profiles;
    const s = (await fleet.api("GET", "/profiles?service=search&limit=10")).body.profiles;
    return new Set(c.map((p) => p.agent)).size === 2 && c.length >= 12 && s.length > 0;
  }, { timeout: 150000, interval: 1000, what: "profiles of both services from both agents" });
  const from = (await fleet.api("GET", "/profiles?service=checkout&limit=1000")).body.profiles.reduce((a, p) => Math.min(a, p.start_ms), Infinity) - 60e3;
  const to = Date.now() - 5e3; // a range in the past: windows that started in it may still arrive, newer ones do not count
  await openPage(`#/profiles?from=${from}&to=${to}`);
  await waitFor("[data-testid=timeline] svg .timeline-area");
  await pageTotal();
  // the service picker lists the store's services
  await waitUntil(async () => {
    const opts = await page.locator("[data-testid=service] option").allTextContents();
    return opts.includes("checkout") && opts.includes("search");
  }, { what: "checkout and search in the service picker" });
  await page.selectOption("[data-testid=service]", "checkout");
  await waitUntil(() => hashParams().get("service") === "checkout", { what: "service in the URL" });
  await pageTotal();
  const both = await totalMatchesApi({ service: "checkout", from, to });
  assert.ok(both > 0);
  // a label matcher: its name and value autocompleted from the store
  await waitUntil(async () => (await page.locator("#label-names option[value='profleet.agent.uid']").count()) === 1, { what: "label names" });
  await page.fill("[data-testid=matcher-key]", "profleet.agent.uid");
  await page.focus("[data-testid=matcher-value]");
  await waitUntil(async () => (await page.locator(`#label-values option[value='${uids.web1}']`).count()) === 1, { what: "the agent uids as values" });
  await page.fill("[data-testid=matcher-value]", uids.web1);
  await page.click("[data-testid=add-matcher]");
  await waitUntil(() => hashParams().getAll("match").includes(`profleet.agent.uid=${uids.web1}`), { what: "the matcher in the URL" });
  await waitFor("[data-testid=matchers] .matcher");
  await waitUntil(async () => (await page.getAttribute(".flame[data-total]", "data-total").catch(() => null)) !== String(both),
    { what: "the graph redrawn for one agent" });
  const one = await totalMatchesApi({ service: "checkout", agent: uids.web1, from, to });
  assert.ok(one > 0 && one < await apiTotal({ service: "checkout", from, to }), `one agent ${one} of both`);
  assert.equal(await page.locator("[data-testid=unsupported-matchers]").count(), 0);
  await shot("15-profiles-service-label");
  // the type picker offers the stored types; CPU is the one of these agents
  const types = await page.locator("[data-testid=profile-type] option").evaluateAll((os) => os.map((o) => o.value));
  assert.ok(types.includes("cpu"), types.join(","));
  const other = types.find((x) => x !== "cpu");
  if (other) {
    await page.selectOption("[data-testid=profile-type]", other);
    await waitUntil(() => hashParams().get("type") === other, { what: "the type in the URL" });
    await waitFor("[data-testid=no-profiles], .flame[data-total]");
    await page.selectOption("[data-testid=profile-type]", "cpu");
    await waitUntil(() => !hashParams().get("type"), { what: "back to cpu" });
    await pageTotal();
  }
  // brush the timeline's second half: the graph is that range's, as the API merges it
  const box = await page.locator("[data-testid=timeline] svg").boundingBox();
  await page.mouse.move(box.x + box.width * 0.55, box.y + 40);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.97, box.y + 40, { steps: 6 });
  await page.mouse.up();
  await waitUntil(() => hashParams().get("sel"), { what: "the brushed range in the URL" });
  const [sf, st] = hashParams().get("sel").split("-").map(Number);
  const brushed = { service: "checkout", agent: uids.web1, from: sf, to: st };
  const url = page.url();
  // windows that started in the brushed range may reach the store late on a busy machine
  await waitUntil(async () => (await apiTotal(brushed)) > 0, { timeout: 60000, interval: 1000, what: "profiles in the brushed range" });
  await page.reload();
  // the graph is the brushed range's (and, read again after a reload from the URL, still is)
  const want = await totalMatchesApi(brushed);
  assert.ok(want > 0 && want < await apiTotal({ service: "checkout", agent: uids.web1, from, to }), `brushed ${want} of the range's`);
  assert.match(await page.textContent("[data-testid=timeline-info]"), / → /);
  await shot("16-profiles-brushed");
  await page.reload();
  await pageTotal();
  await waitFor("[data-testid=timeline] svg .brush .selection");
  assert.equal(page.url(), url);
  assert.equal(await page.inputValue("[data-testid=service]"), "checkout");
  assert.equal(await page.locator("[data-testid=matchers] .matcher").count(), 1);
  // open a frame in a new tab: the frame's sandwich, in a tab of its own
  // (the workload's function when the brushed windows hold it, else the widest frame drawn)
  const frame = (await clickFrame((fs) => {
    const below = fs.filter((f) => f.depth > 0);
    return below.find((f) => f.name === "hot_checkout") || below.sort((a, b) => b.value - a.value)[0];
  })).name;
  await waitFor("[data-testid=frame-open]");
  const [tab] = await Promise.all([ctx.waitForEvent("page"), page.click("[data-testid=frame-open]")]);
  watch(tab);
  await tab.waitForSelector(".sandwich h3", { timeout: 20000 });
  assert.equal(await tab.textContent(".sandwich h3"), `Sandwich: ${frame}`);
  assert.equal(new URLSearchParams(new URL(tab.url()).hash.split("?")[1]).get("frame"), frame);
  await tab.waitForTimeout(400);
  await tab.screenshot({ path: join(SHOTS, "17-profiles-frame-tab.png"), fullPage: true });
  await tab.close();
  // the profile list, collapsed under the graph: a row opens that profile
  await page.click("[data-testid=profile-list] summary");
  await waitFor("[data-testid=profile-list] [data-testid=profiles-table] tbody tr");
  assert.match(await page.textContent("[data-testid=profile-list] summary"), /profiles in the selection/);
  // compare: the brushed range against the same length right before it
  await page.click("[data-testid=compare]");
  await waitFor("[data-testid=diff-view] canvas[data-frames]", { timeout: 20000 });
  await waitFor("[data-testid=timeline-base] svg .brush .selection");
  const [bf, bt] = hashParams().get("base").split("-").map(Number);
  const [cf, ct] = hashParams().get("sel").split("-").map(Number);
  assert.equal(bt, cf, "the baseline ends where the comparison starts");
  assert.ok(bt - bf <= ct - cf + 1 && bf >= from, "as long as the comparison at most, within the range");
  await shot("14-profiles-diff");
  // back: the brushed merged view again
  await page.goBack();
  await waitUntil(() => !hashParams().get("compare"), { what: "back out of the comparison" });
  assert.equal(hashParams().get("sel"), `${sf}-${st}`);
  assert.ok((await totalMatchesApi(brushed)) > 0);
});

test("a viewer sees the role and no edit buttons", async () => {
  await page.click("[data-testid=logout]");
  await waitFor("#token");
  assert.equal(await page.evaluate(() => sessionStorage.length), 0, "logout forgets the token");
  await login(viewerToken);
  assert.equal(await page.textContent("[data-testid=role]"), "viewer");
  await openPage("#/configs/default");
  await waitFor("#config-body");
  assert.equal(await page.locator("[data-testid=save]").count(), 0);
  assert.equal(await page.locator("[data-testid=validate]").count(), 0);
  assert.equal(await page.getAttribute("#config-body", "readonly"), "");
  await shot("12-viewer-config");
  await openPage("#/configs");
  await waitFor("[data-testid=assignments-table]");
  assert.equal(await page.locator("main button").count(), 0, "no buttons on the configs page");
  await openPage("#/captures");
  await waitFor("h2");
  assert.equal(await page.locator("[data-testid=capture-form]").count(), 0);
  await openPage(`#/agent/${uids.web1}`);
  await waitFor("[data-testid=health-tree]");
  assert.equal(await page.locator("[data-testid=capture-now]").count(), 0);
  await openPage("#/fleet");
  await waitFor("tr[data-uid]");
  await shot("13-viewer-fleet");
});

test("no console errors and no CSP violations on any page", () => {
  assert.deepEqual(problems, []);
});
