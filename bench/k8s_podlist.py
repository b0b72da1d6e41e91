#!/usr/bin/env python3
"""Writes a PodList of N pods (3 containers, 8 labels, a Deployment owner each) to stdout, the
shape of a busy node, for `profleet-podcache --list FILE --bench LOOKUPS` (docs/benchmarks.md).

    python3 bench/k8s_podlist.py 110 > /tmp/pods-110.json
"""
import hashlib
import json
import sys


def pod(i):
    h = hashlib.sha256(str(i).encode()).hexdigest()
    uid = "%s-%s-4%s-8%s-%s" % (h[:8], h[8:12], h[13:16], h[17:20], h[20:32])
    dep, tmpl = "svc-%d" % (i % 40), h[:10]
    containers = ["app", "sidecar", "init"]
    return {
        "metadata": {"name": "%s-%s-%s" % (dep, tmpl, h[40:45]), "namespace": "ns-%d" % (i % 7),
                     "uid": uid, "resourceVersion": str(1000 + i),
                     "labels": dict({"app.kubernetes.io/name": dep, "pod-template-hash": tmpl},
                                    **{"label-%d" % k: "value-%d" % k for k in range(6)}),
                     "ownerReferences": [{"kind": "ReplicaSet", "name": "%s-%s" % (dep, tmpl),
                                          "controller": True}]},
        "spec": {"nodeName": "node-1", "containers": [{"name": c} for c in containers]},
        "status": {"containerStatuses": [
            {"name": c, "containerID": "containerd://" +
             hashlib.sha256(("%d/%s" % (i, c)).encode()).hexdigest()} for c in containers]},
    }


n = int(sys.argv[1]) if len(sys.argv) > 1 else 110
json.dump({"kind": "PodList", "metadata": {"resourceVersion": "1"},
           "items": [pod(i) for i in range(n)]}, sys.stdout)
