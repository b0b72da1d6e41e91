"""Pod attribution end to end in the real agent: eBPF samples of a workload that runs in a
container's cgroup come out as OTLP profiles with the pod's attributes, and a filter on a pod
attribute selects it in the kernel.

The workload (tests/ebpf/workload.c) is moved into a cgroup named the way the kubelet's
cgroupfs driver names a container's (.../kubepods/burstable/pod<uid>/<container id>), with the
uid and id of the recorded pod `checkout` in tests/data/k8s; a fake API server
(test_k8s_pods.FakeAPIServer) lists that pod; the controller pushes a config whose only include
filter is `k8s.pod.name`; the file exporter's windows are read with profcheck.

Needs root (BPF, perf events, a writable cgroup hierarchy). Run directly it exits 77 when every
test was skipped; ctest treats 77 as skipped.
"""
import os
import subprocess
import sys
import time
import unittest

from pfharness import IntegrationCase, wait_until
import test_dataplane as dp  # a module: unittest must not collect its test class here
from test_k8s_pods import CID_APP, UID_CHECKOUT, FakeAPIServer

POD = "checkout-7d9f8b6c5d-x2x7k"


def cgroup_root():
    """A cgroup hierarchy we may create groups in: the v2 mount, else v1 'pids'."""
    for d in ("/sys/fs/cgroup/unified", "/sys/fs/cgroup", "/sys/fs/cgroup/pids"):
        if os.path.exists(os.path.join(d, "cgroup.procs")) and os.access(d, os.W_OK):
            return d
    return None


class K8sDataplane(IntegrationCase):

    wait_sampler = dp.Dataplane.wait_sampler
    summary = dp.Dataplane.summary
    files = dp.Dataplane.files
    wait_file = dp.Dataplane.wait_file
    push = dp.Dataplane.push
    wait_agent = dp.Dataplane.wait_agent

    def setUp(self):
        if os.geteuid() != 0:
            self.skipTest("needs root")
        root = cgroup_root()
        if not root:
            self.skipTest("no writable cgroup hierarchy")
        super().setUp()
        if not dp.PROFCHECK_BIN or not os.access(dp.PROFCHECK_BIN, os.X_OK):
            self.fail("PF_PROFCHECK_BIN is not set to an executable (run through ctest)")
        self.wl_name = "pfk8s-%d-%d" % (os.getpid(), int(time.monotonic() * 1000) % 100000)
        self.wl_bin = os.path.join(self.workdir, self.wl_name)
        subprocess.run(["cc", "-O0", "-fno-omit-frame-pointer", "-g", "-o", self.wl_bin,
                        dp.WORKLOAD_SRC], check=True, timeout=60)
        self.out_dir = os.path.join(self.workdir, "out")
        self.workloads = []
        self.cg_top = os.path.join(root, "pf-k8s-test-%d" % os.getpid())
        self.cg = os.path.join(self.cg_top, "kubepods", "burstable", "pod" + UID_CHECKOUT,
                               CID_APP)
        self.api = FakeAPIServer()

    def tearDown(self):
        for p in self.workloads:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=5)
            p.stdout.close()
        self.workloads = []
        # leaves first; each group is empty once its processes are gone
        d = self.cg
        while d.startswith(self.cg_top) and os.path.isdir(d):
            try:
                os.rmdir(d)
            except OSError:
                break
            d = os.path.dirname(d)
        self.api.stop()
        super().tearDown()

    def start_workload(self, seconds=60):
        p = dp.Dataplane.start_workload(self, seconds)
        os.makedirs(self.cg, exist_ok=True)
        with open(os.path.join(self.cg, "cgroup.procs"), "w") as f:
            f.write(str(p.pid))
        with open("/proc/%d/cgroup" % p.pid) as f:
            self.assertIn(CID_APP, f.read())
        return p

    def test_workload_profiles_carry_pod_attributes(self):
        wl = self.start_workload()
        ctl = self.controller()
        ag = self.agent(ctl, "a1", extra=["--k8s-api", self.api.url, "--k8s-node", "node-1"])
        uid = ag.uid()
        self.wait_sampler(ag)
        self.wait_agent(ctl, uid, lambda a: a["connected"] and "watching" in a.get(
            "health", {}).get("components", {}).get("k8s", {}).get("status", ""),
            timeout=15, what="agent connected, pod cache synced")
        cfg = ("profiling:\n  sampling: {frequency_hz: 199, duration_seconds: 2}\n"
               "  filters:\n    include:\n"
               "      - {key: k8s.pod.name, match: strict, value: \"%s\"}\n"
               "  exporters:\n    - {type: file, path: \"%s\"}\n"
               "    - {type: otlp_http, endpoint: \"http://127.0.0.1:%d/v1development/profiles\","
               " auth: agent_token}\n" % (POD, self.out_dir, ctl.port))
        self.push(ctl, uid, cfg)
        seen = set()
        # A few samples are enough to check the attribution: on a loaded machine the busy
        # workload may get only a small share of a CPU in a 2 s window.
        path, s = self.wait_file(lambda s: s["processes"] and
                                 s["processes"][0]["samples"] >= 5, seen, timeout=30,
                                 what="a window of the workload")
        procs = s["processes"]
        # the filter on the pod name admitted the workload and nothing else
        self.assertEqual([p["attributes"].get("process.pid") for p in procs], [str(wl.pid)])
        a = procs[0]["attributes"]
        self.assertEqual(a["process.executable.name"], self.wl_name)
        self.assertEqual(a["container.id"], CID_APP)
        self.assertEqual(a["k8s.pod.uid"], UID_CHECKOUT)
        self.assertEqual(a["k8s.pod.name"], POD)
        self.assertEqual(a["k8s.namespace.name"], "shop")
        self.assertEqual(a["k8s.container.name"], "app")
        self.assertEqual(a["k8s.deployment.name"], "checkout")
        self.assertEqual(a["k8s.node.name"], "node-1")
        self.assertEqual(a["k8s.pod.label.team"], "payments")
        # the workload sets no service name: the container's OTEL_SERVICE_NAME in the spec
        self.assertEqual(a["service.name"], "checkout-api")
        self.assertIn("hot_a", procs[0]["leaf"])

        # The controller's store files the profiles by pod: ?namespace=&pod=&container=.
        q = "namespace=shop&pod=%s&container=app" % POD
        listing = wait_until(lambda: (lambda r: r[2]["profiles"] if r[0] == 200 and
                                      r[2]["profiles"] else None)(
            (lambda st, body, _: (st, None, body))(*ctl.request("GET", "/api/v1/profiles?" + q))),
            timeout=20, what="the workload's profiles in the store by pod")
        for p in listing:
            self.assertEqual((p["namespace"], p["pod"], p["container"]), ("shop", POD, "app"))
        st, body, _ = ctl.request("GET", "/api/v1/profiles?namespace=other")
        self.assertEqual((st, body["profiles"]), (200, []))
        st, flame, _ = ctl.request("GET", "/api/v1/flamegraph?" + q)
        self.assertEqual(st, 200, flame)
        self.assertGreater(flame["value"], 0)


if __name__ == "__main__":
    result = unittest.main(verbosity=2, exit=False).result
    if not result.wasSuccessful():
        sys.exit(1)
    sys.exit(77 if result.testsRun and len(result.skipped) == result.testsRun else 0)
