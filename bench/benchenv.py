"""Where the bench scripts find the build and the integration harness.

setup(name) picks the build directory (PF_BUILD_DIR, else build/bench-release, else build/ci:
the first that holds profleet-controller), puts tests/integration on sys.path (pfharness and
its helpers) and sets PF_CONTROLLER_BIN / PF_AGENT_BIN unless already set. Returns the build
directory; exits naming the script when there is none.
"""
import os
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))


def setup(name):
    sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
    for d in (os.environ.get("PF_BUILD_DIR"), os.path.join(ROOT, "build", "bench-release"),
              os.path.join(ROOT, "build", "ci")):
        if d and os.path.exists(os.path.join(d, "controller", "profleet-controller")):
            os.environ.setdefault("PF_CONTROLLER_BIN",
                                  os.path.join(d, "controller", "profleet-controller"))
            os.environ.setdefault("PF_AGENT_BIN", os.path.join(d, "agent", "profleet-agent"))
            return d
    sys.exit("%s: no build with profleet-controller (set PF_BUILD_DIR)" % name)
