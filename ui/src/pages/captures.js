// Captures: a form (agent selector with a live match count, process filter, profile type,
// duration, frequency) that starts one, the list, and one capture's live per-agent progress
// and, once profiles arrived, its flame graph and top functions (off_cpu and wall captures
// weigh nanoseconds: shown as time).
import { api, qs } from "../api.js";
import { h, clear, fmtTime, fmtNum, fmtBytes, errorBox, debounce, poller, badge, CAPTURE_ENDED as ENDED } from "../dom.js";
import { flameView, topTable } from "../flame.js";

// what a capture can profile: [profile_type, label]
const CAPTURE_TYPES = [["cpu", "CPU (on-CPU samples)"], ["off_cpu", "Off-CPU (time blocked)"], ["wall", "Wall clock (on + off CPU)"], ["alloc", "Allocations (bytes, live memory)"]];
const PROCESS_KEYS = ["service.name", "process.executable.name", "process.pid", "container.id", "k8s.namespace.name", "k8s.pod.name"];

export async function capturesPage(main, ctx) {
  if (ctx.parts[1]) return captureDetail(main, ctx, ctx.parts[1]);
  const list = h("div");
  clear(main, h("h1", { text: "Captures" }), ctx.session.canWrite ? captureForm(ctx) : null, h("h2", { text: "Recent captures" }), list);
  const load = async () => {
    const r = await api.get("/captures?limit=50");
    clear(list, r.captures.length ? h("table", { class: "grid", "data-testid": "captures-table" },
      h("thead", {}, h("tr", {}, ["Created", "State", "Type", "Agents", "Selector", "Duration", "Note", "By"].map((t) => h("th", { text: t })))),
      h("tbody", {}, r.captures.map((c) => h("tr", {},
        h("td", {}, h("a", { href: "#/captures/" + c.id, text: fmtTime(c.created_at) })), h("td", {}, badge(c.state)),
        h("td", { text: c.request.profile_type || "cpu" }), h("td", { class: "num", text: c.agents_matched }), h("td", { class: "mono", text: c.request.agents || "(every agent)" }),
        h("td", { text: c.request.duration_seconds + " s" }), h("td", { text: c.request.note || "" }), h("td", { text: c.created_by || "" })))))
      : h("div", { class: "empty", text: "No captures yet." }));
  };
  await load();
  return poller(load, 3000);
}

function captureForm(ctx) {
  const agents = h("input", { type: "text", id: "cap-agents", class: "mono wide", placeholder: "agents selector (empty = every agent)", "aria-label": "agents selector" });
  const matches = h("span", { class: "muted", "data-testid": "capture-matches" });
  const pkey = h("select", { "aria-label": "process attribute" }, PROCESS_KEYS.map((k) => h("option", { value: k, text: k })));
  const pmatch = h("select", { "aria-label": "match" }, h("option", { value: "strict", text: "equals" }), h("option", { value: "regexp", text: "regexp" }));
  const pval = h("input", { type: "text", placeholder: "value (empty = every process)", "aria-label": "process value" });
  const ptype = h("select", { id: "cap-type", "aria-label": "profile type", "data-testid": "capture-type" }, CAPTURE_TYPES.map(([v, t]) => h("option", { value: v, text: t })));
  const dur = h("input", { type: "number", id: "cap-duration", min: 1, max: 3600, value: 10, "aria-label": "duration seconds" });
  const freq = h("input", { type: "number", min: 1, max: 1000, value: 99, "aria-label": "frequency hz" });
  const trace = h("input", { type: "text", placeholder: "trace id (optional, 32 hex)", class: "mono", "aria-label": "trace id" });
  const note = h("input", { type: "text", placeholder: "note, e.g. INC-42", "aria-label": "note" });
  const msg = h("div");
  const count = debounce(async () => {
    try {
      const r = await api.get("/agents" + qs({ selector: agents.value.trim(), limit: 1 }));
      matches.textContent = `matches ${fmtNum(r.matched)} agents`;
      matches.classList.remove("bad");
    } catch (err) { matches.textContent = err.message; matches.classList.add("bad"); }
  }, 250);
  agents.addEventListener("input", count);
  count();
  return h("form", { class: "panel", "data-testid": "capture-form", onsubmit: async (e) => {
    e.preventDefault();
    const body = { agents: agents.value.trim(), profile_type: ptype.value, duration_seconds: Number(dur.value), frequency_hz: Number(freq.value) };
    if (pval.value.trim()) body.processes = [{ key: pkey.value, match: pmatch.value, value: pval.value.trim() }];
    if (trace.value.trim()) body.trace_id = trace.value.trim();
    if (note.value.trim()) body.note = note.value.trim();
    try {
      const r = await api.post("/captures", body);
      ctx.go("#/captures/" + r.id);
    } catch (err) { clear(msg, errorBox(err, err.path ? h("div", {}, "field: ", h("code", { text: err.path })) : null)); }
  } },
  h("h2", { text: "New capture" }),
  h("div", { class: "row" }, h("label", { for: "cap-agents", text: "Agents" }), agents, matches),
  h("div", { class: "row" }, h("label", { text: "Processes" }), pkey, pmatch, pval),
  h("div", { class: "row" }, h("label", { for: "cap-type", text: "Profile" }), ptype),
  h("div", { class: "row" }, h("label", { for: "cap-duration", text: "Duration (s)" }), dur, h("label", { text: "Frequency (Hz)" }), freq),
  h("div", { class: "row" }, h("label", { text: "Trace" }), trace, note),
  h("button", { type: "submit", "data-testid": "start-capture", text: "Start capture" }), msg);
}

async function captureDetail(main, ctx, id) {
  const head = h("div"), agentsBox = h("div"), flame = h("div");
  clear(main, h("p", {}, h("a", { href: "#/captures", text: "← Captures" })), head, agentsBox, flame);
  let drawn = false;
  let p = null;
  const load = async () => {
    const c = await api.get("/captures/" + encodeURIComponent(id));
    const ended = ENDED.has(c.state);
    const type = c.request.profile_type || "cpu";
    clear(head, h("div", { class: "title-row" }, h("h1", { text: "Capture" }), h("span", { "data-testid": "capture-state" }, badge(c.state)),
      ctx.session.canWrite && !ended ? h("button", { type: "button", class: "danger", text: "Cancel", onclick: async () => { await api.del("/captures/" + id); load(); } }) : null),
    h("div", { class: "muted", "data-testid": "capture-summary" }, `${type} profile · ${c.request.agents || "every agent"} · ${c.request.duration_seconds} s at ${c.request.frequency_hz} Hz · created ${fmtTime(c.created_at)}`,
      c.request.note ? ` · ${c.request.note}` : "", c.request.trace_id ? ` · trace ${c.request.trace_id}` : ""),
    ended ? null : progress(c));
    clear(agentsBox, h("table", { class: "grid", "data-testid": "capture-agents" },
      h("thead", {}, h("tr", {}, ["Agent", "State", "Samples", "Bytes", "Profiles", "Error"].map((t) => h("th", { text: t })))),
      h("tbody", {}, c.agents.map((a) => h("tr", { "data-state": a.state },
        h("td", {}, h("a", { href: "#/agent/" + a.instance_uid, class: "mono", title: a.instance_uid, text: a.instance_uid.slice(0, 18) + "…" })), h("td", {}, badge(a.state)),
        h("td", { class: "num", text: fmtNum(a.samples) }), h("td", { class: "num", text: fmtBytes(a.bytes || 0) }),
        h("td", {}, profileLinks(a.profile_ids || [])),
        h("td", { class: "cfg-error", text: a.error ? `${a.error_code ? a.error_code + ": " : ""}${a.error}` : "" }))))));
    const hasProfiles = c.agents.some((a) => (a.profile_ids || []).length);
    if (ended && !drawn) {
      drawn = true;
      if (p) p.stop();
      // a capture: merge up to 1,000 of its profiles (the default 200 samples a big one)
      // the capture's own type: merged views otherwise show cpu profiles only
      // an alloc capture's profiles are stored under their default type (alloc_space), the
      // other heap types beside it: ask which
      const storeType = type !== "alloc" ? type : await api.get("/profiles" + qs({ capture_id: id, limit: 1 }))
        .then((l) => (l.profiles[0] && l.profiles[0].type) || "alloc_space", () => "alloc_space");
      if (hasProfiles) await drawFlame(flame, { capture_id: id, type: storeType, max_profiles: 1000 }, "Capture flame graph");
      else clear(flame, h("div", { class: "empty", text: "No profile arrived from this capture." }));
    }
  };
  await load();
  if (!drawn) p = poller(load, 1000);
  return { stop: () => p && p.stop() };
}

function profileLinks(ids) {
  const shown = ids.slice(0, 6).map((pid) => h("a", { href: "#/profiles?id=" + pid, class: "pid", text: "#" + pid }));
  return [ids.length > 6 ? `${ids.length}: ` : null, shown, ids.length > 6 ? `… +${ids.length - 6}` : null];
}

function progress(c) {
  const now = Date.now();
  const start = c.started_at || c.created_at;
  const pct = Math.min(100, Math.max(0, ((now - start) / (c.request.duration_seconds * 1000)) * 100));
  const bar = h("progress", { max: 100, value: Math.round(pct) });
  return h("div", { class: "progress" }, bar, ` ${Math.round(pct)}% of ${c.request.duration_seconds} s`);
}

export async function drawFlame(box, params, title) {
  clear(box, h("div", { class: "muted", text: "loading flame graph…" }));
  // the tree and its top table from one merge (a controller without `top`: asked for after)
  const tree = await api.get("/flamegraph" + qs({ ...params, max_nodes: 20000, top: 200 }));
  const top = tree.top || (await api.get("/top" + qs({ ...params, limit: 200 })));
  if (!tree.value) {
    clear(box, h("div", { class: "empty", text: "No samples in this range." }));
    return;
  }
  const fv = flameView(tree, { title });
  clear(box, h("div", { class: "flame-layout" }, fv.el,
    h("div", { class: "side" }, h("h3", { text: "Top functions" }), topTable(top.functions, top.total, { onPick: fv.showSandwich, unit: fv.unit }))));
}
