"""Triggers and limits of the agent, end to end: the real controller and agent, real eBPF
sampling of a known workload: the `high_cpu` trigger and the limits.

- high_cpu: a busy workload fires the trigger (mode triggered, so only its captures are
  exported); the profile is the workload's, tagged profleet.trigger=high_cpu with the measured
  CPU; a second burst of the same process within the cooldown is held back (counted, no second
  profile).
- overhead guard: with limits.max_cpu_percent 0.01 and 999 Hz the guard halves the sampling
  frequency, visible in the `guard` health component, the metrics, the effective config and the
  windows themselves; a pushed config with a larger budget restores 999 Hz.
- max_profiles_per_minute: windows, pprof scrapes and high_cpu captures together stay within
  the limit; the refused ones are counted per source.

Needs root (CAP_BPF + CAP_PERFMON) and kernel BTF. Run directly (python3 test_triggers.py) it
exits 77 when every test was skipped because the kernel refused BPF or perf events. Every wait
is bounded.
"""
import os
import signal
import sys
import unittest
import urllib.error

from pfharness import free_port, wait_until
from test_agent_metrics import HEAP_PPROF, PprofServer, http_get, parse_exposition
from test_dataplane import Dataplane


def config(wl_name, out_dir, mode="continuous", frequency=99, duration=2, high_cpu=None,
           limits=None, targets=None):
    lines = ["profiling:", "  mode: %s" % mode,
             "  sampling: {frequency_hz: %d, duration_seconds: %d}" % (frequency, duration),
             "  filters:", "    include:",
             "      - {key: process.executable.name, match: strict, value: \"%s\"}" % wl_name]
    if high_cpu:
        lines += ["  triggers:", "    high_cpu: {enabled: true, %s}" % high_cpu]
    if targets:
        lines += ["  pprof:", "    targets:"] + ["      - " + t for t in targets]
    lines += ["  exporters:", "    - {type: file, path: \"%s\"}" % out_dir]
    if limits:
        lines += ["  limits: {%s}" % limits]
    return "\n".join(lines) + "\n"


def metric(samples, name, **labels):
    """The value of profleet_agent_<name>{labels}, None when absent."""
    key = ("profleet_agent_" + name, frozenset(labels.items()))
    return samples.get(key)


class Triggers(Dataplane):

    def start_agent(self, ctl, name):
        self.metrics_port = free_port()
        ag = self.agent(ctl, name, extra=["--metrics-listen",
                                          "127.0.0.1:%d" % self.metrics_port])
        uid = ag.uid()
        self.wait_sampler(ag)
        self.wait_agent(ctl, uid, lambda a: a["connected"], what="agent connected")
        return ag, uid

    def scrape(self):
        try:
            st, _, body = http_get("http://127.0.0.1:%d/metrics" % self.metrics_port)
        except (urllib.error.URLError, ConnectionError, OSError):
            return None
        self.assertEqual(st, 200, body)
        return parse_exposition(body)[1]

    def wait_metrics(self, pred, timeout=30, what="metrics"):
        def check():
            s = self.scrape()
            return s if s is not None and pred(s) else None
        return wait_until(check, timeout=timeout, interval=0.25, what=what)

    def status(self, a, comp):
        return self.components(a).get(comp, {}).get("status", "")

    def profile_files(self):
        return [os.path.join(self.out_dir, f) for f in self.files()]

    # ---- high_cpu ---------------------------------------------------------------------------

    def test_high_cpu_fires_and_respects_cooldown(self):
        ctl = self.controller()
        ag, uid = self.start_agent(ctl, "hc")
        # mode triggered: nothing is exported but the trigger's captures. The threshold is low
        # because the CPUs are shared with whatever else runs; the workload alone is ~100 %.
        self.push(ctl, uid, config(
            self.wl_name, self.out_dir, mode="triggered",
            high_cpu="threshold_percent: 10, sustain_seconds: 2, duration_seconds: 3, "
                     "frequency_hz: 199, cooldown_seconds: 300"))
        wl = self.start_workload(seconds=120)
        seen = set()
        path, s = self.wait_file(
            lambda s: any(p["attributes"].get("profleet.trigger") == "high_cpu"
                          for p in s["processes"]), seen, timeout=30,
            what="a high_cpu profile")
        p = self.workload_proc(s)
        attrs = p["attributes"]
        self.assertEqual(attrs["process.pid"], str(wl.pid))
        self.assertEqual(attrs["profleet.trigger"], "high_cpu")
        cpu = float(attrs["profleet.trigger.cpu_percent"])
        self.assertTrue(10 <= cpu <= 101, "measured cpu %r" % cpu)
        self.assertEqual(s["frequency_hz"], 199)
        self.assertGreater(p["samples"], 0)
        self.assertIn("hot_a", p["leaf"])
        span = (s["end_unix_ns"] - s["start_unix_ns"]) / 1e9
        self.assertTrue(2.0 <= span <= 4.5, "capture of %.2f s" % span)
        self.wait_metrics(lambda m: metric(m, "high_cpu_fired_total", rule="process") == 1,
                          what="one firing in the metrics")

        # Second burst of the same process within the cooldown: idle (the trigger reads it
        # under the threshold), then busy again until it has been over the threshold for
        # sustain_seconds, which the cooldown holds back.
        wl.send_signal(signal.SIGSTOP)
        m = self.wait_metrics(lambda m: metric(m, "high_cpu_over_threshold_processes") == 0,
                              what="the stopped workload read as idle")
        held0 = metric(m, "high_cpu_held_total", rule="process")
        wl.send_signal(signal.SIGCONT)
        self.wait_metrics(lambda m: metric(m, "high_cpu_over_threshold_processes") == 1,
                          what="the second burst read as busy")
        m = self.wait_metrics(lambda m: metric(m, "high_cpu_held_total", rule="process") >
                              held0, timeout=30, what="the second burst held by the cooldown")
        self.assertEqual(metric(m, "high_cpu_fired_total", rule="process"), 1)
        # everything exported so far (the capture's window is written before it is counted)
        files = self.profile_files()
        trig = [f for f in files
                if any(p["attributes"].get("profleet.trigger") == "high_cpu"
                       for p in self.summary(f)["processes"])]
        self.assertEqual(len(trig), 1, files)
        a = self.agent_json(ctl, uid)
        self.assertIn("held by cooldown", self.status(a, "trigger/high_cpu"))
        # only the processes the filters profile are watched: the workload alone
        self.assertTrue(self.status(a, "trigger/high_cpu").startswith("watching 1 processes"))
        print("trigger/high_cpu: " + self.status(a, "trigger/high_cpu"))

    # ---- overhead guard ---------------------------------------------------------------------

    def test_guard_lowers_then_restores_frequency(self):
        ctl = self.controller()
        ag, uid = self.start_agent(ctl, "guard")
        self.start_workload(seconds=120)
        self.push(ctl, uid, config(self.wl_name, self.out_dir, frequency=999, duration=2,
                                   limits="max_cpu_percent: 0.01"))
        # one step per 10 s window: 999 -> 499 first
        a = self.wait_agent(ctl, uid, lambda a: self.status(a, "guard").startswith(
            "throttled: 499 Hz of 999 Hz, cpu "), timeout=40, what="guard throttled")
        print("guard: " + self.status(a, "guard"))
        self.assertIn("> 0.01%", self.status(a, "guard"))
        # throttled is degraded, with the reason
        g = self.wait_agent(ctl, uid, lambda a: not self.components(a).get("guard", {}).get(
            "healthy", True), timeout=20, what="guard unhealthy while throttled")
        self.assertIn("sampling.frequency_hz lowered (throttled: ",
                      self.components(g)["guard"].get("last_error", ""))
        self.assertIn("overhead guard: 999 Hz configured", self.status(a, "sampler"))
        eff = self.wait_agent(ctl, uid, lambda a: "# overhead guard: sampling.frequency_hz in "
                              "effect: 499" in (a["config"].get("effective") or ""),
                              what="effective config note")["config"]["effective"]
        self.assertIn("frequency_hz: 999", eff)  # the document itself is unchanged
        m = self.wait_metrics(lambda m: metric(m, "guard_frequency_hz") in (499, 249),
                              what="guard metrics")
        self.assertEqual(metric(m, "guard_configured_frequency_hz"), 999)
        self.assertEqual(metric(m, "guard_throttled"), 1)
        self.assertGreaterEqual(metric(m, "guard_steps_total", direction="down"), 1)
        # the sampler really runs slower: a window at 499 Hz
        seen = set()
        self.wait_file(lambda s: s["frequency_hz"] in (499, 249), seen, timeout=20,
                       what="a window at the lowered frequency")

        # a larger budget pushed: the guard starts over at the configured frequency
        self.push(ctl, uid, config(self.wl_name, self.out_dir, frequency=999, duration=2,
                                   limits="max_cpu_percent: 100"))
        a = self.wait_agent(ctl, uid, lambda a: self.status(a, "guard").startswith("999 Hz"),
                            timeout=20, what="guard restored")
        self.assertNotIn("throttled", self.status(a, "guard"))
        self.wait_agent(ctl, uid, lambda a: self.components(a).get("guard", {}).get("healthy"),
                        timeout=20, what="guard healthy again")
        self.wait_agent(ctl, uid, lambda a: "# overhead guard" not in
                        (a["config"].get("effective") or "x"), what="note gone")
        m = self.wait_metrics(lambda m: metric(m, "guard_frequency_hz") == 999,
                              what="guard metrics restored")
        self.assertEqual(metric(m, "guard_throttled"), 0)
        self.wait_file(lambda s: s["frequency_hz"] == 999, seen, timeout=20,
                       what="a window at 999 Hz again")

    # ---- max_profiles_per_minute ------------------------------------------------------------

    def test_rate_limit_across_sources(self):
        pprof = PprofServer(HEAP_PPROF)
        self.addCleanup(pprof.close)
        ctl = self.controller()
        ag, uid = self.start_agent(ctl, "rate")
        self.start_workload(seconds=120)
        target = ("{url: \"http://127.0.0.1:%d/debug/pprof/heap\", type: heap, "
                  "interval_seconds: 1}" % pprof.port)
        limit = 4
        self.push(ctl, uid, config(
            self.wl_name, self.out_dir, frequency=99, duration=1, targets=[target],
            high_cpu="threshold_percent: 10, sustain_seconds: 1, duration_seconds: 1, "
                     "cooldown_seconds: 0",
            limits="max_profiles_per_minute: %d" % limit))
        # 1 s windows, a scrape a second and a capture every ~2 s are offered: well over 4 a
        # minute. Wait until every source was refused at least once.

        def refused(m, src):
            return metric(m, "profiles_rate_limited_total", source=src) or 0
        m = self.wait_metrics(lambda m: refused(m, "window") > 0 and refused(m, "pprof") > 0
                              and refused(m, "high_cpu") > 0, timeout=40,
                              what="every source limited")
        self.assertEqual(metric(m, "profiles_rate_limit"), limit)
        self.assertLessEqual(metric(m, "profiles_rate_used"), limit)
        files = self.profile_files()
        # all of them fall in the first minute of the config
        self.assertLessEqual(len(files), limit, files)
        self.assertGreaterEqual(len(files), 1)
        a = self.agent_json(ctl, uid)
        self.assertIn("of %d in the last minute" % limit, self.status(a, "guard"))
        print("rate limit: %d files; refused window %d, pprof %d, high_cpu %d" % (
            len(files), refused(m, "window"), refused(m, "pprof"), refused(m, "high_cpu")))


def load_tests(loader, tests, pattern):
    """Only this file's tests, not those of the imported Dataplane case."""
    names = sorted(n for n in vars(Triggers) if n.startswith("test_"))
    return unittest.TestSuite(Triggers(n) for n in names)


if __name__ == "__main__":
    result = unittest.main(verbosity=2, exit=False).result
    if not result.wasSuccessful():
        sys.exit(1)
    sys.exit(77 if result.testsRun and len(result.skipped) == result.testsRun else 0)
