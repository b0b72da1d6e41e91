// Small DOM helpers: elements are built with textContent only (no innerHTML of data), and
// classes instead of inline styles (the CSP has no 'unsafe-inline').
export function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k === "value") el.value = v;
    else if (k === "checked" || k === "disabled" || k === "selected") el[k] = !!v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of kids.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function clear(el, ...kids) {
  el.replaceChildren(...kids.flat(Infinity).filter((k) => k !== null && k !== undefined && k !== false));
  return el;
}

// One time format on every page: the browser's locale (its own 12- or 24-hour clock), seconds,
// and the zone. Axis ticks use the same locale and clock.
const TIME_FMT = new Intl.DateTimeFormat(undefined, { year: "numeric", month: "short", day: "numeric",
  hour: "numeric", minute: "2-digit", second: "2-digit", timeZoneName: "short" });
const TICK_HM = new Intl.DateTimeFormat(undefined, { hour: "numeric", minute: "2-digit" });
const TICK_HMS = new Intl.DateTimeFormat(undefined, { hour: "numeric", minute: "2-digit", second: "2-digit" });
const TICK_DAY = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric", hour: "numeric" });

export function fmtTime(ms) {
  if (!ms) return "—";
  return TIME_FMT.format(new Date(ms));
}

const CLOCK = new Intl.DateTimeFormat(undefined, { hour: "numeric", minute: "2-digit", second: "2-digit" });
export function fmtClock(ms) {
  return CLOCK.format(new Date(ms));
}

// A tick of an axis over range [from, to]: with seconds up to 20 minutes (ticks fall on
// them), hours and minutes up to a day, else day and hour.
export function fmtTick(d, range) {
  const len = range[1] - range[0];
  return (len <= 20 * 60e3 ? TICK_HMS : len <= 86400e3 ? TICK_HM : TICK_DAY).format(d);
}

// The zone times are shown in (for the datetime fields' labels).
export function zoneName() {
  const p = TIME_FMT.formatToParts(new Date()).find((x) => x.type === "timeZoneName");
  return p ? p.value : "";
}

export function ago(ms, now = Date.now()) {
  if (!ms) return "never";
  const s = Math.max(0, Math.round((now - ms) / 1000));
  if (s < 60) return s + " s ago";
  if (s < 3600) return Math.round(s / 60) + " min ago";
  if (s < 86400) return Math.round(s / 3600) + " h ago";
  return Math.round(s / 86400) + " d ago";
}

export function fmtNum(n) {
  return n === undefined || n === null ? "—" : Number(n).toLocaleString("en-US");
}

export function fmtBytes(n) {
  if (n < 1024) return n + " B";
  if (n < 1 << 20) return (n / 1024).toFixed(1) + " KiB";
  return (n / (1 << 20)).toFixed(1) + " MiB";
}

export function errorBox(err, extra) {
  if (!err) return null;
  return h("div", { class: "error", role: "alert" },
    h("strong", { text: err.code ? err.code + ": " : "" }), err.message || String(err), extra);
}

export function debounce(fn, ms) {
  let t = 0;
  return (...a) => {
    clearTimeout(t);
    t = setTimeout(() => fn(...a), ms);
  };
}

// A timer that runs fn every ms while the page is visible; stop() on leaving the page.
export function poller(fn, ms) {
  let stopped = false, t = 0;
  const tick = async () => {
    if (stopped) return;
    if (!document.hidden) {
      try { await fn(); } catch { /* shown by fn */ }
    }
    if (!stopped) t = setTimeout(tick, ms);
  };
  t = setTimeout(tick, ms);
  return { stop() { stopped = true; clearTimeout(t); } };
}

// The states of a capture that has ended.
export const CAPTURE_ENDED = new Set(["done", "partial", "failed", "cancelled"]);

export function agentState(a) {
  if (!a.connected) return "disconnected";
  if (a.stale) return "stale";
  return a.healthy ? "healthy" : "unhealthy";
}

export function badge(text, kind) {
  return h("span", { class: "badge " + (kind || String(text).toLowerCase()) , text });
}
