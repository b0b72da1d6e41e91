// The Profiles page's query as pure data: what the URL holds (service, label matchers, profile
// type, time range as a preset or absolute, the brushed selection, the comparison's baseline,
// the view), how it becomes API parameters (the store's `match=` filters, or the older named
// parameters where a controller has no label API), the default baseline, and values shown in
// their unit. No DOM: unit-tested under node.

export const PRESETS = [["15m", 15 * 60e3], ["1h", 3600e3], ["6h", 6 * 3600e3], ["24h", 24 * 3600e3], ["7d", 7 * 86400e3]];
export const DEFAULT_PRESET = "1h";
export const VIEWS = ["both", "flame", "table"];

// Resource attributes the profile API filters by name on every controller; any other key needs
// the store's `match=` filter (a controller with the label API).
export const NAMED_FILTERS = {
  "service.name": "service",
  "profleet.agent.uid": "agent",
  "k8s.namespace.name": "namespace",
  "k8s.pod.name": "pod",
  "k8s.container.name": "container",
  "profleet.capture.id": "capture_id",
  "profleet.trigger": "trigger",
};

// Parses "k=v" (the first '=' splits; keys have none).
export function parseMatcher(s) {
  const i = String(s).indexOf("=");
  if (i <= 0) return null;
  return { key: s.slice(0, i).trim(), value: s.slice(i + 1) };
}

// URLSearchParams → the query: {service, matchers[{key,value}], type, preset|from,to, sel, base, view, compare, frame}.
export function parseQuery(p) {
  const num = (k) => (p.get(k) && /^\d+$/.test(p.get(k)) ? Number(p.get(k)) : null);
  const range = (k) => {
    const m = /^(\d+)-(\d+)$/.exec(p.get(k) || "");
    return m && Number(m[1]) < Number(m[2]) ? [Number(m[1]), Number(m[2])] : null;
  };
  const q = {
    service: p.get("service") || "",
    matchers: p.getAll("match").map(parseMatcher).filter(Boolean),
    type: p.get("type") || "cpu",
    preset: null,
    from: num("from"),
    to: num("to"),
    sel: range("sel"),
    base: range("base"),
    compare: p.get("compare") === "1",
    view: VIEWS.includes(p.get("view")) ? p.get("view") : "both",
    frame: p.get("frame") || "",
  };
  if (q.from === null || q.to === null || q.from >= q.to) {
    q.from = q.to = null;
    q.preset = PRESETS.some(([k]) => k === p.get("range")) ? p.get("range") : DEFAULT_PRESET;
  }
  return q;
}

// The query → a URL hash query string (defaults left out, so links stay short).
export function formatQuery(q) {
  const u = new URLSearchParams();
  if (q.service) u.set("service", q.service);
  for (const m of q.matchers || []) u.append("match", `${m.key}=${m.value}`);
  if (q.type && q.type !== "cpu") u.set("type", q.type);
  if (q.from !== null && q.from !== undefined && q.to) {
    u.set("from", String(q.from));
    u.set("to", String(q.to));
  } else if (q.preset && q.preset !== DEFAULT_PRESET) u.set("range", q.preset);
  if (q.sel) u.set("sel", `${Math.round(q.sel[0])}-${Math.round(q.sel[1])}`);
  if (q.compare) u.set("compare", "1");
  if (q.base) u.set("base", `${Math.round(q.base[0])}-${Math.round(q.base[1])}`);
  if (q.view && q.view !== "both") u.set("view", q.view);
  if (q.frame) u.set("frame", q.frame);
  const s = u.toString();
  return s ? "?" + s : "";
}

// The range the timeline shows: [from, to] in ms.
export function timeRange(q, now = Date.now()) {
  if (q.from !== null && q.to !== null) return [q.from, q.to];
  const len = (PRESETS.find(([k]) => k === q.preset) || PRESETS[1])[1];
  return [now - len, now];
}

// The range the flame graph shows: the brushed selection, else the whole range.
export function selectionRange(q, now = Date.now()) {
  return q.sel || timeRange(q, now);
}

// The baseline of a comparison: the same length right before the selection; where the store
// holds nothing that early (dataFrom, the oldest stored profile's start), it starts at dataFrom
// instead; with nothing stored before the selection at all, the selection's first half is the
// baseline and its second half the comparison. Returns {base:[f,t], sel:[f,t]}.
export function defaultBaseline(sel, dataFrom) {
  const [f, t] = sel;
  const len = t - f;
  if (dataFrom === null || dataFrom === undefined || dataFrom <= f - len) return { base: [f - len, f], sel: [f, t] };
  if (dataFrom < f) return { base: [dataFrom, f], sel: [f, t] };
  const mid = Math.round((Math.max(f, dataFrom) + t) / 2);
  return { base: [Math.max(f, dataFrom), mid], sel: [mid, t] };
}

// API parameters of a query's filters. With the label API (`labels: true`) every matcher is a
// `match=k=v`; without it, the named parameters (service, namespace, …) and `unsupported`
// lists the matchers that controller cannot apply. Returns [params as [k, v] pairs, unsupported].
export function filterParams(q, { labels = false } = {}) {
  const out = [];
  const unsupported = [];
  if (q.service) out.push(["service", q.service]);
  for (const m of q.matchers || []) {
    if (labels) out.push(["match", `${m.key}=${m.value}`]);
    else if (NAMED_FILTERS[m.key]) out.push([NAMED_FILTERS[m.key], m.value]);
    else unsupported.push(m);
  }
  if (q.type) out.push(["type", q.type]);
  return [out, unsupported];
}

// Pairs → "?k=v&k=v" (repeated keys kept, empty values left out).
export function pairsQs(pairs) {
  const u = new URLSearchParams();
  for (const [k, v] of pairs) if (v !== undefined && v !== null && v !== "") u.append(k, String(v));
  const s = u.toString();
  return s ? "?" + s : "";
}

// A profile type's unit where the controller does not say (the API's "unit" wins).
export function unitOfType(type) {
  if (/^(off_cpu|wall)$/.test(type) || /_(ns|nanoseconds)$/.test(type) || type === "delay") return "nanoseconds";
  if (/space|bytes/.test(type)) return "bytes";
  if (type === "cpu") return "samples";
  return "count";
}

const TYPE_LABELS = {
  cpu: "CPU", off_cpu: "Off-CPU", wall: "Wall clock", alloc_space: "Allocated bytes", alloc_objects: "Allocations",
  inuse_space: "In-use bytes", inuse_objects: "In-use objects", goroutine: "Goroutines", contentions: "Lock contentions",
  delay: "Lock delay", samples: "Samples",
};
export function typeLabel(type) {
  return TYPE_LABELS[type] ? `${TYPE_LABELS[type]} (${type})` : type;
}

// A value in its unit: nanoseconds as time (ns … h), bytes in binary multiples, counts with
// k/M/G. Samples of a CPU profile stay samples (their time depends on the frequency).
export function fmtValue(v, unit) {
  if (v === undefined || v === null || Number.isNaN(v)) return "—";
  const n = Number(v);
  if (unit === "nanoseconds") {
    const a = Math.abs(n);
    if (a < 1e3) return `${n} ns`;
    if (a < 1e6) return `${trim(n / 1e3)} µs`;
    if (a < 1e9) return `${trim(n / 1e6)} ms`;
    if (a < 60e9) return `${trim(n / 1e9)} s`;
    if (a < 3600e9) return `${trim(n / 60e9)} min`;
    return `${trim(n / 3600e9)} h`;
  }
  if (unit === "bytes") {
    const a = Math.abs(n);
    const u = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0, x = n;
    while (Math.abs(x) >= 1024 && i < u.length - 1 && a >= 1024) { x /= 1024; i++; }
    return i ? `${trim(x)} ${u[i]}` : `${n} B`;
  }
  const s = compact(n);
  return unit === "samples" ? `${s} samples` : s;
}

function trim(x) {
  return Math.abs(x) >= 100 ? x.toFixed(0) : Math.abs(x) >= 10 ? x.toFixed(1) : x.toFixed(2);
}

function compact(n) {
  const a = Math.abs(n);
  if (a < 1e4) return n.toLocaleString("en-US");
  if (a < 1e6) return trim(n / 1e3) + "k";
  if (a < 1e9) return trim(n / 1e6) + "M";
  return trim(n / 1e9) + "G";
}

// Frame colors by OpenTelemetry profile.frame.type: [type, label, hue class name].
export const FRAME_TYPES = [
  ["native", "Native"], ["kernel", "Kernel"], ["go", "Go"], ["cpython", "Python"], ["jvm", "Java"], ["v8js", "JavaScript"],
];
const FRAME_COLORS = {
  native: [28, 80, 62], kernel: [0, 65, 68], go: [190, 60, 58], cpython: [212, 55, 62], jvm: [30, 90, 55],
  v8js: [52, 85, 55], other: [0, 0, 72],
};

// The fill of a frame of this type, varied a little by its name so neighbours stay apart.
export function frameColor(type, name = "") {
  const [hh, s, l] = FRAME_COLORS[type] || FRAME_COLORS.other;
  let x = 0;
  for (let i = 0; i < name.length && i < 32; i++) x = (x * 31 + name.charCodeAt(i)) >>> 0;
  const dl = (x % 13) - 6;
  return `hsl(${hh}, ${s}%, ${l + dl}%)`;
}

// The fill of a frame of a tree without frame types: warm hues (red to yellow) by its name.
export function nameColor(name = "") {
  let x = 0;
  for (let i = 0; i < name.length && i < 48; i++) x = (x * 33 + name.charCodeAt(i)) >>> 0;
  return `hsl(${8 + (x % 44)}, ${72 + ((x >>> 8) % 16)}%, ${58 + ((x >>> 12) % 10)}%)`;
}

// The fill of a diff frame: red as its share grew (delta > 0), blue as it shrank, deeper as
// |delta| nears its value; orange when only the range has it (no base); grey when unchanged.
export function diffColor(delta, value, base) {
  if (value > 0 && !base) return "hsl(34, 100%, 66%)";
  const r = Math.min(1, Math.abs(delta) / Math.max(value, Math.abs(delta), 1));
  if (!delta || r < 0.005) return "hsl(0, 0%, 86%)";
  return `hsl(${delta > 0 ? 0 : 218}, ${55 + 35 * r}%, ${90 - 42 * r}%)`;
}

// Which frame types a tree holds (for the legend), in FRAME_TYPES order, "other" last.
export function frameTypesIn(tree) {
  const seen = new Set();
  const walk = (n) => {
    if (n.type) seen.add(n.type);
    for (const c of n.children || []) walk(c);
  };
  for (const c of tree.children || []) walk(c);
  const known = FRAME_TYPES.filter(([t]) => seen.has(t));
  const other = [...seen].filter((t) => !FRAME_COLORS[t] || t === "other");
  return { known, other };
}

// Timeline points from a profile list where the controller has no timeline route: each
// profile's samples into the bucket of its start. Returns [[t_ms, value], …] for every bucket.
export function bucketProfiles(profiles, from, to, step) {
  const n = Math.max(1, Math.ceil((to - from) / step));
  const v = new Array(n).fill(0);
  for (const p of profiles) {
    const i = Math.floor((p.start_ms - from) / step);
    if (i >= 0 && i < n) v[i] += p.samples || 0;
  }
  return v.map((x, i) => [from + i * step, x]);
}

// A timeline step for a range: about 120 points, rounded to a whole 10 s, minute, 5 min, …
export function stepFor(from, to) {
  const want = (to - from) / 120;
  const steps = [10e3, 30e3, 60e3, 120e3, 300e3, 600e3, 1800e3, 3600e3, 3 * 3600e3, 6 * 3600e3, 86400e3];
  return steps.find((s) => s >= want) || steps[steps.length - 1];
}
