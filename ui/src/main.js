// The console shell: login, the role badge, navigation and a hash router (#/fleet, ...).
import "./style.css";
import { api, token, setUnauthenticatedHandler } from "./api.js";
import { h, clear, errorBox } from "./dom.js";
import { fleetPage } from "./pages/fleet.js";
import { agentPage } from "./pages/agent.js";
import { configsPage } from "./pages/configs.js";
import { capturesPage } from "./pages/captures.js";
import { profilesPage } from "./pages/profiles.js";

const app = document.getElementById("app");
const session = { role: null, name: "", canWrite: false, canAdmin: false };
let current = null; // the page's cleanup (pollers)

const routes = [
  ["fleet", "Fleet", fleetPage],
  ["configs", "Configs", configsPage],
  ["captures", "Captures", capturesPage],
  ["profiles", "Profiles", profilesPage],
];

function parseHash() {
  const raw = location.hash.replace(/^#\/?/, "");
  const [path, query] = raw.split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  return { parts, params: new URLSearchParams(query || "") };
}

export function go(hash) {
  if (location.hash === hash) render();
  else location.hash = hash;
}

function logout() {
  token.clear();
  session.role = null;
  go("#/login");
}

function loginPage(main, reason) {
  const input = h("input", { type: "password", id: "token", name: "token", autocomplete: "off",
    placeholder: "pf_…", "aria-label": "API token", required: true });
  const msg = h("div");
  if (reason) msg.append(errorBox(reason));
  const form = h("form", { class: "login", onsubmit: async (e) => {
    e.preventDefault();
    token.set(input.value.trim());
    try {
      await whoami();
      go("#/fleet");
    } catch (err) {
      token.clear();
      clear(msg, errorBox(err.status === 401 ? { code: "unauthenticated", message: "That token is not valid for the API." } : err));
    }
  } },
  h("h1", { text: "profleet" }),
  h("p", { class: "muted", text: "Sign in with an API token (viewer, operator or admin). It is kept in this tab's session storage only." }),
  h("label", { for: "token", text: "Token" }), input, h("button", { type: "submit", text: "Sign in" }), msg);
  clear(main, form);
  input.focus();
}

async function whoami() {
  const w = await api.get("/whoami");
  session.role = w.role;
  session.name = w.name;
  session.canWrite = !!w.can_write; // captures, rollouts (operator)
  session.canAdmin = !!w.can_admin; // configs, assignments (admin)
  return w;
}

function shell(active) {
  const nav = h("nav", {}, routes.map(([id, label]) =>
    h("a", { href: "#/" + id, class: id === active ? "active" : "", text: label })));
  const who = h("div", { class: "who" },
    h("span", { class: "role badge " + session.role, "data-testid": "role", text: session.role }),
    session.name ? h("span", { class: "muted", text: session.name }) : null,
    h("button", { type: "button", class: "secondary", "data-testid": "logout", text: "Log out", onclick: logout }));
  const main = h("main", { id: "main" });
  clear(app, h("header", {}, h("a", { href: "#/fleet", class: "brand", text: "profleet" }), nav, who), main);
  return main;
}

async function render() {
  if (current && current.stop) current.stop();
  current = null;
  const { parts, params } = parseHash();
  const page = parts[0] || "fleet";
  if (!token.get() || page === "login") {
    clear(app, h("main", { id: "main" }));
    loginPage(app.firstChild);
    return;
  }
  if (!session.role) {
    try {
      await whoami();
    } catch (err) {
      token.clear();
      clear(app, h("main", { id: "main" }));
      loginPage(app.firstChild, err.status === 401 ? null : err);
      return;
    }
  }
  const active = page === "agent" ? "fleet" : page;
  const main = shell(active);
  const ctx = { session, params, parts, go };
  let fn = null;
  if (page === "agent") fn = agentPage;
  for (const [id, , f] of routes) if (id === page) fn = f;
  if (!fn) {
    clear(main, h("div", { class: "empty", text: "No such page." }));
    return;
  }
  document.title = "profleet · " + (routes.find((r) => r[0] === active) || ["", "Agent"])[1];
  try {
    current = (await fn(main, ctx)) || null;
  } catch (err) {
    main.append(errorBox(err));
  }
}

setUnauthenticatedHandler(() => {
  token.clear();
  session.role = null;
  go("#/login");
});
window.addEventListener("hashchange", render);
render();
