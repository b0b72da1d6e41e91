// Flame graph (a canvas of our own: flamecanvas.js) with search, zoom, hover details
// (self/total/share) and tooltips in the tree's unit, frames colored by their
// profile.frame.type with a legend (by name where a tree has no types), a sortable
// top-functions table, a differential mode (nodes carry "delta" and "base", as
// /flamegraph/diff returns) and a sandwich view of one function (callers above, callees
// below) computed from the same tree. A clicked frame offers its sandwich and a link to open
// it in a new tab.
import { h, clear } from "./dom.js";
import { flameCanvas } from "./flamecanvas.js";
import { topFromTree, sandwich } from "./tree.js";
import { fmtValue, frameColor, nameColor, diffColor, frameTypesIn, FRAME_TYPES } from "./query.js";

export { topFromTree, sandwich };

// The legend of the frame types a tree holds ("no frame types" for trees without them).
function legend(tree) {
  const { known, other } = frameTypesIn(tree);
  if (!known.length && !other.length) return null;
  const item = (t, label) => h("span", { class: "legend-item", "data-type": t },
    h("span", { class: "swatch ft-" + (FRAME_TYPES.some(([k]) => k === t) ? t : "other") }), label);
  return h("div", { class: "legend", "data-testid": "frame-legend" },
    known.map(([t, label]) => item(t, label)), other.map((t) => item(t, t)));
}

// tree: the API's flame graph; unit: "samples" | "nanoseconds" | "bytes" | "count" (the root's
// "unit" wins); frameHref(name): a URL that opens that frame on its own.
export function flameView(tree, { diff = false, title = "", unit = "", frameHref = null, onFrame = null } = {}) {
  const total = tree.value || 0;
  unit = tree.unit || unit || "samples";
  const fmtNum = (v) => fmtValue(v, unit);
  const details = h("div", { class: "flame-details", "data-testid": "flame-details",
    text: "Hover a frame for self / total; click to zoom and for its sandwich." });
  const picked = h("div", { class: "flame-picked", "data-testid": "flame-picked" });
  const chartEl = h("div", { class: "flame-chart", "data-testid": "flame-chart" });
  const search = h("input", { type: "search", placeholder: "Search functions (regexp)", class: "flame-search",
    "aria-label": "search the flame graph" });
  const found = h("span", { class: "muted" });
  const reset = h("button", { type: "button", class: "secondary", text: "Reset zoom" });
  const sandwichBox = h("div", { class: "sandwich" });
  const note = [];
  if (tree.truncated) note.push(h("div", { class: "notice", text: "This tree was cut at the server's node cap: values shown stay exact, deeper frames are folded." }));
  if (diff && !tree.base_total) note.push(h("div", { class: "notice", "data-testid": "diff-empty-base", text: "The base range has no samples: every frame is new (orange)." }));
  if (tree.capped) note.push(h("div", { class: "notice", text: `Merged ${Number(tree.profiles_merged).toLocaleString("en-US")} of ${Number(tree.profiles_matched).toLocaleString("en-US")} matching profiles (sampled evenly).` }));

  let chart = null;
  const draw = (el, data, opts = {}, colors = new Map()) => flameCanvas(el, data, {
    inverted: !!opts.inverted,
    fill: diff
      ? (f, i) => diffColor(f.delta ? f.delta[i] : 0, f.value[i], f.base ? f.base[i] : 0)
      : (f, i) => {
        // one color per name and type
        const key = f.name[i] * 256 + f.type[i];
        let c = colors.get(key);
        if (c === undefined) colors.set(key, (c = f.type[i] ? frameColor(f.types[f.type[i]], f.names[f.name[i]]) : nameColor(f.names[f.name[i]])));
        return c;
      },
    label: (f, i) => `${f.names[f.name[i]]}\nself ${fmtNum(f.self[i])}, total ${fmtNum(f.value[i])} (${pct(f.value[i], total)})`,
    onClick: (f, i) => {
      if (i === 0) { clear(picked); return; }
      const name = f.names[f.name[i]], type = f.types[f.type[i]];
      clear(picked, h("span", { class: "mono", text: name }), type ? h("span", { class: "muted", text: ` (${type})` }) : null,
        h("button", { type: "button", class: "secondary small", "data-testid": "frame-sandwich", text: "Sandwich", onclick: () => showSandwich(name) }),
        frameHref ? h("a", { href: frameHref(name), target: "_blank", rel: "opener", "data-testid": "frame-open", title: "the same query, opened on this frame (the tab shares this one's sign-in)", text: "Open in a new tab" }) : null);
      if (onFrame) onFrame(name);
    },
    onHover: (f, i) => {
      const self = f.self[i], value = f.value[i];
      const parts = [f.names[f.name[i]], `self ${fmtNum(self)} (${pct(self, total)})`, `total ${fmtNum(value)} (${pct(value, total)})`];
      if (diff && f.delta) parts.push(`delta ${f.delta[i] > 0 ? "+" : ""}${fmtNum(f.delta[i])} (base ${fmtNum(f.base[i])})`);
      details.textContent = parts.join("  ·  ");
    },
  });

  const root = h("div", { class: "flame" },
    h("div", { class: "flame-head" }, title ? h("h3", { text: title }) : null, search, found, reset),
    note, diff ? null : legend(tree), chartEl, details, picked, sandwichBox);

  // drawn at the element's width: once it is in the document
  requestAnimationFrame(() => {
    chart = draw(chartEl, tree);
  });
  search.addEventListener("input", () => {
    if (!chart) return;
    if (!search.value) {
      chart.search(null);
      found.textContent = "";
      return;
    }
    let re;
    try { re = new RegExp(search.value); } catch { found.textContent = "bad regexp"; return; }
    chart.search((name) => re.test(name));
    const hits = topFromTree(tree).filter((f) => re.test(f.name));
    const w = hits.reduce((a, f) => Math.max(a, f.total), 0);
    found.textContent = `${hits.length} functions match, largest total ${pct(w, total)}`;
  });
  reset.addEventListener("click", () => { if (chart) chart.resetZoom(); clear(picked); });

  const showSandwich = (fn) => {
    const s = sandwich(tree, fn);
    const up = h("div", { class: "flame-chart" }), down = h("div", { class: "flame-chart" });
    clear(sandwichBox,
      h("h3", { text: `Sandwich: ${fn}` }),
      h("button", { type: "button", class: "secondary", text: "Close sandwich", onclick: () => clear(sandwichBox) }),
      h("div", { class: "muted", text: "Callers (read upwards)" }), up,
      h("div", { class: "muted", text: "Callees" }), down);
    requestAnimationFrame(() => {
      draw(up, s.callers, { inverted: true });
      draw(down, s.callees);
    });
    sandwichBox.scrollIntoView({ block: "nearest" });
  };
  return { el: root, showSandwich, unit };
}

export function pct(v, total) {
  return total ? ((100 * v) / total).toFixed(v * 1000 < total ? 2 : 1) + "%" : "—";
}

// A sortable top-functions table. rows: [{name, self, total}] (self_pct/total_pct optional).
export function topTable(rows, total, { onPick, unit = "samples" } = {}) {
  const fmtNum = (v) => fmtValue(v, unit === "samples" ? "count" : unit);
  let key = "self", dir = -1;
  const tbody = h("tbody");
  const render = () => {
    const sorted = rows.slice().sort((a, b) => {
      const x = a[key], y = b[key];
      return (x < y ? -1 : x > y ? 1 : 0) * dir || (b.total - a.total);
    });
    clear(tbody, sorted.slice(0, 200).map((f) =>
      h("tr", {},
        h("td", { class: "fn" }, onPick ? h("a", { href: "#", text: f.name, title: "sandwich view", onclick: (e) => { e.preventDefault(); onPick(f.name); } }) : f.name),
        h("td", { class: "num", text: fmtNum(f.self) }), h("td", { class: "num", text: pct(f.self, total) }),
        h("td", { class: "num", text: fmtNum(f.total) }), h("td", { class: "num", text: pct(f.total, total) }))));
  };
  const th = (label, k) => h("th", { class: k === "name" ? "" : "num sortable", "data-sort": k,
    onclick: () => { if (key === k) dir = -dir; else { key = k; dir = k === "name" ? 1 : -1; } render(); } }, label);
  render();
  return h("table", { class: "top", "data-testid": "top-table" },
    h("thead", {}, h("tr", {}, th("Function", "name"), th("Self", "self"), h("th", { class: "num", text: "Self %" }),
      th("Total", "total"), h("th", { class: "num", text: "Total %" }))), tbody);
}
