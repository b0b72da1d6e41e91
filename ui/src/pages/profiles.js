// Profiles: search (service, agent, time range, trace id, trigger), the matching list, the
// merged or one profile's flame graph with the top table and sandwich, a diff of two time
// ranges, and pprof download (fetched with the token, saved from a blob URL).
import { api, qs } from "../api.js";
import { h, clear, fmtTime, fmtNum, fmtBytes, errorBox } from "../dom.js";
import { flameView, topTable, topFromTree } from "../flame.js";
import { drawFlame } from "./captures.js";

const FIELDS = ["service", "agent", "trace_id", "trigger", "capture_id", "from", "to"];

function toLocalInput(ms) {
  const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
  return d.toISOString().slice(0, 16);
}

function fromLocalInput(v) {
  return v ? String(new Date(v).getTime()) : "";
}

export async function profilesPage(main, ctx) {
  const p = ctx.params;
  const id = p.get("id");
  const view = h("div", { class: "profile-view" });
  const listBox = h("div");
  const f = {};
  f.service = h("input", { type: "text", placeholder: "service.name", value: p.get("service") || "", "aria-label": "service" });
  f.agent = h("input", { type: "text", placeholder: "agent uid", class: "mono", value: p.get("agent") || "", "aria-label": "agent" });
  f.trace_id = h("input", { type: "text", placeholder: "trace id (32 hex)", class: "mono", id: "trace-id", value: p.get("trace_id") || "", "aria-label": "trace id" });
  f.trigger = h("select", { "aria-label": "trigger" }, ["", "on_demand", "high_cpu", "slow_span", "error_span"].map((t) => h("option", { value: t, text: t || "any trigger", selected: p.get("trigger") === t })));
  f.capture_id = h("input", { type: "text", placeholder: "capture id", class: "mono", value: p.get("capture_id") || "", "aria-label": "capture id" });
  f.from = h("input", { type: "datetime-local", value: p.get("from") ? toLocalInput(Number(p.get("from"))) : "", "aria-label": "from" });
  f.to = h("input", { type: "datetime-local", value: p.get("to") ? toLocalInput(Number(p.get("to"))) : "", "aria-label": "to" });
  const values = () => {
    const o = {};
    for (const k of FIELDS) o[k] = k === "from" || k === "to" ? fromLocalInput(f[k].value) : f[k].value.trim();
    return o;
  };
  const form = h("form", { class: "panel search", "data-testid": "profile-search", onsubmit: (e) => {
    e.preventDefault();
    ctx.go("#/profiles" + qs(values()));
  } },
  h("div", { class: "row" }, f.service, f.agent, f.trace_id, f.trigger, f.capture_id),
  h("div", { class: "row" }, h("label", { text: "From" }), f.from, h("label", { text: "To" }), f.to,
    h("button", { type: "submit", "data-testid": "search", text: "Search" })));
  clear(main, h("h1", { text: "Profiles" }), form, listBox, view);

  if (id) {
    await oneProfile(view, id);
    return null;
  }
  const q = {};
  for (const k of FIELDS) if (p.get(k)) q[k] = p.get(k);
  let list;
  try {
    list = await api.get("/profiles" + qs({ ...q, limit: 100 }));
  } catch (err) {
    clear(listBox, errorBox(err));
    return null;
  }
  if (!list.profiles.length) {
    clear(listBox, h("div", { class: "empty", "data-testid": "no-profiles", text: Object.keys(q).length ? "No profile matches this search." : "No profiles in the store yet." }));
    return null;
  }
  clear(listBox, h("details", { class: "list", open: list.profiles.length <= 20 },
    h("summary", { text: `${list.count}${list.more ? "+" : ""} profiles` }),
    h("table", { class: "grid", "data-testid": "profiles-table" },
      h("thead", {}, h("tr", {}, ["Start", "Service", "Host", "Agent", "Samples", "Size", "Trigger", "Links"].map((t) => h("th", { text: t })))),
      h("tbody", {}, list.profiles.map((x) => h("tr", {},
        h("td", {}, h("a", { href: "#/profiles?id=" + x.id, text: fmtTime(x.start_ms) })), h("td", { text: x.service || "—" }),
        h("td", { text: x.host || "—" }), h("td", { class: "mono small", text: (x.agent || "").slice(0, 13) }),
        h("td", { class: "num", text: fmtNum(x.samples) }), h("td", { class: "num", text: fmtBytes(x.size_bytes) }),
        h("td", { text: x.trigger || "" }), h("td", { class: "num", text: x.links || "" })))))));

  // merged view of the search, and a diff against a base range
  const mergeParams = { ...q };
  delete mergeParams.trace_id; // merged views filter by the other fields
  // the merged views' own default range is the last hour (a capture: whenever it ran)
  const to = Number(mergeParams.to || Date.now());
  const from = Number(mergeParams.from || to - 3600e3);
  if (!mergeParams.capture_id) Object.assign(mergeParams, { from, to });
  if (q.trace_id) {
    // a trace's profiles (one per process and window): show the one with the most samples
    const best = list.profiles.reduce((a, b) => (b.samples > a.samples ? b : a));
    await oneProfile(view, best.id);
    return null;
  }
  const diffBox = h("div");
  const baseFrom = h("input", { type: "datetime-local", "aria-label": "base from" });
  const baseTo = h("input", { type: "datetime-local", "aria-label": "base to" });
  baseTo.value = toLocalInput(from);
  baseFrom.value = toLocalInput(from - (to - from));
  const merged = h("div");
  clear(view, merged, h("form", { class: "panel", onsubmit: async (e) => {
    e.preventDefault();
    try {
      const t = await api.get("/flamegraph/diff" + qs({ ...mergeParams, from, to, base_from: fromLocalInput(baseFrom.value), base_to: fromLocalInput(baseTo.value), max_nodes: 20000 }));
      const fv = flameView(t, { diff: true, title: "Diff: red = bigger share now, blue = smaller, orange = only now" });
      fv.el.setAttribute("data-testid", "diff-view");
      clear(diffBox, fv.el);
    } catch (err) { clear(diffBox, errorBox(err)); }
  } }, h("h3", { text: "Compare with a base range" }), h("div", { class: "row" }, h("label", { text: "Base from" }), baseFrom, h("label", { text: "to" }), baseTo,
    h("button", { type: "submit", "data-testid": "diff", text: "Diff" }))), diffBox);
  await drawFlame(merged, mergeParams, `Merged: ${fmtTime(from)} → ${fmtTime(to)}`);
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
  const fv = flameView(tree, { title: `Profile #${id}` });
  const top = topFromTree(tree);
  const links = meta.trace_links || [];
  clear(box,
    h("div", { class: "title-row" }, h("h2", { text: `${meta.service || meta.executable || "profile"} · ${fmtTime(meta.start_ms)}` }), dl),
    h("div", { class: "muted", "data-testid": "profile-meta" },
      `${meta.type} · ${fmtNum(meta.samples)} samples · ${meta.duration_ms} ms · host ${meta.host || "—"} · pid ${meta.pid || "—"}`,
      meta.trigger ? ` · trigger ${meta.trigger}` : "", meta.capture_id ? " · " : "",
      meta.capture_id ? h("a", { href: "#/captures/" + meta.capture_id, text: "capture" }) : null),
    links.length ? h("div", { class: "muted", "data-testid": "trace-links" }, "traces: ", links.slice(0, 5).map((l) => h("code", { text: `${l.trace_id}/${l.span_id} ` }))) : null,
    h("div", { class: "flame-layout" }, fv.el, h("div", { class: "side" }, h("h3", { text: "Top functions" }), topTable(top, tree.value, { onPick: fv.showSandwich }))));
}
