// Configs: names and versions, a YAML editor with server-side validation (the error's key
// path is located in the text), a diff of two versions, assignments with how many agents
// each selector matches, and rollouts where the controller has them.
import { api, qs } from "../api.js";
import { h, clear, fmtTime, fmtNum, errorBox, debounce, badge } from "../dom.js";

// The 1-based line of a key path ("profiling.exporters[1].endpoint") in a YAML text, or 0.
export function lineOfPath(yaml, path) {
  const lines = yaml.split("\n");
  const segs = [];
  for (const part of path.split(".")) {
    const m = /^([^[\]]*)((\[\d+\])*)$/.exec(part);
    if (!m) return 0;
    if (m[1]) segs.push({ key: m[1] });
    for (const ix of m[2].match(/\d+/g) || []) segs.push({ index: Number(ix) });
  }
  let pos = 0, indent = -1, found = 0;
  for (const s of segs) {
    let hit = -1;
    let count = -1;
    for (let i = pos; i < lines.length; i++) {
      const l = lines[i];
      if (!l.trim() || l.trim().startsWith("#")) continue;
      const ind = l.length - l.trimStart().length;
      if (i > pos && ind <= indent && found) break;
      if (s.key !== undefined) {
        const re = new RegExp("^\\s*(-\\s+)?" + s.key.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + "\\s*:");
        if (re.test(l) || new RegExp("[{,]\\s*" + s.key.replace(/[.*+?^${}()|[\]\\]/g, "\\$&") + "\\s*:").test(l)) { hit = i; break; }
      } else if (/^\s*-\s/.test(l) && ind > indent) {
        count++;
        if (count === s.index) { hit = i; break; }
      }
    }
    if (hit < 0) return found;
    found = hit + 1;
    pos = hit;
    indent = lines[hit].length - lines[hit].trimStart().length;
  }
  return found;
}

// Line diff (LCS) of two small texts: [{op:' '|'+'|'-', text}].
export function diffLines(a, b) {
  const x = a.split("\n"), y = b.split("\n");
  const n = x.length, m = y.length;
  if (n * m > 4e6) return [{ op: "!", text: "too large to diff here" }];
  const L = Array.from({ length: n + 1 }, () => new Uint32Array(m + 1));
  for (let i = n - 1; i >= 0; i--)
    for (let j = m - 1; j >= 0; j--)
      L[i][j] = x[i] === y[j] ? L[i + 1][j + 1] + 1 : Math.max(L[i + 1][j], L[i][j + 1]);
  const out = [];
  let i = 0, j = 0;
  while (i < n && j < m) {
    if (x[i] === y[j]) { out.push({ op: " ", text: x[i] }); i++; j++; }
    else if (L[i + 1][j] >= L[i][j + 1]) out.push({ op: "-", text: x[i++] });
    else out.push({ op: "+", text: y[j++] });
  }
  while (i < n) out.push({ op: "-", text: x[i++] });
  while (j < m) out.push({ op: "+", text: y[j++] });
  return out;
}

async function matchCount(selector) {
  const r = await api.get("/agents" + qs({ selector, limit: 1 }));
  return r.matched;
}

export async function configsPage(main, ctx) {
  const name = ctx.parts[1];
  if (name) return configEditor(main, ctx, name);
  const w = ctx.session.canAdmin; // configs and assignments take the admin role
  const [cfgs, asgs] = await Promise.all([api.get("/configs"), api.get("/assignments")]);
  const newName = h("input", { type: "text", placeholder: "new config name", pattern: "[A-Za-z0-9._-]{1,64}", "aria-label": "new config name" });
  const asgBody = h("tbody");
  const rollouts = h("section", { "data-testid": "rollouts" }, h("h2", { text: "Rollouts" }), h("div", { class: "muted", text: "loading…" }));
  clear(main,
    h("h1", { text: "Configs" }),
    h("div", { class: "cols" },
      h("section", {}, h("h2", { text: "Profiling configs" }),
        cfgs.configs.length ? h("table", { class: "grid", "data-testid": "configs-table" },
          h("thead", {}, h("tr", {}, ["Name", "Latest", "Created"].map((t) => h("th", { text: t })))),
          h("tbody", {}, cfgs.configs.map((c) => h("tr", {},
            h("td", {}, h("a", { href: "#/configs/" + encodeURIComponent(c.name), text: c.name })),
            h("td", { text: "v" + c.version }), h("td", { text: fmtTime(c.created) })))))
          : h("div", { class: "empty", text: "No configs yet. Agents run their local config until one applies to them." }),
        w ? h("form", { class: "inline", onsubmit: (e) => { e.preventDefault(); if (newName.value) ctx.go("#/configs/" + encodeURIComponent(newName.value)); } },
          newName, h("button", { type: "submit", text: "New config" })) : null),
      h("section", {}, h("h2", { text: "Assignments" }),
        h("p", { class: "muted", text: "An agent gets the config of the highest-priority assignment whose selector matches it, else 'default'." }),
        h("table", { class: "grid", "data-testid": "assignments-table" },
          h("thead", {}, h("tr", {}, ["Name", "Selector", "Config", "Priority", "Matches", ""].map((t) => h("th", { text: t })))), asgBody),
        w ? assignmentForm(ctx, cfgs.configs) : null)),
    rollouts);

  clear(asgBody, asgs.assignments.length ? asgs.assignments.map((a) => {
    const n = h("td", { class: "num", text: "…" });
    matchCount(a.selector).then((c) => (n.textContent = fmtNum(c) + " agents"), () => (n.textContent = "?"));
    return h("tr", {}, h("td", { text: a.name }), h("td", { class: "mono", text: a.selector || "(every agent)" }),
      h("td", {}, h("a", { href: "#/configs/" + encodeURIComponent(a.config), text: a.config })),
      h("td", { class: "num", text: a.priority }), n,
      h("td", {}, w ? h("button", { type: "button", class: "danger small", text: "Delete", onclick: async () => {
        if (!confirm(`Delete assignment ${a.name}?`)) return;
        await api.del("/assignments/" + encodeURIComponent(a.name));
        ctx.go("#/configs");
      } }) : null));
  }) : h("tr", {}, h("td", { colspan: 6, class: "empty", text: "No assignments: every agent gets 'default'." })));

  api.get("/rollouts?limit=20").then((r) => {
    const list = r.rollouts || [];
    clear(rollouts, h("h2", { text: "Rollouts" }), list.length
      ? list.map((ro) => rolloutRow(ro, ctx))
      : h("div", { class: "empty", "data-testid": "rollouts-empty", text: "No rollouts. Stage a version (PUT ?stage=1) and start one with POST /api/v1/rollouts or profleetctl." }));
  }, (err) => {
    clear(rollouts, h("h2", { text: "Rollouts" }), err.status === 404
      ? h("div", { class: "empty", "data-testid": "rollouts-unavailable", text: "Rollouts not available on this controller." })
      : errorBox(err));
  });
  return null;
}

// The actions each rollout state allows (docs/api.md "Rollouts").
const ROLLOUT_ACTIONS = {
  running: ["pause", "rollback", "cancel"],
  paused: ["resume", "rollback", "cancel"],
  halted: ["resume", "rollback", "cancel"],
};

function rolloutRow(ro, ctx) {
  const msg = h("span");
  const act = (verb) => h("button", { type: "button", class: verb === "rollback" || verb === "cancel" ? "danger small" : "secondary small", "data-testid": "rollout-" + verb, text: verb, onclick: async () => {
    if ((verb === "rollback" || verb === "cancel") && !confirm(`${verb} rollout ${ro.id}?`)) return;
    try {
      await api.post(`/rollouts/${encodeURIComponent(ro.id)}/${verb}`, {});
      ctx.go("#/configs");
    } catch (err) { clear(msg, errorBox(err)); }
  } });
  const batches = ro.batches || [];
  const actions = ctx.session.canWrite ? (ROLLOUT_ACTIONS[ro.state] || []).map(act) : [];
  return h("div", { class: "rollout", "data-testid": "rollout-row", "data-id": ro.id },
    h("strong", { text: `${ro.config} v${ro.version}` }), " ", badge(ro.state || "?"),
    h("span", { class: "muted", text: ` ${fmtNum(ro.agents || 0)} agents, batch ${ro.current_batch || 0} of ${ro.n_batches || batches.length}` }),
    ro.reason ? h("div", { class: "muted", text: ro.reason }) : null,
    h("div", { class: "batches" }, batches.map((b) => h("span", {
      class: "batch " + (b.state || ""),
      title: `applied ${b.applied}, failed ${b.failed}, pending ${b.pending}, offline ${b.offline}` + (b.reverted ? `, reverted ${b.reverted}` : ""),
      text: `#${b.number} ${b.state}: ${b.applied}/${b.agents}` + (b.failed ? `, ${b.failed} failed` : ""),
    }))),
    actions, msg);
}

function assignmentForm(ctx, configs) {
  const nm = h("input", { type: "text", placeholder: "name", required: true, "aria-label": "assignment name" });
  const sel = h("input", { type: "text", placeholder: "selector, e.g. env=prod", class: "mono", "aria-label": "assignment selector" });
  const matches = h("span", { class: "muted", "data-testid": "assignment-matches" });
  const cfg = h("select", { "aria-label": "config" }, configs.map((c) => h("option", { value: c.name, text: c.name })));
  const prio = h("input", { type: "number", value: "0", min: "-1000000", max: "1000000", "aria-label": "priority" });
  const msg = h("div");
  const update = debounce(async () => {
    try { matches.textContent = "matches " + fmtNum(await matchCount(sel.value.trim())) + " agents"; }
    catch (err) { matches.textContent = err.message; }
  }, 250);
  sel.addEventListener("input", update);
  update();
  return h("form", { class: "stack", onsubmit: async (e) => {
    e.preventDefault();
    try {
      await api.put("/assignments/" + encodeURIComponent(nm.value.trim()), { selector: sel.value.trim(), config: cfg.value, priority: Number(prio.value) });
      ctx.go("#/configs");
    } catch (err) { clear(msg, errorBox(err)); }
  } }, h("h3", { text: "Add or replace an assignment" }), nm, sel, matches, cfg, prio, h("button", { type: "submit", text: "Save assignment" }), msg);
}

async function configEditor(main, ctx, name) {
  const w = ctx.session.canAdmin; // configs and assignments take the admin role
  let versions = [];
  let latest = null;
  try {
    versions = (await api.get(`/configs/${encodeURIComponent(name)}/versions`)).versions;
    latest = await api.get(`/configs/${encodeURIComponent(name)}`);
  } catch (err) {
    if (err.status !== 404) throw err;
  }
  const text = h("textarea", { class: "editor", id: "config-body", spellcheck: "false", rows: 26, "aria-label": "config YAML", readonly: !w,
    value: latest ? latest.body : "profiling:\n  enabled: true\n  mode: continuous\n  sampling: {frequency_hz: 99, duration_seconds: 10}\n" });
  const gutter = h("pre", { class: "gutter", "aria-hidden": "true" });
  const result = h("div", { "data-testid": "config-result" });
  const syncGutter = () => {
    const n = text.value.split("\n").length;
    gutter.textContent = Array.from({ length: n }, (_, i) => i + 1).join("\n");
    gutter.scrollTop = text.scrollTop;
  };
  text.addEventListener("input", syncGutter);
  text.addEventListener("scroll", () => (gutter.scrollTop = text.scrollTop));
  syncGutter();

  const showError = (err) => {
    const line = err.path ? lineOfPath(text.value, err.path) : 0;
    const goto = line ? h("button", { type: "button", class: "secondary small", text: `Go to line ${line}`, onclick: () => selectLine(text, line) }) : null;
    clear(result, h("div", { class: "error", role: "alert", "data-testid": "config-error" },
      err.path ? h("div", {}, "at ", h("code", { "data-testid": "config-error-path", text: err.path }), line ? ` (line ${line})` : "") : null,
      h("div", { text: err.message }), goto));
    if (line) selectLine(text, line);
  };
  const validate = async () => {
    try {
      await api.post(`/configs/${encodeURIComponent(name)}/validate`, text.value, "text/yaml");
      clear(result, h("div", { class: "ok", text: "Valid." }));
      return true;
    } catch (err) { showError(err); return false; }
  };
  const save = async () => {
    try {
      const r = await api.put(`/configs/${encodeURIComponent(name)}`, text.value, "text/yaml");
      clear(result, h("div", { class: "ok", "data-testid": "config-saved",
        text: r.created ? `Saved version ${r.version}; pushed to ${fmtNum(r.pushed)} connected agents.` : `Unchanged: same as version ${r.version}.` }),
      h("a", { href: "#/fleet", text: "Watch the fleet apply it →" }));
      const here = location.hash;
      // show the new version in the list and the diff, unless the user moved on meanwhile
      setTimeout(() => { if (location.hash === here) ctx.go(here); }, 1500);
    } catch (err) { showError(err); }
  };

  // diff between two versions
  const va = h("select", { "aria-label": "base version" }), vb = h("select", { "aria-label": "compared version" });
  for (const v of versions) {
    va.append(h("option", { value: v.version, text: "v" + v.version }));
    vb.append(h("option", { value: v.version, text: "v" + v.version }));
  }
  if (versions.length > 1) va.value = versions[1].version;
  const diffOut = h("pre", { class: "diff", "data-testid": "config-diff" });
  const runDiff = async () => {
    const [a, b] = await Promise.all([va.value, vb.value].map((v) => api.get(`/configs/${encodeURIComponent(name)}?version=${v}`)));
    const d = diffLines(a.body, b.body);
    clear(diffOut, d.map((l) => h("div", { class: "dl " + (l.op === "+" ? "add" : l.op === "-" ? "del" : ""), text: `${l.op} ${l.text}` })));
  };
  va.addEventListener("change", runDiff);
  vb.addEventListener("change", runDiff);

  clear(main,
    h("p", {}, h("a", { href: "#/configs", text: "← Configs" })),
    h("h1", {}, "Config ", h("code", { text: name }), latest ? h("span", { class: "muted", text: ` v${latest.version} · ${latest.hash.slice(0, 12)}` }) : h("span", { class: "muted", text: " (new)" })),
    h("div", { class: "editor-wrap" }, gutter, text),
    w ? h("div", { class: "toolbar" },
      h("button", { type: "button", class: "secondary", "data-testid": "validate", text: "Validate", onclick: validate }),
      h("button", { type: "button", "data-testid": "save", text: "Save new version", onclick: save })) : h("p", { class: "muted", text: "Read only: editing needs the operator role." }),
    result,
    versions.length ? h("section", {}, h("h2", { text: "Versions" }),
      h("ul", {}, versions.map((v) => h("li", {}, `v${v.version} · ${fmtTime(v.created)} · `, h("span", { class: "mono muted", text: v.hash.slice(0, 12) })))),
      versions.length > 1 ? h("div", {}, h("h2", { text: "Diff" }), h("div", { class: "toolbar" }, va, " → ", vb), diffOut) : null) : null);
  if (versions.length > 1) runDiff();
  return null;
}

function selectLine(ta, line) {
  const lines = ta.value.split("\n");
  let start = 0;
  for (let i = 0; i < line - 1; i++) start += lines[i].length + 1;
  ta.focus();
  ta.setSelectionRange(start, start + (lines[line - 1] || "").length);
  const lh = parseFloat(getComputedStyle(ta).lineHeight) || 18;
  ta.scrollTop = Math.max(0, (line - 4) * lh);
}
