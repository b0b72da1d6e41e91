"""Start-up of the real controller as the Helm chart runs it.

--default-config FILE: stored as config `default` on a fresh start (and an agent gets it), never
over an existing `default`; a bad file stops the start, naming the key path.
--admin-token-file/--agent-token-file: tokens from mounted Secrets work for the API and OpAMP,
survive restarts, and no token files are generated in the data dir.
"""
import json
import os
import unittest
import urllib.error
import urllib.request

from pfharness import CONTROLLER_BIN, Agent, IntegrationCase, Proc, free_port, wait_until

CONFIG_A = "profiling:\n  sampling:\n    frequency_hz: 49\n"
CONFIG_B = "profiling:\n  sampling:\n    frequency_hz: 19\n"
CONFIG_API = "profiling:\n  sampling:\n    frequency_hz: 29\n"


class ControllerBootstrap(IntegrationCase):

    def write(self, name, text):
        path = os.path.join(self.workdir, name)
        with open(path, "w") as f:
            f.write(text)
        return path

    def default_config(self, ctl):
        st, body, _ = ctl.request("GET", "/api/v1/configs/default")
        self.assertEqual(st, 200, body)
        return body

    def test_fresh_store_gets_file_and_agent_applies_it(self):
        path = self.write("default.yaml", CONFIG_A)
        ctl = self.controller(extra=["--default-config", path])
        cfg = self.default_config(ctl)
        self.assertEqual((cfg["version"], cfg["body"]), (1, CONFIG_A))
        ag = self.agent(ctl, "a1")
        uid = ag.uid()

        def applied():
            a = self.agent_json(ctl, uid)
            return a if a and a["config"]["status"] == "APPLIED" else None
        a = wait_until(applied, timeout=10, what="default config APPLIED")
        self.assertEqual(a["config"]["name"], "default")
        self.assertEqual(a["config"]["hash"], cfg["hash"])
        self.assertIn("frequency_hz: 49", a["config"]["effective"])

    def test_existing_default_is_never_overwritten(self):
        path = self.write("default.yaml", CONFIG_A)
        ctl = self.controller(extra=["--default-config", path])
        self.assertEqual(self.default_config(ctl)["version"], 1)
        # A newer version through the API, then restarts with other file contents.
        st, body, _ = ctl.put_config("default", CONFIG_API)
        self.assertEqual(st, 201, body)
        for text in (CONFIG_B, CONFIG_A):
            ctl.stop()
            self.write("default.yaml", text)
            ctl.start()
            cfg = self.default_config(ctl)
            self.assertEqual((cfg["version"], cfg["body"]), (2, CONFIG_API))
        self.assertIn("not applied", ctl.proc.output())

    def test_bad_file_fails_the_start_with_key_path(self):
        cases = {
            "range.yaml": ("profiling:\n  sampling:\n    frequency_hz: 5000\n",
                           "profiling.sampling.frequency_hz: must be 1..1000"),
            "unknown.yaml": ("profiling:\n  samplng: {}\n", "profiling.samplng"),
        }
        for name, (text, expect) in cases.items():
            path = self.write(name, text)
            data = os.path.join(self.workdir, "data-" + name)
            p = Proc([CONTROLLER_BIN, "--listen", "127.0.0.1:0", "--data-dir", data,
                      "--default-config", path], os.path.join(self.workdir, name + ".log"))
            self._procs.append(p)
            wait_until(lambda: not p.alive(), timeout=15, what="controller exit on " + name)
            out = p.output()
            self.assertNotEqual(p.p.returncode, 0, out)
            self.assertIn(expect, out)
            self.assertIn(path, out)
        missing = os.path.join(self.workdir, "missing.yaml")
        p = Proc([CONTROLLER_BIN, "--listen", "127.0.0.1:0", "--data-dir",
                  os.path.join(self.workdir, "data-missing"), "--default-config", missing],
                 os.path.join(self.workdir, "missing.log"))
        self._procs.append(p)
        wait_until(lambda: not p.alive(), timeout=15, what="controller exit on a missing file")
        self.assertNotEqual(p.p.returncode, 0)
        self.assertIn("default_config: cannot read", p.output())


    def test_tokens_from_files(self):
        admin = self.write("admin-token", "AdminTokenFromSecret-0123456789abcdef\n")
        agent_tok = self.write("agent-token", "AgentTokenFromSecret-0123456789abcdef")
        port = free_port()
        data = os.path.join(self.workdir, "data")
        base = "http://127.0.0.1:%d" % port

        def get(path, token):
            req = urllib.request.Request(base + path,
                                         headers={"Authorization": "Bearer " + token})
            try:
                with urllib.request.urlopen(req, timeout=5) as r:
                    return r.status
            except urllib.error.HTTPError as e:
                return e.code
            except (urllib.error.URLError, OSError):
                return 0

        for run in range(2):
            p = Proc([CONTROLLER_BIN, "--listen", "127.0.0.1:%d" % port, "--data-dir", data,
                      "--admin-token-file", admin, "--agent-token-file", agent_tok],
                     os.path.join(self.workdir, "controller-%d.log" % run))
            self._procs.append(p)
            wait_until(lambda: p.alive() and get("/readyz", "x") == 200, timeout=15,
                       what="controller /readyz")
            self.assertEqual(get("/api/v1/agents", "AdminTokenFromSecret-0123456789abcdef"),
                             200)
            # Agent tokens are for OpAMP and uploads only (403 on the API).
            self.assertEqual(get("/api/v1/agents", "AgentTokenFromSecret-0123456789abcdef"),
                             403)
            self.assertEqual(get("/api/v1/agents", "WrongToken-0123456789abcdef"), 401)
            self.assertFalse(os.path.exists(os.path.join(data, "admin.token")))
            self.assertFalse(os.path.exists(os.path.join(data, "agent.token")))
            if run == 0:
                self.assertIn("added the admin token", p.output())
                ag = Agent(self.workdir, "a1", server="ws://127.0.0.1:%d/v1/opamp" % port,
                           token_file=agent_tok).start()
                self._procs.append(ag)
                uid = ag.uid()

                def connected():
                    req = urllib.request.Request(
                        base + "/api/v1/agents/" + uid,
                        headers={"Authorization":
                                 "Bearer AdminTokenFromSecret-0123456789abcdef"})
                    try:
                        with urllib.request.urlopen(req, timeout=5) as r:
                            return json.loads(r.read())["connected"]
                    except (urllib.error.URLError, OSError):
                        return False
                wait_until(connected, timeout=10, what="agent connected with the file token")
            else:
                self.assertNotIn("added the admin token", p.output())
            p.stop()


if __name__ == "__main__":
    unittest.main()
