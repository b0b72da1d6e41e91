"""--default-config FILE: the real controller stores the file as config `default` on a fresh
start (and an agent gets it), never over an existing `default`, and refuses to start on a bad
file, naming the key path."""
import os
import unittest

from pfharness import CONTROLLER_BIN, IntegrationCase, Proc, wait_until

CONFIG_A = "profiling:\n  sampling:\n    frequency_hz: 49\n"
CONFIG_B = "profiling:\n  sampling:\n    frequency_hz: 19\n"
CONFIG_API = "profiling:\n  sampling:\n    frequency_hz: 29\n"


class DefaultConfig(IntegrationCase):

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


if __name__ == "__main__":
    unittest.main()
