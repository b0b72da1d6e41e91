"""profleetctl end to end against the real controller (and a real agent, eBPF off): every
command run as a subprocess with --output json, its stdout parsed here and compared with the
API; the human tables and messages where users read them; exit statuses; server and token
from flags, environment and a config file (with its 0600 rule); the bash completion script
run by bash. Profiles are posted to the embedded store as OTLP made by `protoc --encode`
(test_profstore.encode), so profiles/top/pprof read real stored data.

Captures run against the real controller with capture-fake-agent playing the agents (real
OpAMP, scripted by the test), so that done, partial, failed and cancelled are all reached.
"""
import gzip
import json
import os
import shutil
import subprocess
import time
import unittest

import pfharness
from pfharness import IntegrationCase, free_port, wait_until

CTL_BIN = os.environ.get("PF_CTL_BIN", "")
TRACE = "41" * 16  # the link in test_profstore's profiles

VALID = """profiling:
  sampling: {frequency_hz: 49}
  exporters: []
"""
INVALID = """profiling:
  sampling: {frequency_hz: 5000}
"""


def have_protoc():
    return shutil.which("protoc") and os.path.isdir(
        os.path.join(pfharness.SHARED_DIR, "reference", "proto"))


class CtlCase(IntegrationCase):
    def setUp(self):
        super().setUp()
        if not CTL_BIN or not os.access(CTL_BIN, os.X_OK):
            self.fail("PF_CTL_BIN is not set to the profleetctl binary (run through ctest)")
        self.c = self.start_controller()
        # no ambient config: HOME points into the test dir
        self.env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": self.workdir}

    def start_controller(self):
        return self.controller()

    def ctl(self, *args, env=None, stdin=None, server=True, token=True, timeout=60):
        """Runs profleetctl; returns (exit status, stdout, stderr)."""
        argv = [CTL_BIN]
        if server:
            argv += ["--server", self.c.base]
        if token:
            argv += ["--token-file", os.path.join(self.c.data_dir, "admin.token")]
        e = dict(self.env)
        e.update(env or {})
        r = subprocess.run(argv + list(args), env=e, input=stdin, capture_output=True,
                           timeout=timeout)
        return r.returncode, r.stdout.decode(), r.stderr.decode()

    def ctl_json(self, *args, **kw):
        rc, out, err = self.ctl(*args, "--output", "json", **kw)
        self.assertEqual(rc, 0, "profleetctl %s: %s" % (" ".join(args), err))
        return json.loads(out)

    def write(self, name, text, mode=0o600):
        p = os.path.join(self.workdir, name)
        with open(p, "w") as f:
            f.write(text)
        os.chmod(p, mode)
        return p

    def start_agent(self, name="a", labels=("env=prod",)):
        a = pfharness.Agent(self.workdir, name,
                            server="ws://127.0.0.1:%d/v1/opamp" % self.c.port,
                            token_file=self.c.agent_token_file, labels=list(labels),
                            extra=["--no-sampler"]).start()
        self._procs.append(a)
        return a


class Fleet(CtlCase):
    def test_agents_configs_assign(self):
        ag = self.start_agent()
        uid = ag.uid()
        # settled: connected on its own credential (an enrolling agent reconnects once to
        # take up the credential it was offered) and healthy
        def settled():
            got = self.ctl_json("agents", "--selector", "env=prod")["agents"]
            return got if got and all(a["connected"] and a["healthy"] and
                                      a.get("credential") == "own" for a in got) else None
        listed = wait_until(settled, timeout=20, what="the agent settled in `profleetctl agents`")
        self.assertEqual([a["instance_uid"] for a in listed], [uid])
        # the API's JSON, as it came (but last_seen, which each message from the agent moves)
        def steady(agents):
            return [{k: v for k, v in a.items() if k != "last_seen"} for a in agents]
        self.assertEqual(steady(listed), steady(self.c.agents("env=prod")))
        self.assertEqual(self.ctl_json("agents", "--selector", "env=dev")["agents"], [])
        rc, out, err = self.ctl("agents")
        self.assertEqual(rc, 0, err)
        head, row = out.splitlines()[:2]
        self.assertEqual(head.split(), ["INSTANCE_UID", "STATE", "HEALTHY", "HOST", "CONFIG",
                                        "STATUS", "LAST_SEEN"])
        self.assertTrue(row.startswith(uid + "  connected  "), row)
        rc, out, err = self.ctl("agents", "--selector", "env=~(")
        self.assertEqual(rc, 1)
        self.assertIn("(HTTP 400 invalid_selector)", err)

        # config validate is local: no server at all
        ok, bad = self.write("ok.yaml", VALID), self.write("bad.yaml", INVALID)
        dead = "http://127.0.0.1:%d" % free_port()
        rc, out, err = self.ctl("config", "validate", ok, server=False, token=False,
                                env={"PROFLEET_SERVER": dead})
        self.assertEqual((rc, out), (0, ok + ": valid\n"), err)
        rc, out, err = self.ctl("config", "validate", bad, server=False, token=False)
        self.assertEqual(rc, 2)
        self.assertEqual(err, "profleetctl: %s: profiling.sampling.frequency_hz: must be "
                              "1..1000, got 5000\n" % bad)
        rc, out, _ = self.ctl("config", "validate", bad, "--output", "json", server=False,
                              token=False)
        self.assertEqual(rc, 2)
        self.assertEqual(json.loads(out)["path"], "profiling.sampling.frequency_hz")

        # config set / get / versions
        r1 = self.ctl_json("config", "set", "fast", ok)
        self.assertEqual((r1["name"], r1["version"], r1["created"]), ("fast", 1, True))
        r1b = self.ctl_json("config", "set", "fast", ok)
        self.assertEqual((r1b["version"], r1b["created"]), (1, False))
        r2 = self.ctl_json("config", "set", "fast", "-", stdin=VALID.replace("49", "19").encode())
        self.assertEqual(r2["version"], 2)
        rc, out, err = self.ctl("config", "set", "fast", bad)
        self.assertEqual(rc, 1)
        self.assertEqual(err, "profleetctl: profiling.sampling.frequency_hz: must be 1..1000, "
                              "got 5000 (HTTP 400 invalid_config)\n")
        got = self.ctl_json("config", "get", "fast")
        self.assertEqual((got["version"], got["body"]), (2, VALID.replace("49", "19")))
        self.assertEqual(self.ctl_json("config", "get", "fast", "--version", "1")["body"], VALID)
        rc, out, err = self.ctl("config", "get", "fast", "--version", "1")
        self.assertEqual((rc, out), (0, VALID))  # the YAML itself, ready to edit
        vers = self.ctl_json("config", "versions", "fast")
        self.assertEqual([v["version"] for v in vers["versions"]], [2, 1])
        self.assertEqual(vers["versions"][0]["hash"], r2["hash"])
        rc, out, err = self.ctl("config", "get", "nope")
        self.assertEqual(rc, 1)
        self.assertIn("(HTTP 404 not_found)", err)

        # assign: the agent ends up with the config, as the API reports it
        a = self.ctl_json("assign", "prod", "--selector", "env=prod", "--config", "fast",
                          "--priority", "5")
        self.assertEqual((a["selector"], a["config"], a["priority"]), ("env=prod", "fast", 5))
        st, body, _ = self.c.request("GET", "/api/v1/assignments/prod")
        self.assertEqual((st, body["config"]), (200, "fast"))

        def applied():
            ag = self.ctl_json("agents")["agents"][0]
            cfg = ag["config"]
            return cfg["name"] == "fast" and cfg["version"] == 2 and cfg["status"] == "APPLIED"
        wait_until(applied, timeout=20, what="the agent applying config fast v2")
        rc, out, err = self.ctl("assign", "x", "--selector", "env=prod", "--config", "nope")
        self.assertEqual(rc, 1)
        self.assertIn("no config named 'nope'", err)
        rc, out, err = self.ctl("assign", "x", "--selector", "env=prod", "--config", "fast",
                                "--priority", "1000001")
        self.assertEqual(rc, 2)
        self.assertIn("--priority: must be -1000000..1000000", err)


@unittest.skipUnless(have_protoc(), "protoc or the reference schemas are missing")
class Profiles(CtlCase):
    def post(self, service, start_ns, hot=90, cold=10):
        import test_profstore
        st, body, _ = self.c.request("POST", "/v1development/profiles",
                                     test_profstore.encode(service=service, start=start_ns,
                                                           hot=hot, cold=cold),
                                     token=self.c.agent_token,
                                     headers={"Content-Type": "application/x-protobuf"},
                                     raw=True)
        self.assertEqual(st, 200, body)

    def test_rollouts(self):
        ag = self.start_agent()
        uid = ag.uid()
        ok = self.write("ok.yaml", VALID)
        self.ctl_json("config", "set", "default", ok)
        wait_until(lambda: self.c.request("GET", "/api/v1/agents/" + uid)[1]["config"]["status"]
                   == "APPLIED", timeout=20, what="the agent on version 1")
        st, body, _ = self.c.request("PUT", "/api/v1/configs/default?stage=1",
                                     VALID.replace("49", "19"))
        self.assertIn(st, (200, 201), body)
        rc, out, err = self.ctl("rollout", "start", "--config", "default", "--initial", "1",
                                "--pause", "1s", "--rollback")
        self.assertEqual(rc, 0, err)
        rid = out.split()[1]
        done = wait_until(lambda: (lambda r: r if r["state"] == "completed" else None)(
            self.ctl_json("rollouts", rid)), timeout=30, what="the rollout completed")
        self.assertEqual((done["config"], done["version"]), ("default", 2))
        self.assertEqual(done["batches"][0]["applied"], 1)
        rc, out, err = self.ctl("rollouts", rid)
        self.assertEqual(rc, 0, err)
        self.assertIn("rollout %s: default v2, completed" % rid, out)
        self.assertEqual(out.splitlines()[1].split()[:3], ["BATCH", "STATE", "AGENTS"])
        listed = self.ctl_json("rollouts")["rollouts"]
        self.assertEqual([r["id"] for r in listed], [rid])
        self.assertEqual(self.ctl_json("rollouts", "--active")["rollouts"], [])
        # an action the state does not allow: the server's 409, exit 1
        rc, out, err = self.ctl("rollout", "pause", rid)
        self.assertEqual(rc, 1)
        self.assertIn("HTTP 409", err)
        rc, out, err = self.ctl("rollout", "start")
        self.assertEqual(rc, 2)
        self.assertIn("--config is required", err)

    def test_profiles_top_pprof(self):
        now_ns = time.time_ns()
        self.post("checkout", now_ns - 20 * 10**9)
        self.post("checkout", now_ns - 10 * 10**9, hot=30, cold=70)
        self.post("billing", now_ns - 5 * 10**9)
        self.post("checkout", now_ns - 3 * 3600 * 10**9)  # outside --since 1h

        lst = self.ctl_json("profiles", "--service", "checkout", "--since", "1h")
        self.assertEqual(lst["count"], 2)
        self.assertEqual({p["service"] for p in lst["profiles"]}, {"checkout"})
        api = self.c.request("GET", "/api/v1/profiles?service=checkout")[1]
        self.assertEqual(api["count"], 3)
        self.assertEqual(self.ctl_json("profiles", "--since", "1h")["count"], 3)
        self.assertEqual(self.ctl_json("profiles", "--trace-id", TRACE)["count"], 4)
        self.assertEqual(self.ctl_json("profiles", "--trace-id", "42" * 16)["count"], 0)
        self.assertEqual(self.ctl_json("profiles", "--agent", "agent-1")["count"], 4)
        self.assertEqual(self.ctl_json("profiles", "--agent", "agent-2")["count"], 0)
        lim = self.ctl_json("profiles", "--limit", "1")
        self.assertEqual((lim["count"], lim["more"]), (1, True))
        rc, out, err = self.ctl("profiles", "--since", "1h")
        self.assertEqual(rc, 0, err)
        lines = out.splitlines()
        self.assertEqual(lines[0].split()[:4], ["ID", "START", "DURATION", "SERVICE"])
        self.assertEqual(len(lines), 4)
        self.assertIn("billing", lines[1])  # newest first
        rc, out, err = self.ctl("profiles", "--trace-id", "xyz")
        self.assertEqual(rc, 2)
        self.assertIn("--trace-id: expected a trace id of 32 hex digits", err)
        rc, out, err = self.ctl("profiles", "--since", "soon")
        self.assertEqual(rc, 2)
        self.assertIn("--since: expected a duration such as 30s", err)

        top = self.ctl_json("top", "--service", "checkout", "--since", "1h")
        self.assertEqual(top["profiles_merged"], 2)
        self.assertEqual([(f["name"], f["self"]) for f in top["functions"][:2]],
                         [("hot_function", 120), ("cold_function", 80)])
        self.assertEqual(top["total"], 200)
        rc, out, err = self.ctl("top", "--service", "checkout", "--since", "1h", "--limit", "2")
        self.assertEqual(rc, 0, err)
        rows = [l.split() for l in out.splitlines()]
        self.assertEqual(rows[0], ["SELF%", "SELF", "TOTAL%", "TOTAL", "FUNCTION"])
        self.assertEqual(rows[1], ["60.0", "120", "60.0", "120", "hot_function"])
        self.assertEqual(len(rows), 4)  # header, 2 functions, the summary line
        self.assertIn("200 samples in 2 of 2 matching profiles", out)
        # --type selects the profile type: these are CPU profiles, no off-CPU one is stored
        self.assertEqual(self.ctl_json("profiles", "--type", "cpu")["count"], 4)
        self.assertEqual(self.ctl_json("profiles", "--type", "off_cpu")["count"], 0)
        off = self.ctl_json("top", "--service", "checkout", "--since", "1h", "--type", "off_cpu")
        self.assertEqual((off["total"], off["profiles_matched"]), (0, 0))

        pid = lst["profiles"][0]["id"]
        out_file = os.path.join(self.workdir, "p.pb.gz")
        res = self.ctl_json("pprof", str(pid), "-o", out_file)
        self.assertEqual((res["id"], res["file"]), (pid, out_file))
        with open(out_file, "rb") as f:
            data = f.read()
        st, api_bytes, _ = self.c.request("GET", "/api/v1/profiles/%d/pprof" % pid, raw=True)
        self.assertEqual(data, api_bytes)
        self.assertEqual(res["bytes"], len(data))
        self.assertGreater(len(gzip.decompress(data)), 0)
        r = subprocess.run([CTL_BIN, "--server", self.c.base, "--token-file",
                            os.path.join(self.c.data_dir, "admin.token"), "pprof", str(pid),
                            "-o", "-"], env=self.env, capture_output=True, timeout=60)
        self.assertEqual((r.returncode, r.stdout), (0, api_bytes), r.stderr)
        self.assertIn(b"written to stdout", r.stderr)
        rc, out, err = self.ctl("pprof", "999999", "-o", out_file + ".x")
        self.assertEqual(rc, 1)
        self.assertIn("(HTTP 404 not_found)", err)
        self.assertFalse(os.path.exists(out_file + ".x"))
        self.assertEqual([n for n in os.listdir(self.workdir) if ".tmp." in n], [])


class Access(CtlCase):
    def test_server_and_token_sources(self):
        tok = self.c.admin_token
        # no token: the API's 401, printed as the API says it
        rc, out, err = self.ctl("agents", token=False)
        self.assertEqual(rc, 1)
        self.assertEqual(err, "profleetctl: missing 'Authorization: Bearer <token>' "
                              "(HTTP 401 unauthenticated)\n")
        # environment
        rc, out, err = self.ctl("agents", "--output", "json", server=False, token=False,
                                env={"PROFLEET_SERVER": self.c.base, "PROFLEET_TOKEN": tok})
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["agents"], [])
        # flags over the environment
        rc, out, err = self.ctl("agents", "--token", tok, server=True, token=False,
                                env={"PROFLEET_SERVER": "http://127.0.0.1:1",
                                     "PROFLEET_TOKEN": "wrong"})
        self.assertEqual(rc, 0, err)
        # a config file at the default place; mode 0600 required with a token
        cfgdir = os.path.join(self.workdir, ".config", "profleet")
        os.makedirs(cfgdir)
        cfg = os.path.join(cfgdir, "ctl.yaml")
        with open(cfg, "w") as f:
            f.write("server: %s\ntoken: %s\n" % (self.c.base, tok))
        os.chmod(cfg, 0o644)
        rc, out, err = self.ctl("agents", server=False, token=False)
        self.assertEqual(rc, 2)
        self.assertEqual(err, "profleetctl: %s holds a token but its mode is 0644 (readable "
                              "by others); run: chmod 600 %s\n" % (cfg, cfg))
        os.chmod(cfg, 0o600)
        rc, out, err = self.ctl("agents", "--output", "json", server=False, token=False)
        self.assertEqual(rc, 0, err)
        # the environment over the file: a wrong env token is used and refused
        rc, out, err = self.ctl("agents", server=False, token=False,
                                env={"PROFLEET_TOKEN": "wrong"})
        self.assertEqual(rc, 1)
        self.assertIn("(HTTP 401 unauthenticated)", err)
        # --config FILE
        other = self.write("other.yaml", "server: %s\ntoken: %s\n" % (self.c.base, tok))
        rc, out, err = self.ctl("agents", "--config", other, server=False, token=False,
                                env={"HOME": "/nonexistent"})
        self.assertEqual(rc, 0, err)
        rc, out, err = self.ctl("agents", "--config", other + ".missing", server=False,
                                token=False)
        self.assertEqual(rc, 2)
        self.assertIn("other.yaml.missing: No such file or directory", err)

    def test_connection_errors_and_usage(self):
        port = free_port()
        rc, out, err = self.ctl("agents", "--server", "http://127.0.0.1:%d" % port,
                                server=False)
        self.assertEqual(rc, 1)
        self.assertIn("cannot connect to http://127.0.0.1:%d/api/v1/agents: " % port, err)
        rc, out, err = self.ctl("agents", "--server", "https://127.0.0.1:%d" % self.c.port,
                                server=False)
        self.assertEqual(rc, 1)
        self.assertIn("https://127.0.0.1:%d/api/v1/agents" % self.c.port, err)
        rc, out, err = self.ctl("frobnicate")
        self.assertEqual(rc, 2)
        self.assertIn('unknown command "frobnicate"', err)
        rc, out, err = self.ctl("agents", "--output", "yaml")
        self.assertEqual(rc, 2)
        self.assertIn("--output: expected table or json", err)
        rc, out, err = self.ctl("capture", "--help", server=False, token=False)
        self.assertEqual(rc, 0)
        self.assertIn("Usage: profleetctl capture --agents S", out)
        self.assertIn("3 partial, 4 failed, 5 cancelled", out)

    def test_bash_completion(self):
        rc, script, err = self.ctl("completion", "bash", server=False, token=False)
        self.assertEqual(rc, 0, err)
        path = self.write("completion.bash", script)

        def complete(*words):
            prog = ('source %s; COMP_WORDS=(%s); COMP_CWORD=%d; _profleetctl; '
                    'printf "%%s\\n" "${COMPREPLY[@]}"' %
                    (path, " ".join("'%s'" % w for w in words), len(words) - 1))
            r = subprocess.run(["bash", "-c", prog], capture_output=True, timeout=30,
                               cwd=self.workdir)
            self.assertEqual(r.returncode, 0, r.stderr)
            return sorted(x for x in r.stdout.decode().split("\n") if x)

        self.assertEqual(complete("profleetctl", "cap"), ["capture", "captures"])
        self.assertEqual(complete("profleetctl", "config", ""),
                         ["get", "set", "validate", "versions"])
        self.assertEqual(complete("profleetctl", "--server", "http://x", "config", "ver"),
                         ["versions"])
        self.assertIn("--duration", complete("profleetctl", "capture", "--d"))
        self.assertEqual(complete("profleetctl", "agents", "--output", ""), ["json", "table"])
        self.assertEqual(complete("profleetctl", "top", "--se"), ["--server", "--service"])


@unittest.skipUnless(shutil.which("openssl"), "no openssl command")
class TLS(CtlCase):
    """The controller on https:// with a certificate of a test CA made here."""

    def start_controller(self):
        from test_export_tls import make_ca, make_server_cert
        make_ca(self.workdir, "ca")
        cert, key = make_server_cert(self.workdir, "server", "ca", "IP:127.0.0.1")
        self.ca = os.path.join(self.workdir, "ca.pem")
        return self.controller(extra=["--tls-cert", cert, "--tls-key", key], tls_ca=self.ca)

    def test_ca_file_and_insecure(self):
        self.assertTrue(self.c.base.startswith("https://"))
        url = self.c.base + "/api/v1/agents"
        rc, out, err = self.ctl("agents", "--output", "json", "--ca-file", self.ca)
        self.assertEqual(rc, 0, err)
        self.assertEqual(json.loads(out)["agents"], [])
        # the system's CAs do not know the test CA
        rc, out, err = self.ctl("agents")
        self.assertEqual(rc, 1)
        self.assertIn("profleetctl: TLS with %s failed: " % url, err)
        rc, out, err = self.ctl("agents", "--insecure-skip-verify")
        self.assertEqual(rc, 0, err)
        # ca_file and insecure_skip_verify from the config file
        cfg = self.write("ctl.yaml", "server: %s\nca_file: %s\n" % (self.c.base, self.ca),
                         0o644)
        rc, out, err = self.ctl("agents", "--config", cfg, server=False)
        self.assertEqual(rc, 0, err)
        cfg = self.write("ctl2.yaml", "server: %s\ninsecure_skip_verify: true\n" % self.c.base)
        rc, out, err = self.ctl("agents", "--config", cfg, server=False)
        self.assertEqual(rc, 0, err)
        # plain http to the TLS listener: no HTTP answer, the URL is named
        rc, out, err = self.ctl("agents", "--server", self.c.base.replace("https", "http"),
                                server=False)
        self.assertEqual(rc, 1)
        self.assertIn(self.c.base.replace("https", "http") + "/api/v1/agents", err)


class Captures(CtlCase):
    """Captures against the real controller, the agents being capture-fake-agent (real OpAMP
    over a WebSocket, scripted here: test_captures_api.FakeAgent), so every final state can
    be reached on purpose."""

    def start_controller(self):
        return self.controller(extra=["--capture-grace-seconds", "3"])

    def setUp(self):
        super().setUp()
        from test_captures_api import FAKE_BIN
        if not FAKE_BIN or not os.access(FAKE_BIN, os.X_OK):
            self.fail("PF_FAKE_AGENT_BIN is not set to an executable (run through ctest)")

    def fake(self, uid, capture=True, labels=("env=prod",)):
        from test_captures_api import FakeAgent
        a = FakeAgent(self.c, uid=uid, capture=capture, labels=labels)
        self._procs.append(a)
        wait_until(lambda: self.c.request("GET", "/api/v1/agents/" + uid)[0] == 200 and
                   self.c.request("GET", "/api/v1/agents/" + uid)[1]["connected"],
                   timeout=10, what="fake agent %s connected" % uid)
        return a

    def start_wait(self, *args):
        argv = [CTL_BIN, "--server", self.c.base, "--token-file",
                os.path.join(self.c.data_dir, "admin.token"), "capture", "--wait",
                "--wait-timeout", "60s"] + list(args)
        return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                env=self.env)

    def store_profile(self, uid, cid, pid_text):
        import test_profstore
        if not test_profstore.have_protoc():
            self.skipTest("protoc and the reference protos are needed to make OTLP bodies")
        text = test_profstore.TEXT % {"service": "checkout", "start": time.time_ns() - 10**9,
                                      "hot": 90, "cold": 10}
        text = text.replace('profile_id: "0123456789abcdef"', 'profile_id: "%s"' % pid_text)
        text = text.replace(
            '    attributes { key: "profleet.agent.uid" value { string_value: "agent-1" } }',
            '    attributes { key: "profleet.agent.uid" value { string_value: "%s" } }\n'
            '    attributes { key: "profleet.capture.id" value { string_value: "%s" } }\n'
            '    attributes { key: "profleet.trigger" value { string_value: "on_demand" } }'
            % (uid, cid))
        st, _, _ = self.c.request("POST", "/v1development/profiles",
                                  test_profstore.encode_text(text), token=self.c.agent_token,
                                  headers=test_profstore.PROTOBUF)
        self.assertEqual(st, 200)

    def test_local_checks(self):
        for args, msg in (
                (["--duration", "0s"], "--duration: must be 1s..3660d"),
                (["--duration", "2h"], "--duration: at most 3600s"),
                (["--duration", "5s", "--process", "user=root"], "--process[0].key"),
                (["--duration", "5s", "--process", "service.name=~a++"], "--process[0].value"),
                (["--duration", "5s", "--frequency", "5000"], "--frequency: must be 1..1000")):
            rc, out, err = self.ctl("capture", "--agents", "env=prod", *args)
            self.assertEqual(rc, 2, args)
            self.assertIn(msg, err)
        # the server's own refusals, as it words them
        rc, out, err = self.ctl("capture", "--agents", "env=nowhere", "--duration", "2s")
        self.assertEqual(rc, 1)
        self.assertIn("(HTTP 422 no_agents)", err)
        rc, out, err = self.ctl("capture", "--agents", "env in (", "--duration", "2s")
        self.assertEqual(rc, 1)
        self.assertIn("(HTTP 400 invalid_selector)", err)
        rc, out, err = self.ctl("captures", "0190a000-dead-7000-8000-000000000000")
        self.assertEqual(rc, 1)
        self.assertIn("(HTTP 404 not_found)", err)

    def test_wait_partial_then_done(self):
        uid_a = "0190a000-0000-7000-8000-0000000000a1"
        uid_b = "0190a000-0000-7000-8000-0000000000b2"
        a = self.fake(uid_a, labels=("env=prod", "role=a"))
        self.fake(uid_b, capture=False)
        # partial: A delivers, B lacks the capability
        p = self.start_wait("--agents", "env=prod", "--process", "service.name=checkout",
                            "--duration", "2s", "--frequency", "199", "--note", "incident 42",
                            "--output", "json")
        req = a.next_custom("capture.request")
        cid = req["id"]
        self.assertEqual((req["duration_seconds"], req["frequency_hz"], req["note"]),
                         (2, 199, "incident 42"))
        self.assertEqual(req["processes"],
                         [{"key": "service.name", "match": "strict", "value": "checkout"}])
        a.status(id=cid, state="accepted")
        a.status(id=cid, state="running", samples=10)
        self.store_profile(uid_a, cid, "ctl-capture-0001")
        a.status(id=cid, state="done", samples=100, bytes=2048,
                 profile_ids=[b"ctl-capture-0001".hex()])
        out, err = p.communicate(timeout=60)
        err = err.decode()
        self.assertEqual(p.returncode, 3, err)  # partial
        final = json.loads(out)
        self.assertEqual(final, self.ctl_json("captures", cid))  # the API's object
        self.assertEqual(final["state"], "partial")
        agents = {x["instance_uid"]: x for x in final["agents"]}
        self.assertEqual((agents[uid_a]["state"], agents[uid_b]["state"]),
                         ("done", "unsupported"))
        self.assertIn("capture %s: partial\n" % cid, err)
        self.assertIn("capture %s: agent %s unsupported, 0 samples, 0 profiles" % (cid, uid_b),
                      err)
        self.assertIn("capture %s: agent %s done, 100 samples, 1 profiles" % (cid, uid_a), err)
        prof_id = agents[uid_a]["profile_ids"][0]

        # the capture's profiles, top and the human view
        lst = self.ctl_json("profiles", "--capture", cid)
        self.assertEqual([x["id"] for x in lst["profiles"]], [prof_id])
        self.assertEqual(self.ctl_json("profiles", "--trigger", "on_demand")["count"], 1)
        top = self.ctl_json("top", "--capture", cid)
        self.assertEqual((top["functions"][0]["name"], top["functions"][0]["self"]),
                         ("hot_function", 90))
        rc, out, err = self.ctl("captures", cid)
        self.assertEqual(rc, 0, err)
        self.assertIn("capture %s: partial\n" % cid, out)
        self.assertIn("profiles (1): %d\n" % prof_id, out)
        self.assertIn("flame graph: %s/ui/#/captures/%s\n" % (self.c.base, cid), out)
        # the console's capture page draws this tree
        st, fg, _ = self.c.request("GET", "/api/v1/flamegraph?capture_id=" + cid)
        self.assertEqual((st, fg["value"]), (200, 100))
        rc, out, err = self.ctl("captures")
        self.assertEqual(rc, 0, err)
        self.assertIn(cid, out)
        self.assertEqual(self.ctl_json("captures", "--state", "partial")["captures"][0]["id"],
                         cid)

        # done: only A; the table output ends with the profile ids and the URL
        p = self.start_wait("--agents", "role=a", "--duration", "1s")
        cid2 = a.next_custom("capture.request")["id"]
        self.store_profile(uid_a, cid2, "ctl-capture-0002")
        a.status(id=cid2, state="done", samples=100, profile_ids=[b"ctl-capture-0002".hex()])
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 0, err)
        out = out.decode()
        self.assertTrue(out.startswith("capture %s: done\n" % cid2), out)
        self.assertTrue(out.endswith("flame graph: %s/ui/#/captures/%s\n"
                                     % (self.c.base, cid2)), out)

    def test_sigint_cancels(self):
        # a real SIGINT to a waiting `capture --wait`: DELETE, exit 130, the agent is told
        import signal
        uid = "0190a000-0000-7000-8000-0000000000d4"
        a = self.fake(uid)
        p = self.start_wait("--agents", "env=prod", "--duration", "60s")
        cid = a.next_custom("capture.request")["id"]
        a.status(id=cid, state="running", samples=5)
        wait_until(lambda: self.c.request("GET", "/api/v1/captures/" + cid)[1]["state"] ==
                   "running", timeout=10, what="capture running")
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=20)
        self.assertEqual(p.returncode, 130, err)
        self.assertLess(time.monotonic() - t0, 2.0)
        self.assertIn(b"profleetctl: interrupted: capture %s cancelled" % cid.encode(), err)
        self.assertEqual(a.next_custom("capture.cancel"), {"id": cid})
        self.assertEqual(self.ctl_json("captures", cid)["state"], "cancelled")

    def test_wait_failed_and_cancelled(self):
        uid = "0190a000-0000-7000-8000-0000000000c3"
        a = self.fake(uid)
        p = self.start_wait("--agents", "env=prod", "--duration", "2s")
        cid = a.next_custom("capture.request")["id"]
        a.status(id=cid, state="failed", error_code="process_not_found",
                 error="no process matches service.name=checkout")
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 4, err)  # failed
        self.assertIn(b"no process matches service.name=checkout", out)
        # cancelled by someone else while we wait
        p = self.start_wait("--agents", "env=prod", "--duration", "30s")
        cid = a.next_custom("capture.request")["id"]
        a.status(id=cid, state="running", samples=1)
        st, body, _ = self.c.request("DELETE", "/api/v1/captures/" + cid)
        self.assertEqual(st, 200, body)
        out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 5, err)  # cancelled
        self.assertIn(b"capture %s: cancelled" % cid.encode(), out)


if __name__ == "__main__":
    unittest.main()
