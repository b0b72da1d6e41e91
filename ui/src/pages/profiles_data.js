// What the Profiles page asks the store besides trees: label names and values, profile types,
// and whether this controller has the label, timeline and profile-type routes. A 404 from one
// of them means an older controller: the page then derives names, values and types from the
// profile list (its metadata fields) and remembers that for the session.
import { api } from "../api.js";
import { pairsQs, NAMED_FILTERS } from "../query.js";

const cap = { labels: null, timeline: null, types: null };
let names = null;
const listCache = new Map();

// Profile list fields by resource attribute (for values where there is no label API).
const FIELDS = {
  "service.name": "service", "profleet.agent.uid": "agent", "k8s.namespace.name": "namespace",
  "k8s.pod.name": "pod", "k8s.container.name": "container", "profleet.capture.id": "capture_id",
  "profleet.trigger": "trigger", "host.name": "host", "process.executable.name": "executable",
};

const isMissing = (err) => err && (err.status === 404 || err.status === 405);

// The route set of this controller, probed once: {labels, timeline, types} (timeline and
// types are settled by their first call).
export async function capabilities(range) {
  if (cap.labels === null) {
    try {
      names = (await api.get("/labels" + pairsQs([["from", range[0]], ["to", range[1]]]))).names || [];
      cap.labels = true;
    } catch (err) {
      if (!isMissing(err)) throw err;
      cap.labels = false;
    }
  }
  return cap;
}

// Whether the timeline route exists; set by the page's first timeline call.
export function timelineMissing(err) {
  if (isMissing(err)) { cap.timeline = false; return true; }
  return false;
}

async function recentProfiles(range) {
  const k = `${Math.floor(range[0] / 60e3)}-${Math.floor(range[1] / 60e3)}`;
  if (!listCache.has(k)) {
    if (listCache.size > 8) listCache.clear();
    listCache.set(k, api.get("/profiles" + pairsQs([["from", range[0]], ["to", range[1]], ["limit", 1000]])).then((l) => l.profiles));
  }
  return listCache.get(k);
}

export async function labelNames(c, range) {
  if (c.labels) {
    names = (await api.get("/labels" + pairsQs([["from", range[0]], ["to", range[1]]]))).names || names || [];
    return names;
  }
  return Object.keys(NAMED_FILTERS);
}

export async function labelValues(c, key, range) {
  if (c.labels) {
    const r = await api.get(`/labels/${encodeURIComponent(key)}/values` + pairsQs([["from", range[0]], ["to", range[1]]]));
    return r.values || [];
  }
  const f = FIELDS[key];
  if (!f) return [];
  const vals = new Set();
  for (const p of await recentProfiles(range)) if (p[f] !== undefined && p[f] !== "") vals.add(String(p[f]));
  return [...vals].sort();
}

// [{type, unit?}] stored in the range.
export async function profileTypes(c, range) {
  if (c.types !== false) {
    try {
      const r = await api.get("/profile_types" + pairsQs([["from", range[0]], ["to", range[1]]]));
      c.types = true;
      return r.types || [];
    } catch (err) {
      if (!isMissing(err)) throw err;
      c.types = false;
    }
  }
  const types = new Set(["cpu"]);
  for (const p of await recentProfiles(range)) if (p.type) types.add(p.type);
  return [...types].map((type) => ({ type }));
}
