// The REST API as the console uses it: the bearer token lives in sessionStorage only (never
// a URL or a cookie), every call sends it, and errors come back as ApiError with the API's
// {"error":{"code","message","path"}} fields.
const KEY = "profleet.token";

export class ApiError extends Error {
  constructor(status, body) {
    const e = (body && body.error) || {};
    super(e.message || `HTTP ${status}`);
    this.status = status;
    this.code = e.code || "http_" + status;
    this.path = e.path || "";
  }
}

export const token = {
  get: () => sessionStorage.getItem(KEY),
  set: (t) => sessionStorage.setItem(KEY, t),
  clear: () => sessionStorage.removeItem(KEY),
};

let onUnauthenticated = () => {};
export function setUnauthenticatedHandler(fn) {
  onUnauthenticated = fn;
}

export function qs(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params))
    if (v !== undefined && v !== null && v !== "") u.set(k, String(v));
  const s = u.toString();
  return s ? "?" + s : "";
}

async function call(method, path, { body, raw, ctype } = {}) {
  const headers = {};
  const t = token.get();
  if (t) headers.Authorization = "Bearer " + t;
  if (body !== undefined) headers["Content-Type"] = ctype || "application/json";
  const r = await fetch("/api/v1" + path, {
    method,
    headers,
    body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
    cache: "no-store",
  });
  if (raw && r.ok) return r;
  let data = null;
  const text = await r.text();
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!r.ok) {
    const err = new ApiError(r.status, data);
    if (r.status === 401 && path !== "/whoami") onUnauthenticated(err);
    throw err;
  }
  return data;
}

export const api = {
  get: (p) => call("GET", p),
  put: (p, body, ctype) => call("PUT", p, { body, ctype }),
  post: (p, body, ctype) => call("POST", p, { body, ctype }),
  del: (p) => call("DELETE", p),
  raw: (p) => call("GET", p, { raw: true }),
};
