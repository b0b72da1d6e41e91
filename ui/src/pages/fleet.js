// Fleet: counts per state, the agents table (server-side pages of PAGE agents, selector
// filter with its parse error inline, sort within the page), refreshed every few seconds.
import { api, qs } from "../api.js";
import { h, clear, ago, fmtNum, errorBox, debounce, poller, agentState, badge, fmtClock } from "../dom.js";

const PAGE = 100;
const REFRESH_MS = 3000;
const STANDARD = new Set(["service.name", "service.instance.id", "service.version", "host.name",
  "os.type", "host.arch"]);

export async function fleetPage(main, ctx) {
  let selector = ctx.params.get("selector") || "";
  let cursors = [""]; // cursor of each page seen; the last is the current page
  let sortKey = "uid", sortDir = 1;
  // a count card narrows the table to its state or config status (the API filters)
  let filter = { state: ctx.params.get("state") || "", config_status: ctx.params.get("config_status") || "" };
  let data = null;

  const counts = h("div", { class: "cards", "data-testid": "fleet-counts" });
  const input = h("input", { type: "text", id: "selector", value: selector, class: "wide",
    placeholder: "selector, e.g. env=prod,team in (a,b),region!=eu", "aria-label": "selector",
    spellcheck: "false" });
  const selErr = h("div", { class: "field-error", "data-testid": "selector-error" });
  const info = h("span", { class: "muted", "data-testid": "fleet-info" });
  const prev = h("button", { type: "button", class: "secondary", text: "← Previous" });
  const next = h("button", { type: "button", class: "secondary", text: "Next →" });
  const tbody = h("tbody");
  const live = h("span", { class: "muted live", text: "" });
  const cols = [["uid", "Agent"], ["state", "State"], ["labels", "Labels"], ["config", "Config"],
    ["status", "Status"], ["unwinders", "Unwinders"], ["last_seen", "Last seen"]];
  const thead = h("thead", {}, h("tr", {}, cols.map(([k, label]) => h("th", { class: "sortable", "data-sort": k,
    onclick: () => { if (sortKey === k) sortDir = -sortDir; else { sortKey = k; sortDir = 1; } draw(); } }, label))));

  clear(main,
    h("h1", { text: "Fleet" }),
    counts,
    h("div", { class: "toolbar" }, h("label", { for: "selector", text: "Filter" }), input, live),
    selErr,
    h("table", { class: "grid", "data-testid": "agents-table" }, thead, tbody),
    h("div", { class: "pager" }, prev, info, next));

  const key = (a, k) => {
    switch (k) {
      case "state": return agentState(a);
      case "labels": return labelsOf(a).join(",");
      case "config": return (a.config && a.config.name) || "";
      case "status": return (a.config && a.config.status) || "";
      case "unwinders": return unwindersOf(a).join(",");
      case "last_seen": return -(a.last_seen || 0);
      default: return a.instance_uid;
    }
  };

  function draw() {
    if (!data) return;
    for (const th of thead.querySelectorAll("th"))
      th.className = "sortable" + (th.dataset.sort === sortKey ? (sortDir > 0 ? " sorted-asc" : " sorted-desc") : "");
    const rows = data.agents.slice().sort((a, b) => {
      const x = key(a, sortKey), y = key(b, sortKey);
      return (x < y ? -1 : x > y ? 1 : 0) * sortDir;
    });
    const now = Date.now();
    if (!rows.length) {
      clear(tbody, h("tr", {}, h("td", { colspan: cols.length, class: "empty",
        text: selector || filter.state || filter.config_status ? "No agent matches this filter." : "No agents yet: start one with --server ws://HOST:PORT/v1/opamp and the enrollment token." })));
    } else {
      clear(tbody, rows.map((a) => {
        const st = agentState(a);
        const c = a.config || {};
        const attrs = a.attributes || {};
        return h("tr", { "data-uid": a.instance_uid, "data-state": st },
          h("td", {}, h("a", { href: "#/agent/" + encodeURIComponent(a.instance_uid), text: attrs["host.name"] || a.instance_uid }),
            h("div", { class: "muted mono small", text: a.instance_uid })),
          h("td", {}, badge(st)),
          h("td", {}, labelsOf(a).map((l) => h("span", { class: "label", text: l }))),
          h("td", { text: c.name ? `${c.name} v${c.version}` : "—" }),
          h("td", { class: "status-cell" }, badge(c.status || "UNSET", "cfg-" + (c.status || "UNSET").toLowerCase()),
            c.error ? h("div", { class: "cfg-error", text: c.error }) : null),
          unwindersCell(a),
          h("td", { title: new Date(a.last_seen || 0).toISOString(), text: ago(a.last_seen, now) }));
      }));
    }
    // "matched" counts the agents from the cursor on: the total is the pages before plus it
    const page = cursors.length;
    const first = (page - 1) * PAGE + 1;
    const total = (page - 1) * PAGE + data.matched;
    const narrowed = selector || filter.state || filter.config_status;
    info.textContent = data.matched ? `${fmtNum(first)}–${fmtNum(first + data.agents.length - 1)} of ${fmtNum(total)} agents${narrowed ? " matching" : ""}` : "";
    prev.disabled = page <= 1;
    next.disabled = !data.next_cursor;
  }

  async function loadSummary() {
    const s = await api.get("/fleet/summary");
    const unhealthy = Math.max(0, s.connected - s.healthy - s.stale);
    const card = (label, n, cls, key, value) => {
      const on = key && filter[key] === value;
      return h("div", { class: `card ${cls}${key ? " clickable" : ""}${on ? " active" : ""}`, "data-testid": "count-" + cls,
        role: key ? "button" : null, tabindex: key ? "0" : null, title: key ? (on ? "show all" : `show only ${label}`) : null,
        onclick: key ? () => { filter = { state: "", config_status: "", [key]: on ? "" : value }; cursors = [""]; syncUrl(); refresh(); } : null },
      h("div", { class: "n", text: fmtNum(n) }), h("div", { class: "muted", text: label }));
    };
    const cs = s.config_status || {};
    clear(counts,
      card("agents", s.agents, "all"), card("healthy", s.healthy, "healthy", "state", "healthy"),
      card("unhealthy", unhealthy, "unhealthy", "state", "unhealthy"), card("stale", s.stale, "stale", "state", "stale"),
      card("disconnected", s.agents - s.connected, "disconnected", "state", "disconnected"),
      h("div", { class: "card-sep" }),
      ["APPLIED", "APPLYING", "FAILED", "UNSET"].map((k) => card(k, cs[k] || 0, "cfg-" + k.toLowerCase(), "config_status", k)));
  }

  async function loadPage() {
    const cursor = cursors[cursors.length - 1];
    try {
      data = await api.get("/agents" + qs({ selector, ...filter, limit: PAGE, cursor }));
      clear(selErr);
      input.classList.remove("invalid");
    } catch (err) {
      if (err.code === "invalid_selector" || err.status === 400) {
        input.classList.add("invalid");
        clear(selErr, err.message);
        data = { agents: [], matched: 0, next_cursor: null };
      } else {
        clear(selErr, errorBox(err));
      }
    }
    draw();
  }

  async function refresh() {
    const t0 = performance.now();
    await Promise.all([loadSummary(), loadPage()]);
    live.textContent = `live · updated ${fmtClock(Date.now())} (${Math.round(performance.now() - t0)} ms)`;
  }

  function syncUrl() {
    history.replaceState(null, "", "#/fleet" + qs({ selector, ...filter }));
  }
  input.addEventListener("input", debounce(() => {
    selector = input.value.trim();
    cursors = [""];
    syncUrl();
    loadPage();
  }, 250));
  next.addEventListener("click", () => { if (data && data.next_cursor) { cursors.push(data.next_cursor); loadPage(); } });
  prev.addEventListener("click", () => { if (cursors.length > 1) { cursors.pop(); loadPage(); } });

  await refresh();
  return poller(refresh, REFRESH_MS);
}

// The agent's "unwinders" health component: "native: unwind tables, python: 2, nodejs: off,
// java: 1" (docs/agent.md) → how native stacks are walked, then each interpreter whose frames
// it names in some process, with how many processes.
function unwindersOf(a) {
  const c = a.health && a.health.components && a.health.components.unwinders;
  if (!c || typeof c.status !== "string" || !c.status.startsWith("native: ")) return [];
  return c.status.split(", ").map((p) => p.split(": ")).filter(([k, v]) => k && v && v !== "off" && v !== "0")
    .map(([k, v]) => (k === "native" ? `native (${v})` : `${k} ×${v}`));
}

function unwindersCell(a) {
  const u = unwindersOf(a);
  const c = a.health && a.health.components && a.health.components.unwinders;
  return h("td", { "data-testid": "unwinders", title: (c && c.status) || "" },
    u.length ? u.map((x) => h("span", { class: "label", text: x })) : "—");
}

function labelsOf(a) {
  const attrs = a.attributes || {};
  return Object.keys(attrs).filter((k) => !STANDARD.has(k)).sort().map((k) => `${k}=${attrs[k]}`);
}
