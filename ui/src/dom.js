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

export function fmtTime(ms) {
  if (!ms) return "—";
  return new Date(ms).toLocaleString(undefined, { hour12: false });
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

export function agentState(a) {
  if (!a.connected) return "disconnected";
  if (a.stale) return "stale";
  return a.healthy ? "healthy" : "unhealthy";
}

export function badge(text, kind) {
  return h("span", { class: "badge " + (kind || String(text).toLowerCase()) , text });
}
