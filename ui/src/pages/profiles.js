// Profiles: a query bar (service, label matchers with autocompleted names and values, profile
// type, time presets or an absolute range, all of it in the URL), a timeline of the selection's
// value to brush a range on (captures and trigger profiles marked), the merged flame graph and
// top table of the selection (flame / table / both), a comparison of two brushed ranges as a
// diff flame graph, and the matching profiles collapsed under the graph, paged. A profile id
// (`?id=`) opens that one profile; a trace id (`?trace_id=`) the trace's profiles.
import { api, qs } from "../api.js";
import { h, clear, fmtTime, fmtNum, fmtBytes, errorBox, zoneName } from "../dom.js";
import { flameView, topTable, topFromTree } from "../flame.js";
import { timeline } from "../timeline.js";
import {
  PRESETS, NAMED_FILTERS, parseQuery, formatQuery, timeRange, selectionRange, defaultBaseline, filterParams,
  pairsQs, unitOfType, typeLabel, bucketProfiles, stepFor,
} from "../query.js";
import { capabilities, labelNames, labelValues, profileTypes, timelineMissing } from "./profiles_data.js";

const PAGE = 50;
const TRIGGERS = ["high_cpu", "slow_span", "error_span"];

function toLocalInput(ms) {
  const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
  return d.toISOString().slice(0, 16);
}

function fromLocalInput(v) {
  return v ? new Date(v).getTime() : null;
}

export async function profilesPage(main, ctx) {
  const p = ctx.params;
  if (p.get("id")) {
    const view = h("div", { class: "profile-view" });
    clear(main, h("p", {}, h("a", { href: "#/profiles", text: "← Profiles" })), view);
    await oneProfile(view, p.get("id"));
    return null;
  }
  if (p.get("trace_id")) return tracePage(main, ctx, p.get("trace_id"));
  const q = parseQuery(p);
  const now = Date.now();
  const range = timeRange(q, now);
  // without label matchers the filters do not depend on the route probe: the merged graph is
  // asked for before it
  const early = q.compare || q.matchers.length ? null : fetchMerged(q, filterParams(q)[0], range);
  const cap = await capabilities(range);
  // Query bar actions start from the URL as it is when they run (a brush may have changed it).
  const nav = (change) => ctx.go("#/profiles" + formatQuery({ ...currentQuery(), ...change }));
  const [filters, unsupported] = filterParams(q, cap);

  const bar = queryBar(q, range, cap, nav, ctx);
  const timelineBox = h("div"), flameBox = h("div"), listBox = h("div");
  clear(main, h("h1", { text: "Profiles" }), bar, unsupported.length ? h("div", { class: "notice", "data-testid": "unsupported-matchers",
    text: `This controller filters profiles only by ${Object.keys(NAMED_FILTERS).join(", ")}: ${unsupported.map((m) => m.key).join(", ")} not applied.` }) : null,
  timelineBox, flameBox, listBox);

  // the timeline, its marks and the flame graph of the selection are asked for at once (the
  // graph is drawn once the timeline says the range holds samples; the marks, a list per
  // trigger, join the timeline when they arrive)
  const merged = q.compare ? null : early || fetchMerged(q, filters, range);
  const marks = loadMarks(filters, range);
  let points, unit;
  try {
    ({ points, unit } = await loadTimeline(cap, filters, range, q.type));
  } catch (err) {
    clear(timelineBox, errorBox(err));
    return null;
  }
  const dataFrom = (points.find(([, v]) => v > 0) || [null])[0];
  const empty = !points.some(([, v]) => v > 0);

  // A brush changes the URL (a history entry: back returns to the previous range) and
  // redraws the graph without reloading the page.
  const state = q; // the query bar reads it too: a brushed range carries into its links
  const push = () => history.pushState(null, "", "#/profiles" + formatQuery(state));
  let redraw = () => {};
  const selTimeline = () => timeline({ points, range, sel: state.sel, unit, marks, label: state.compare ? "Comparison" : "",
    onBrush: (s) => { state.sel = s; push(); redraw(); clear(listBox, profileList(state, filters, range)); } });
  if (!state.compare) {
    clear(timelineBox, selTimeline());
    let first = merged; // the first draw uses what the page asked for at its start
    redraw = () => { const pre = first; first = null; return drawMerged(flameBox, state, filters, range, pre); };
  } else {
    if (!state.base) {
      const d = defaultBaseline(selectionRange(state, now), dataFrom !== null && dataFrom > range[0] ? dataFrom : null);
      state.base = d.base;
      state.sel = d.sel;
      history.replaceState(null, "", "#/profiles" + formatQuery(state)); // a reload shows the same ranges
    }
    clear(timelineBox, selTimeline(), timeline({ points, range, sel: state.base, unit, marks, kind: "base", label: "Baseline",
      onBrush: (s) => { state.base = s; push(); redraw(); clear(listBox, profileList(state, filters, range)); } }));
    redraw = () => drawDiff(flameBox, state, filters);
  }
  if (empty) {
    clear(flameBox, emptyState(q, range));
  } else {
    await redraw();
  }
  clear(listBox, profileList(state, filters, range));
  return null;
}

function currentQuery() {
  return parseQuery(new URLSearchParams(location.hash.split("?")[1] || ""));
}

function emptyState(q, range) {
  return h("div", { class: "empty", "data-testid": "no-profiles" },
    `No ${q.type} profiles from ${fmtTime(range[0])} to ${fmtTime(range[1])}${q.service || q.matchers.length ? " for this query" : ""}. `,
    "Agents send a profile at the end of each sampling window (profiling.sampling.duration_seconds, 10 s by default): ",
    "the first one arrives that long after an agent starts. Try a longer range, another profile type or fewer matchers.");
}

function queryBar(q, range, cap, nav, ctx) {
  const service = h("select", { "aria-label": "service", "data-testid": "service" }, h("option", { value: "", text: "all services" }));
  const type = h("select", { "aria-label": "profile type", "data-testid": "profile-type" }, h("option", { value: q.type, text: typeLabel(q.type), selected: true }));
  service.addEventListener("change", () => nav({ service: service.value, sel: null, base: null }));
  type.addEventListener("change", () => nav({ type: type.value, sel: null, base: null }));
  labelValues(cap, "service.name", range).then((vals) => {
    const all = new Set(vals);
    if (q.service) all.add(q.service);
    for (const v of [...all].sort()) service.append(h("option", { value: v, text: v, selected: v === q.service }));
  }).catch(() => {});
  profileTypes(cap, range).then((types) => {
    clear(type, [...new Set([q.type, ...types.map((t) => t.type)])].sort().map((t) => h("option", { value: t, text: typeLabel(t), selected: t === q.type })));
  }).catch(() => {});

  // label matchers: chips, and a key = value pair with autocompletion
  const names = h("datalist", { id: "label-names" });
  const values = h("datalist", { id: "label-values" });
  const key = h("input", { type: "text", list: "label-names", placeholder: "label (k8s.pod.name, host.name…)", "aria-label": "label name", "data-testid": "matcher-key", class: "mono" });
  const val = h("input", { type: "text", list: "label-values", placeholder: "value", "aria-label": "label value", "data-testid": "matcher-value", class: "mono" });
  labelNames(cap, range).then((ns) => clear(names, ns.filter((n) => n !== "service.name").map((n) => h("option", { value: n })))).catch(() => {});
  let lastKey = "";
  const loadValues = () => {
    const k = key.value.trim();
    if (!k || k === lastKey) return;
    lastKey = k;
    labelValues(cap, k, range).then((vs) => { if (key.value.trim() === k) clear(values, vs.map((v) => h("option", { value: v }))); }).catch(() => {});
  };
  key.addEventListener("change", loadValues);
  key.addEventListener("blur", loadValues);
  val.addEventListener("focus", loadValues);
  const addMatcher = (e) => {
    e.preventDefault();
    const k = key.value.trim(), v = val.value.trim();
    if (!k || !v) return;
    if (k === "service.name") nav({ service: v, sel: null, base: null });
    else nav({ matchers: [...q.matchers.filter((m) => m.key !== k || m.value !== v), { key: k, value: v }], sel: null, base: null });
  };
  const chips = h("span", { class: "matchers", "data-testid": "matchers" }, q.matchers.map((m, i) => h("span", { class: "matcher" }, `${m.key}="${m.value}"`,
    h("button", { type: "button", title: "remove", "aria-label": `remove ${m.key}`, text: "×", onclick: () => nav({ matchers: q.matchers.filter((_, j) => j !== i), sel: null, base: null }) }))));

  // time: presets and an absolute range
  const presets = h("span", { class: "presets", "data-testid": "presets" }, PRESETS.map(([k]) => h("button", { type: "button",
    class: "secondary" + (q.preset === k ? " active" : ""), "data-preset": k, text: k, onclick: () => nav({ preset: k, from: null, to: null, sel: null, base: null }) })));
  const from = h("input", { type: "datetime-local", "aria-label": "from", value: toLocalInput(range[0]) });
  const to = h("input", { type: "datetime-local", "aria-label": "to", value: toLocalInput(range[1]) });
  const applyRange = h("button", { type: "button", class: "secondary", text: "Apply", "data-testid": "apply-range", onclick: () => {
    const f = fromLocalInput(from.value), t = fromLocalInput(to.value);
    if (f !== null && t !== null && f < t) nav({ preset: null, from: f, to: t, sel: null, base: null });
  } });
  const views = h("span", { class: "views", "data-testid": "views" }, [["both", "Both"], ["flame", "Flame graph"], ["table", "Table"]].map(([v, label]) =>
    h("button", { type: "button", class: "secondary" + (q.view === v ? " active" : ""), "data-view": v, text: label, onclick: () => nav({ view: v }) })));
  const compare = h("button", { type: "button", class: "secondary" + (q.compare ? " active" : ""), "data-testid": "compare",
    text: q.compare ? "Stop comparing" : "Compare ranges", onclick: () => nav({ compare: !q.compare, base: null }) });
  const trace = h("form", { class: "inline", onsubmit: (e) => { e.preventDefault(); const t = e.target.elements.trace.value.trim(); if (t) ctx.go("#/profiles" + qs({ trace_id: t })); } },
    h("input", { type: "text", name: "trace", id: "trace-id", class: "mono", placeholder: "trace id (32 hex)", "aria-label": "trace id" }),
    h("button", { type: "submit", class: "secondary", "data-testid": "search", text: "Find trace" }));
  return h("div", { class: "panel query", "data-testid": "query-bar" },
    h("form", { class: "row", onsubmit: addMatcher }, h("label", { text: "Service" }), service, h("label", { text: "Type" }), type,
      h("label", { text: "Labels" }), chips, key, h("span", { text: "=" }), val,
      h("button", { type: "submit", class: "secondary", "data-testid": "add-matcher", text: "Add" }), names, values),
    h("div", { class: "row" }, presets, h("label", { text: "From" }), from, h("label", { text: "to" }), to,
      h("span", { class: "muted small", text: zoneName() }), applyRange, views, compare),
    h("div", { class: "row" }, trace));
}

// The timeline's points and unit: the store's timeline route, else bucketed from the profile list.
async function loadTimeline(cap, filters, range, type) {
  const step = stepFor(range[0], range[1]);
  if (cap.timeline !== false) {
    try {
      const t = await api.get("/timeline" + pairsQs([["from", range[0]], ["to", range[1]], ["step", step], ...filters]));
      cap.timeline = true;
      return { points: t.points, unit: t.unit || unitOfType(type) };
    } catch (err) {
      if (!timelineMissing(err)) throw err;
    }
  }
  const l = await api.get("/profiles" + pairsQs([["from", range[0]], ["to", range[1]], ...filters, ["limit", 1000]]));
  return { points: bucketProfiles(l.profiles, range[0], range[1], step), unit: type === "cpu" ? "samples" : "count" };
}

// Captures and trigger profiles in the range, as timeline marks.
async function loadMarks(filters, range) {
  const marks = [];
  const base = filters.filter(([k]) => k !== "trigger");
  const [caps, ...lists] = await Promise.all([
    api.get("/captures?limit=100").catch(() => ({ captures: [] })),
    ...TRIGGERS.map((t) => api.get("/profiles" + pairsQs([["from", range[0]], ["to", range[1]], ...base, ["trigger", t], ["limit", 50]])).catch(() => ({ profiles: [] }))),
  ]);
  for (const c of caps.captures) marks.push({ t: c.started_at || c.created_at, kind: "capture", label: `capture ${c.request.note || c.id} (${c.state})` });
  for (const l of lists) for (const x of l.profiles) marks.push({ t: x.start_ms, kind: "trigger", label: `${x.trigger} · ${x.service || x.executable || ""}` });
  return marks;
}

function frameLink(state) {
  return (name) => "#/profiles" + formatQuery({ ...state, frame: name });
}

function layout(view, fv, table) {
  if (view === "flame") return h("div", { class: "flame-layout flame-only" }, fv.el);
  if (view === "table") return h("div", { class: "flame-layout table-only" }, h("div", { class: "side" }, table));
  return h("div", { class: "flame-layout flame-below" }, fv.el, h("div", { class: "side" }, h("h3", { text: "Top functions" }), table));
}

// Draws into box unless a later draw started meanwhile (brushes in quick succession).
function latest(box) {
  const gen = (box.drawGen = (box.drawGen || 0) + 1);
  return () => box.drawGen === gen;
}

// The merged flame graph and top table of the selection (else the range), one request (the
// controller merges once for both: /flamegraph?top=N; a controller without `top` answers the
// tree alone, and the table is asked for after it): {tree, top}, two promises (a failure is
// shown where the graph or the table would be).
function fetchMerged(state, filters, range) {
  const sel = state.sel || range;
  const params = [["from", Math.round(sel[0])], ["to", Math.round(sel[1])], ...filters];
  const tree = api.get("/flamegraph" + pairsQs([...params, ["max_nodes", 20000], ["top", 200]]));
  const asked = { tree, top: tree.then((t) => t.top || api.get("/top" + pairsQs([...params, ["limit", 200]]))) };
  asked.tree.catch(() => {});
  asked.top.catch(() => {});
  return asked;
}

// pre: fetchMerged() of this same state, when already asked for. The graph is drawn when its
// tree arrives, then the table.
async function drawMerged(box, state, filters, range, pre = null) {
  const sel = state.sel || range;
  const mine = latest(box);
  const asked = pre || fetchMerged(state, filters, range);
  box.setAttribute("aria-busy", "true");
  try {
    const tree = await asked.tree;
    if (!mine()) return;
    if (!tree.value) {
      clear(box, h("div", { class: "empty", "data-testid": "no-samples", text: `No samples from ${fmtTime(sel[0])} to ${fmtTime(sel[1])}: brush another range or clear the selection.` }));
      return;
    }
    const unit = tree.unit || unitOfType(state.type);
    const fv = flameView(tree, { title: `${typeLabel(state.type)} · ${fmtTime(sel[0])} → ${fmtTime(sel[1])}`, unit, frameHref: frameLink(state) });
    fv.el.setAttribute("data-total", String(tree.value));
    const table = h("div", {}, h("div", { class: "muted", text: "loading the top functions…" }));
    clear(box, layout(state.view, fv, table));
    if (state.frame) fv.showSandwich(state.frame);
    asked.top.then((top) => { if (mine()) clear(table, topTable(top.functions, top.total, { onPick: fv.showSandwich, unit })); },
      (err) => { if (mine()) clear(table, errorBox(err)); });
  } catch (err) {
    if (mine()) clear(box, errorBox(err));
  } finally {
    box.removeAttribute("aria-busy");
  }
}

async function drawDiff(box, state, filters) {
  const [f, t] = state.sel, [bf, bt] = state.base;
  const mine = latest(box);
  box.setAttribute("aria-busy", "true");
  try {
    const tree = await api.get("/flamegraph/diff" + pairsQs([["from", Math.round(f)], ["to", Math.round(t)], ["base_from", Math.round(bf)], ["base_to", Math.round(bt)], ...filters, ["max_nodes", 20000]]));
    if (!mine()) return;
    const unit = tree.unit || unitOfType(state.type);
    const fv = flameView(tree, { diff: true, unit, title: `Diff: ${fmtTime(f)} → ${fmtTime(t)} against ${fmtTime(bf)} → ${fmtTime(bt)} · red = bigger share now, blue = smaller, orange = only now` });
    fv.el.setAttribute("data-testid", "diff-view");
    clear(box, h("div", { class: "flame-layout flame-only" }, fv.el));
  } catch (err) {
    if (mine()) clear(box, errorBox(err));
  } finally {
    box.removeAttribute("aria-busy");
  }
}

// The matching profiles, collapsed; fetched when opened (up to 1,000), shown 50 a page.
function profileList(state, filters, range) {
  const sel = state.sel || range;
  const body = h("div");
  const summary = h("summary", { text: "Profiles in the selection" });
  const d = h("details", { class: "list", "data-testid": "profile-list" }, summary, body);
  let loaded = false;
  d.addEventListener("toggle", async () => {
    if (!d.open || loaded) return;
    loaded = true;
    clear(body, h("div", { class: "muted", text: "loading…" }));
    try {
      const l = await api.get("/profiles" + pairsQs([["from", Math.round(sel[0])], ["to", Math.round(sel[1])], ...filters, ["limit", 1000]]));
      summary.textContent = `${fmtNum(l.count)}${l.more ? "+" : ""} profiles in the selection${l.more ? " (the newest 1,000: narrow the range for older ones)" : ""}`;
      let page = 0;
      const pages = Math.max(1, Math.ceil(l.profiles.length / PAGE));
      const render = () => {
        const rows = l.profiles.slice(page * PAGE, (page + 1) * PAGE);
        clear(body, profileTable(rows),
          h("div", { class: "pager" }, h("button", { type: "button", class: "secondary", text: "← Newer", disabled: page === 0, onclick: () => { page--; render(); } }),
            h("span", { class: "muted", "data-testid": "list-page", text: `page ${page + 1} of ${pages}` }),
            h("button", { type: "button", class: "secondary", text: "Older →", "data-testid": "list-next", disabled: page + 1 >= pages, onclick: () => { page++; render(); } })));
      };
      render();
    } catch (err) { clear(body, errorBox(err)); }
  });
  return d;
}

function profileTable(rows) {
  return h("table", { class: "grid", "data-testid": "profiles-table" },
    h("thead", {}, h("tr", {}, ["Start", "Service", "Host", "Process", "Agent", "Type", "Samples", "Size", "Trigger", "Capture"].map((t) => h("th", { text: t })))),
    h("tbody", {}, rows.map((x) => h("tr", {},
      h("td", {}, h("a", { href: "#/profiles?id=" + x.id, text: fmtTime(x.start_ms) })), h("td", { text: x.service || "—" }),
      h("td", { text: x.host || "—" }), h("td", { class: "mono small", text: `${x.executable || "?"} ${x.pid || ""}` }),
      h("td", {}, x.agent ? h("a", { href: "#/agent/" + encodeURIComponent(x.agent), class: "mono small", text: x.agent.slice(0, 13) }) : "—"),
      h("td", { text: x.type }), h("td", { class: "num", text: fmtNum(x.samples) }), h("td", { class: "num", text: fmtBytes(x.size_bytes) }),
      h("td", { text: x.trigger || "" }), h("td", {}, x.capture_id ? h("a", { href: "#/captures/" + encodeURIComponent(x.capture_id), text: "capture" }) : "")))));
}

// A trace's profiles (one per process and window): listed, and the one with the most samples open.
async function tracePage(main, ctx, traceId) {
  const listBox = h("div"), view = h("div", { class: "profile-view" });
  clear(main, h("p", {}, h("a", { href: "#/profiles", text: "← Profiles" })), h("h1", { text: "Profiles of trace " + traceId }), listBox, view);
  let list;
  try {
    list = await api.get("/profiles" + qs({ trace_id: traceId, limit: 100 }));
  } catch (err) {
    clear(listBox, errorBox(err));
    return null;
  }
  if (!list.profiles.length) {
    clear(listBox, h("div", { class: "empty", "data-testid": "no-profiles", text: "No profile links to this trace (its spans ran outside any profiled window, or retention removed them)." }));
    return null;
  }
  clear(listBox, h("details", { class: "list", open: list.profiles.length <= 20 },
    h("summary", { text: `${list.count}${list.more ? "+" : ""} profiles` }), profileTable(list.profiles)));
  const best = list.profiles.reduce((a, b) => (b.samples > a.samples ? b : a));
  await oneProfile(view, best.id);
  return null;
}

async function oneProfile(box, id) {
  clear(box, h("div", { class: "muted", text: "loading…" }));
  const [meta, tree] = await Promise.all([api.get("/profiles/" + id), api.get(`/profiles/${id}/flamegraph?max_nodes=20000`)]);
  const dl = h("button", { type: "button", class: "secondary", "data-testid": "pprof-download", text: "Download pprof", onclick: async () => {
    const r = await api.raw(`/profiles/${id}/pprof`);
    const url = URL.createObjectURL(await r.blob());
    const a = h("a", { href: url, download: `profile-${id}.pb.gz` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  } });
  const unit = tree.unit || unitOfType(meta.type);
  const fv = flameView(tree, { title: `Profile #${id}`, unit });
  const top = topFromTree(tree);
  const links = meta.trace_links || [];
  clear(box,
    h("div", { class: "title-row" }, h("h2", { text: `${meta.service || meta.executable || "profile"} · ${fmtTime(meta.start_ms)}` }), dl),
    h("div", { class: "muted", "data-testid": "profile-meta" },
      `${meta.type} · ${fmtNum(meta.samples)} samples · ${meta.duration_ms} ms · host ${meta.host || "—"} · ${meta.executable || "process"} pid ${meta.pid || "—"}`,
      meta.agent ? [" · ", h("a", { href: "#/agent/" + encodeURIComponent(meta.agent), text: "agent" })] : null,
      meta.trigger ? ` · trigger ${meta.trigger}` : "", meta.capture_id ? " · " : "",
      meta.capture_id ? h("a", { href: "#/captures/" + encodeURIComponent(meta.capture_id), text: "capture" }) : null),
    links.length ? h("div", { class: "muted", "data-testid": "trace-links" }, "traces: ", links.slice(0, 5).map((l) => h("code", { text: `${l.trace_id}/${l.span_id} ` }))) : null,
    h("div", { class: "flame-layout" }, fv.el, h("div", { class: "side" }, h("h3", { text: "Top functions" }), topTable(top, tree.value, { onPick: fv.showSandwich, unit }))));
}
