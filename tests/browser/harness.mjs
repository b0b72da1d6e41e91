// Starts the real controller and agents on loopback for the browser tests (the JavaScript
// twin of tests/integration/pfharness.py): free ports, temp dirs, every wait bounded by a
// deadline, every process stopped at the end.
import { spawn } from "node:child_process";
import { mkdtempSync, mkdirSync, openSync, readFileSync, existsSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export const CONTROLLER_BIN = process.env.PF_CONTROLLER_BIN || "";
export const AGENT_BIN = process.env.PF_AGENT_BIN || "";
export const UI_DIR = process.env.PF_UI_DIR || "";

export async function waitUntil(fn, { timeout = 10000, interval = 100, what = "condition" } = {}) {
  const deadline = Date.now() + timeout;
  let last;
  while (Date.now() < deadline) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    await new Promise((r) => setTimeout(r, interval));
  }
  throw new Error(`timed out after ${timeout} ms waiting for ${what} (last: ${last})`);
}

export function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

class Proc {
  constructor(args, logPath, env = {}) {
    const fd = openSync(logPath, "a");
    this.logPath = logPath;
    this.p = spawn(args[0], args.slice(1), { stdio: ["ignore", fd, fd], env: { ...process.env, ...env } });
    this.exited = new Promise((r) => this.p.once("exit", (code, sig) => r({ code, sig })));
  }
  alive() {
    return this.p.exitCode === null && this.p.signalCode === null;
  }
  // SIGTERM, SIGKILL after timeout ms; resolves to {code, sig} of the exit.
  async stop(timeout = 10000) {
    if (this.alive()) {
      this.p.kill("SIGTERM");
      const t = setTimeout(() => this.p.kill("SIGKILL"), timeout);
      await this.exited;
      clearTimeout(t);
    }
    return this.exited;
  }
  output() {
    return readFileSync(this.logPath, "utf8");
  }
}

export class Fleet {
  constructor() {
    this.dir = mkdtempSync(join(tmpdir(), "pf-browser-"));
    this.procs = [];
    this.agents = {};
  }

  // uiDir: the console it serves (PF_UI_DIR unless given); bin: the controller (PF_CONTROLLER_BIN
  // unless given)
  async startController(extra = [], { uiDir = UI_DIR, bin = CONTROLLER_BIN } = {}) {
    this.port = await freePort();
    this.base = `http://127.0.0.1:${this.port}`;
    this.dataDir = join(this.dir, "controller-data");
    const args = [bin, "--listen", `127.0.0.1:${this.port}`, "--data-dir", this.dataDir, ...extra, ...(process.env.PF_CONTROLLER_DEBUG ? ["--log-level", "debug"] : [])];
    if (uiDir) args.push("--ui-dir", uiDir);
    this.controller = new Proc(args, join(this.dir, "controller.log"));
    this.procs.push(this.controller);
    await waitUntil(async () => {
      if (!this.controller.alive()) throw new Error("controller exited:\n" + this.controller.output());
      const r = await fetch(this.base + "/readyz").catch(() => null);
      return r && r.status === 200;
    }, { timeout: 15000, what: "controller /readyz" });
    this.adminToken = readFileSync(join(this.dataDir, "admin.token"), "utf8").trim();
    this.agentTokenFile = join(this.dataDir, "agent.token");
  }

  // A token of another role, made through the API (POST /api/v1/tokens): its secret.
  async addToken(role, name) {
    const r = await this.api("POST", "/tokens", JSON.stringify({ name: name.replace(/[^A-Za-z0-9._@-]/g, "-"), role }));
    if (r.status !== 201) throw new Error("POST /tokens: " + r.status + " " + JSON.stringify(r.body));
    return r.body.token;
  }

  startAgent(name, labels = [], extra = []) {
    const state = join(this.dir, "agent-" + name);
    mkdirSync(state, { recursive: true });
    const args = [AGENT_BIN, "--server", `ws://127.0.0.1:${this.port}/v1/opamp`, "--token-file", this.agentTokenFile,
      "--state-dir", state, "--log-level", "debug"];
    for (const l of labels) args.push("--label", l);
    args.push(...extra);
    const p = new Proc(args, join(this.dir, `agent-${name}.log`));
    this.procs.push(p);
    this.agents[name] = { proc: p, state };
    return p;
  }

  // A workload process (e.g. python3 with OTEL_SERVICE_NAME) stopped with the rest.
  startWorkload(name, args, env = {}) {
    const p = new Proc(args, join(this.dir, `workload-${name}.log`), env);
    this.procs.unshift(p); // stopped after the agents
    return p;
  }

  async agentUid(name) {
    const f = join(this.agents[name].state, "instance_uid");
    return waitUntil(() => existsSync(f) && readFileSync(f, "utf8").trim(), { what: "instance_uid of " + name });
  }

  async api(method, path, body, token = this.adminToken) {
    const headers = { Authorization: "Bearer " + token };
    const r = await fetch(this.base + "/api/v1" + path, { method, headers, body });
    const text = await r.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { data = text; }
    return { status: r.status, body: data };
  }

  // Stops everything (agents first); returns the controller's exit {code, sig} and log.
  async stop({ keep = false } = {}) {
    let ctl = null;
    for (const p of this.procs.reverse()) {
      const r = await p.stop().catch(() => null);
      if (p === this.controller) ctl = { ...r, log: p.output() };
    }
    if (!keep) rmSync(this.dir, { recursive: true, force: true });
    return ctl;
  }
}

// Whether the kernel lets this process load BPF (the agents' sampler): the agent's log says.
export function samplerLoaded(fleet, name) {
  return /eBPF sampler loaded/.test(fleet.agents[name].proc.output());
}
