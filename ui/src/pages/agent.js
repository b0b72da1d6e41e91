// Agent: description, component health tree with last errors, config status and the
// effective config (secrets redacted), recent profiles and captures, "capture now".
import { api, qs } from "../api.js";
import { h, clear, ago, fmtTime, fmtNum, fmtBytes, errorBox, poller, agentState, badge, CAPTURE_ENDED as ENDED } from "../dom.js";

const SECRET_WORDS = "authorization|token|password|passwd|secret|api[_-]?key|credential";
const SECRET = new RegExp(SECRET_WORDS, "i");
const FLOW_HEADERS = /\bheaders\s*:\s*\{[^}]*[^}\s][^}]*\}/g;
const FLOW_SECRET = new RegExp(`([{,]\\s*)([\\w.-]*(?:${SECRET_WORDS})[\\w.-]*)\\s*:\\s*[^,}]+`, "gi");

// Redacts values of secret-looking keys and every value under "headers", in block style and
// in flow maps ({headers: {k: v}}). What the agent reports is shown, minus these values.
export function redact(yaml) {
  const out = [];
  let headersIndent = -1;
  for (let line of (yaml || "").split("\n")) {
    line = line.replace(FLOW_HEADERS, "headers: {‹redacted›}").replace(FLOW_SECRET, "$1$2: ‹redacted›");
    const m = /^(\s*)(-\s+)?([^:#\s{][^:#]*?)\s*:\s*(.*)$/.exec(line);
    const indent = m ? m[1].length + (m[2] ? m[2].length : 0) : -1;
    if (headersIndent >= 0 && m && indent <= headersIndent) headersIndent = -1;
    if (m && m[3] === "headers" && !m[4]) { headersIndent = indent; out.push(line); continue; }
    if (m && m[4] && !m[4].startsWith("{") && (headersIndent >= 0 || SECRET.test(m[3]))) {
      out.push(`${m[1]}${m[2] || ""}${m[3]}: ‹redacted›`);
      continue;
    }
    out.push(line);
  }
  return out.join("\n");
}

function healthTree(name, c) {
  if (!c) return null;
  const kids = Object.entries(c.components || {}).sort(([a], [b]) => a.localeCompare(b));
  return h("li", {},
    badge(c.healthy ? "healthy" : "unhealthy"), " ", h("strong", { text: name }),
    c.status ? h("span", { class: "muted", text: " — " + c.status }) : null,
    c.last_error ? h("div", { class: "cfg-error", text: "last error: " + c.last_error }) : null,
    kids.length ? h("ul", {}, kids.map(([k, v]) => healthTree(k, v))) : null);
}

// The newest captures (up to CAPTURES) whose matched agents include uid, from each capture's
// per-agent list (the captures list has none). Ended captures are fetched once per page visit
// (known: id → capture); running ones again on every refresh.
const CAPTURES = 30;
async function capturesOf(uid, known) {
  const list = await api.get("/captures?limit=" + CAPTURES);
  const out = await Promise.all(list.captures.map(async (c) => {
    let full = known.get(c.id);
    if (!full) {
      full = await api.get("/captures/" + encodeURIComponent(c.id)).catch(() => null);
      if (full && ENDED.has(full.state)) known.set(c.id, full);
    }
    const mine = full && (full.agents || []).find((a) => a.instance_uid === uid);
    return mine ? { ...full, mine } : null;
  }));
  return out.filter(Boolean);
}

export async function agentPage(main, ctx) {
  const uid = ctx.parts[1];
  const known = new Map();
  const body = h("div");
  clear(main, h("p", {}, h("a", { href: "#/fleet", text: "← Fleet" })), body);

  async function load() {
    const a = await api.get("/agents/" + encodeURIComponent(uid));
    const attrs = a.attributes || {};
    const c = a.config || {};
    const st = agentState(a);
    const capMsg = h("div");
    const captureBtn = ctx.session.canWrite ? h("button", { type: "button", "data-testid": "capture-now", text: "Capture now (30 s)",
      onclick: async () => {
        const inst = attrs["service.instance.id"] ? `service.instance.id=${attrs["service.instance.id"]}` : null;
        if (!inst) { clear(capMsg, errorBox({ message: "this agent reports no service.instance.id to select it by" })); return; }
        try {
          const r = await api.post("/captures", { agents: `service.instance.id="${attrs["service.instance.id"]}"`, duration_seconds: 30, note: "console: capture now" });
          ctx.go("#/captures/" + r.id);
        } catch (err) { clear(capMsg, errorBox(err)); }
      } }) : null;

    const [profiles, agentCaps] = await Promise.all([
      api.get("/profiles" + qs({ agent: uid, limit: 10 })).catch(() => ({ profiles: [] })),
      capturesOf(uid, known).catch(() => []),
    ]);

    clear(body,
      h("div", { class: "title-row" },
        h("h1", { text: attrs["host.name"] || uid }), badge(st), captureBtn),
      capMsg,
      h("div", { class: "muted mono", text: uid }),
      h("div", { class: "cols" },
        h("section", {}, h("h2", { text: "Description" }),
          h("table", { class: "kv" }, h("tbody", {},
            Object.keys(attrs).sort().map((k) => h("tr", {}, h("th", { text: k }), h("td", { text: attrs[k] }))),
            h("tr", {}, h("th", { text: "transport" }), h("td", { text: a.transport || "—" })),
            h("tr", {}, h("th", { text: "first seen" }), h("td", { text: fmtTime(a.first_seen) })),
            h("tr", {}, h("th", { text: "last seen" }), h("td", { text: `${fmtTime(a.last_seen)} (${ago(a.last_seen)})` }))))),
        h("section", {}, h("h2", { text: "Health" }),
          a.health && Object.keys(a.health).length ? h("ul", { class: "tree", "data-testid": "health-tree" }, healthTree("agent", a.health)) : h("div", { class: "empty", text: "No health reported yet." }),
          h("h2", { text: "Config" }),
          h("p", {}, c.name ? `${c.name} v${c.version} ` : "no config applies ", badge(c.status || "UNSET", "cfg-" + (c.status || "unset").toLowerCase())),
          c.error ? h("div", { class: "cfg-error", text: c.error }) : null)),
      h("section", {}, h("h2", { text: "Effective config" }),
        c.effective ? h("pre", { class: "code", "data-testid": "effective-config", text: redact(c.effective) }) : h("div", { class: "empty", text: "The agent has not reported an effective config." })),
      h("div", { class: "cols" },
        h("section", {}, h("h2", {}, "Recent profiles ", h("a", { class: "small", href: "#/profiles?match=" + encodeURIComponent("profleet.agent.uid=" + uid), text: "(explore)" })),
          profiles.profiles.length ? h("table", { class: "grid" },
            h("thead", {}, h("tr", {}, ["Start", "Service", "Type", "Samples", "Size", "Trigger"].map((t) => h("th", { text: t })))),
            h("tbody", {}, profiles.profiles.slice(0, 10).map((p) => h("tr", {},
              h("td", {}, h("a", { href: "#/profiles?id=" + p.id, text: fmtTime(p.start_ms) })),
              h("td", { text: p.service || "—" }), h("td", { text: p.type }), h("td", { class: "num", text: fmtNum(p.samples) }),
              h("td", { class: "num", text: fmtBytes(p.size_bytes) }), h("td", { text: p.trigger || "continuous" })))))
            : h("div", { class: "empty", text: "No profiles from this agent in the store." })),
        h("section", {}, h("h2", { text: "Recent captures" }),
          agentCaps.length ? h("ul", { "data-testid": "agent-captures" }, agentCaps.map((x) => h("li", {}, h("a", { href: "#/captures/" + encodeURIComponent(x.id), text: fmtTime(x.created_at) }), " ", badge(x.state),
            ` this agent: ${x.mine.state}, ${fmtNum(x.mine.samples)} samples, ${(x.mine.profile_ids || []).length} profiles`, x.request && x.request.note ? " · " + x.request.note : "")))
            : h("div", { class: "empty", text: `None of the ${CAPTURES} newest captures included this agent.` }))));
  }
  try {
    await load();
  } catch (err) {
    if (err.status === 404) {
      clear(body, errorBox({ code: "not_found", message: "No agent " + uid }));
      return null;
    }
    clear(body, errorBox(err)); // a failed first load (controller busy, restarting): the poll retries
  }
  // A failed poll keeps what is shown; the next one replaces it.
  return poller(() => load().catch(() => {}), 5000);
}
