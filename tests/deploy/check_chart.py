"""Checks deploy/helm/profleet and deploy/docker without helm, a cluster or a registry.

- values.yaml validates against values.schema.json, every key of it is documented, and wrong
  types, unknown keys and out-of-range values are rejected;
- every template renders (tests/deploy/gotemplate.py) for the default values and for the
  variants an operator would pick (TLS from a Secret or cert-manager, Ingress, privileged
  fallback, existing token Secret, external controller, upgrade with existing tokens), and the
  objects carry the standard labels, selectors that match, probes, security contexts,
  capabilities, hostPID, read-only host mounts and RBAC the chart promises;
- refusals (`fail`) for combinations the controller cannot run;
- the flags in the pod specs exist in the real binaries' --help, and the rendered default
  profiling config is accepted by the real controller (--default-config);
- the Dockerfiles: multi-stage from debian:12-slim, the build stage installs
  scripts/install-deps.sh, build and copy the CMake targets' real paths, the runtime stage
  installs the Debian packages that hold every shared library the built binaries link
  (readelf + dpkg -S), and the controller runs non-root with the chart's uid.

Run by ctest (label deploy) with PF_SOURCE_DIR, PF_BUILD_DIR, PF_CONTROLLER_BIN, PF_AGENT_BIN.
"""
import base64
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

import jsonschema
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gotemplate as gt  # noqa: E402

SRC = os.environ.get("PF_SOURCE_DIR") or os.path.abspath(
    os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("PF_BUILD_DIR", "")
CONTROLLER_BIN = os.environ.get("PF_CONTROLLER_BIN", "")
AGENT_BIN = os.environ.get("PF_AGENT_BIN", "")
CHART = os.path.join(SRC, "deploy", "helm", "profleet")
DOCKER = os.path.join(SRC, "deploy", "docker")

STANDARD_LABELS = ("app.kubernetes.io/name", "app.kubernetes.io/instance",
                   "app.kubernetes.io/version", "app.kubernetes.io/managed-by",
                   "app.kubernetes.io/component", "helm.sh/chart")
AGENT_CAPS = {"BPF", "PERFMON", "SYS_PTRACE", "SYS_RESOURCE", "DAC_READ_SEARCH"}


def load_yaml(path):
    with open(path) as f:
        return yaml.safe_load(f)


def read(path):
    with open(path) as f:
        return f.read()


def chart_templates():
    out = {}
    for dp, _, files in os.walk(os.path.join(CHART, "templates")):
        for f in files:
            p = os.path.join(dp, f)
            out[os.path.relpath(p, CHART)] = read(p)
    return out


def default_values():
    return load_yaml(os.path.join(CHART, "values.yaml"))


def schema():
    with open(os.path.join(CHART, "values.schema.json")) as f:
        return json.load(f)


def with_overrides(overrides):
    return gt.deep_merge(default_values(), overrides) if overrides else default_values()


def merge_all(base, over):
    out = copy.deepcopy(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge_all(out[k], v)
        else:
            out[k] = v
    return out


def render(overrides=None, api_versions=(), lookup=None, release="pf", namespace="profleet"):
    """(objects by (kind, name), rendered texts). Values are validated first, as helm does."""
    values = merge_all(default_values(), overrides or {})
    jsonschema.validate(values, schema())
    texts = gt.render_chart(chart_templates(), gt.floats(values), release=release,
                            namespace=namespace, chart=load_yaml(os.path.join(CHART,
                                                                              "Chart.yaml")),
                            api_versions=api_versions, lookup=lookup)
    objs = {}
    for path, text in texts.items():
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc is None:
                continue
            key = (doc["kind"], doc["metadata"]["name"])
            assert key not in objs, "duplicate object %r" % (key,)
            doc["_path"] = path
            objs[key] = doc
    return objs, texts


def by_kind(objs, kind):
    return [o for (k, _), o in objs.items() if k == kind]


def one(objs, kind):
    found = by_kind(objs, kind)
    assert len(found) == 1, "%d objects of kind %s" % (len(found), kind)
    return found[0]


def container(pod_spec, name):
    for c in pod_spec["containers"]:
        if c["name"] == name:
            return c
    raise AssertionError("no container %s" % name)


def args_map(c):
    """--flag=value args as {flag: [values]} (bare flags map to [None])."""
    out = {}
    for a in c.get("args", []):
        k, _, v = a.partition("=")
        out.setdefault(k, []).append(v if _ else None)
    return out


def mount_for(spec, c, path_prefix):
    """The volume behind the mount whose mountPath is the prefix of path_prefix."""
    for m in c.get("volumeMounts", []):
        if path_prefix == m["mountPath"] or path_prefix.startswith(m["mountPath"] + "/"):
            for v in spec["volumes"]:
                if v["name"] == m["name"]:
                    return m, v
            raise AssertionError("mount %s has no volume" % m["name"])
    raise AssertionError("nothing mounted at %s" % path_prefix)


class Schema(unittest.TestCase):

    def test_schema_is_valid_and_closed(self):
        s = schema()
        jsonschema.Draft7Validator.check_schema(s)

        def walk(node, path):
            if isinstance(node, dict):
                if "properties" in node:
                    self.assertIs(node.get("additionalProperties"), False,
                                  "%s: objects with properties must refuse unknown keys" % path)
                for k, v in node.get("properties", {}).items():
                    walk(v, path + "." + k)
        walk(s, "values")

    def test_default_values_validate(self):
        jsonschema.validate(default_values(), schema())

    def test_bad_values_rejected(self):
        bad = [
            {"controller": {"replicas": "1"}},
            {"controller": {"replicas": 100}},
            {"controller": {"port": 70000}},
            {"controller": {"logLevel": "verbose"}},
            {"controller": {"persistence": {"size": "lots"}}},
            {"controller": {"unknownKey": 1}},
            {"controller": {"tls": {"enabled": "yes"}}},
            {"controller": {"extraArgs": ["no-dashes"]}},
            {"agent": {"privileged": "true"}},
            {"agent": {"capabilities": "BPF"}},
            {"agent": {"tolerations": {"operator": "Exists"}}},
            {"agent": {"controllerURL": "ftp://x"}},
            {"agent": {"labels": {"env": 1}}},
            {"agent": {"stateHostPath": "relative/dir"}},
            {"agent": {"seccompProfile": {"type": "Sometimes"}}},
            {"profiling": {"sampling": {"frequency_hz": 5000}}},
            {"profiling": {"mode": "sometimes"}},
            {"profiling": {"samplng": {}}},
            {"store": {"type": "mysql"}},
            {"tokens": {"adminToken": "in-values"}},
            {"unknownTopLevel": True},
        ]
        for b in bad:
            with self.subTest(override=b):
                with self.assertRaises(jsonschema.ValidationError):
                    jsonschema.validate(merge_all(default_values(), b), schema())

    def test_every_key_is_documented(self):
        """Every knob of values.yaml has a comment right above it (blocks whose value is a
        mapping of documented knobs are section headers; the profiling document's own keys
        are documented in docs/config.md)."""
        lines = read(os.path.join(CHART, "values.yaml")).splitlines()
        stack = []  # (indent, key)
        undocumented = []
        for i, line in enumerate(lines):
            m = re.match(r"^(\s*)(?:- )?([A-Za-z0-9_./-]+):(.*)$", line)
            if not m or line.lstrip().startswith("#"):
                continue
            ind, key, rest = len(m.group(1)), m.group(2), m.group(3).strip()
            if line.lstrip().startswith("- "):
                continue  # list items belong to the documented key above
            while stack and stack[-1][0] >= ind:
                stack.pop()
            path = [k for _, k in stack] + [key]
            stack.append((ind, key))
            if path[0] == "profiling" and len(path) > 1 and path[1] != "exporters":
                continue
            if any(p in ("annotations", "resources", "nodeSelector", "podSecurityContext",
                         "securityContext", "updateStrategy", "labels") for p in path[:-1]):
                continue
            section = rest == "" and i + 1 < len(lines) and re.match(
                r"^\s+(?:#|[A-Za-z0-9_./-]+:)", lines[i + 1]) and not re.match(
                r"^\s+- ", lines[i + 1])
            j = i - 1
            while j >= 0 and lines[j].strip().startswith("#") is False and not lines[j].strip():
                j -= 1
            documented = j >= 0 and lines[j].strip().startswith("#")
            if not documented and not section:
                undocumented.append(".".join(path))
        self.assertEqual(undocumented, [])


class Templates(unittest.TestCase):

    def check_common(self, objs):
        for (kind, name), o in objs.items():
            with self.subTest(kind=kind, name=name):
                self.assertLessEqual(len(name), 63)
                self.assertRegex(name, r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")
                labels = o["metadata"].get("labels", {})
                for l in STANDARD_LABELS:
                    self.assertIn(l, labels)
                self.assertEqual(labels["app.kubernetes.io/managed-by"], "Helm")
                if kind not in ("ClusterRole", "ClusterRoleBinding"):
                    self.assertEqual(o["metadata"].get("namespace"), "profleet")
                for k, v in labels.items():
                    self.assertIsInstance(v, str, "label %s must be a string" % k)
                    self.assertLessEqual(len(v), 63)
                spec = o.get("spec", {})
                if "selector" in spec and "template" in spec:
                    sel = spec["selector"]["matchLabels"]
                    pod_labels = spec["template"]["metadata"]["labels"]
                    for k, v in sel.items():
                        self.assertEqual(pod_labels.get(k), v, "selector %s" % k)
                    self.assertNotIn("app.kubernetes.io/version", sel,
                                     "selectors are immutable: no version in them")
        for svc in by_kind(objs, "Service"):
            targets = [o for o in by_kind(objs, "StatefulSet")
                       if all(o["spec"]["template"]["metadata"]["labels"].get(k) == v
                              for k, v in svc["spec"]["selector"].items())]
            self.assertEqual(len(targets), 1, "service %s selects one workload" %
                             svc["metadata"]["name"])
            ports = [p["name"] for c in targets[0]["spec"]["template"]["spec"]["containers"]
                     for p in c.get("ports", [])]
            for p in svc["spec"]["ports"]:
                self.assertIn(p["targetPort"], ports)

    def check_volumes(self, pod_spec):
        names = [v["name"] for v in pod_spec.get("volumes", [])]
        self.assertEqual(len(names), len(set(names)))
        for c in pod_spec["containers"]:
            for m in c.get("volumeMounts", []):
                self.assertIn(m["name"], names + ["data"], "mount %s" % m["name"])

    def test_defaults(self):
        objs, texts = render()
        self.check_common(objs)
        kinds = sorted(k for k, _ in objs)
        for k in ("StatefulSet", "DaemonSet", "Service", "ConfigMap", "Secret",
                  "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Pod"):
            self.assertIn(k, kinds)
        self.assertNotIn("Ingress", kinds)
        self.assertNotIn("Certificate", kinds)

        # Controller: StatefulSet with a claim, non-root, read-only root, seccomp, probes.
        sts = one(objs, "StatefulSet")
        self.assertEqual(sts["spec"]["replicas"], 1)
        pod = sts["spec"]["template"]["spec"]
        self.check_volumes(pod)
        psc = pod["securityContext"]
        self.assertTrue(psc["runAsNonRoot"])
        self.assertNotEqual(psc["runAsUser"], 0)
        self.assertEqual(psc["seccompProfile"]["type"], "RuntimeDefault")
        self.assertFalse(pod["automountServiceAccountToken"])
        c = container(pod, "controller")
        sc = c["securityContext"]
        self.assertTrue(sc["readOnlyRootFilesystem"])
        self.assertFalse(sc["allowPrivilegeEscalation"])
        self.assertEqual(sc["capabilities"]["drop"], ["ALL"])
        self.assertEqual(c["readinessProbe"]["httpGet"]["path"], "/readyz")
        self.assertEqual(c["livenessProbe"]["httpGet"]["path"], "/healthz")
        for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
            self.assertEqual(c[probe]["httpGet"]["port"], "http")
            self.assertEqual(c[probe]["httpGet"]["scheme"], "HTTP")
        self.assertIn("requests", c["resources"])
        self.assertIn("limits", c["resources"])
        claim = sts["spec"]["volumeClaimTemplates"][0]
        self.assertEqual(claim["metadata"]["name"], "data")
        self.assertEqual(claim["spec"]["resources"]["requests"]["storage"], "10Gi")
        a = args_map(c)
        self.assertEqual(a["--listen"], ["0.0.0.0:4320"])
        # the OTLP/gRPC receiver at the Collector's port, in the pod and on the Service
        self.assertEqual(a["--otlp-grpc-listen"], ["0.0.0.0:4317"])
        self.assertIn({"name": "otlp-grpc", "containerPort": 4317, "protocol": "TCP"},
                      c["ports"])
        svc = objs[("Service", "pf-profleet-controller")]
        self.assertIn(4317, [p["port"] for p in svc["spec"]["ports"]])
        self.assertEqual(a["--profile-max-bytes"], ["1073741824"])
        self.assertEqual(a["--max-agents"], ["50000"])
        # --default-config: the file is the profiling ConfigMap's key.
        path = a["--default-config"][0]
        m, v = mount_for(pod, c, path)
        self.assertTrue(m.get("readOnly"))
        cm = objs[("ConfigMap", v["configMap"]["name"])]
        self.assertIn(os.path.relpath(path, m["mountPath"]), cm["data"])
        # Tokens: the Secret's keys are the files the flags name.
        secret = one(objs, "Secret")
        self.assertEqual(secret["metadata"]["annotations"]["helm.sh/resource-policy"], "keep")
        for flag, key in (("--admin-token-file", "admin-token"),
                          ("--agent-token-file", "agent-token")):
            path = a[flag][0]
            m, v = mount_for(pod, c, path)
            self.assertEqual(v["secret"]["secretName"], secret["metadata"]["name"])
            self.assertEqual(os.path.basename(path), key)
            tok = base64.b64decode(secret["data"][key]).decode()
            self.assertRegex(tok, r"^[A-Za-z0-9]{48}$")
        # Tokens never appear in values, NOTES or any other object.
        for path, text in texts.items():
            if not path.endswith("tokens-secret.yaml"):
                self.assertNotIn(secret["data"]["admin-token"], text)
                self.assertNotIn(base64.b64decode(secret["data"]["admin-token"]).decode(),
                                 text)
        self.assertIn("jsonpath='{.data.admin-token}'", texts["templates/NOTES.txt"])

        # Agent: DaemonSet with hostPID, only the listed capabilities, read-only host mounts.
        ds = one(objs, "DaemonSet")
        pod = ds["spec"]["template"]["spec"]
        self.check_volumes(pod)
        self.assertIs(pod["hostPID"], True)
        self.assertEqual(pod["priorityClassName"], "system-node-critical")
        self.assertIn({"operator": "Exists"}, pod["tolerations"])
        self.assertTrue(pod["automountServiceAccountToken"])
        c = container(pod, "agent")
        sc = c["securityContext"]
        self.assertIs(sc["privileged"], False)
        self.assertIs(sc["allowPrivilegeEscalation"], False)
        self.assertTrue(sc["readOnlyRootFilesystem"])
        self.assertEqual(sc["capabilities"]["drop"], ["ALL"])
        self.assertEqual(set(sc["capabilities"]["add"]), AGENT_CAPS)
        host_ro = {"/sys/kernel/btf", "/sys/fs/cgroup"}
        for mnt in c["volumeMounts"]:
            vol = [v for v in pod["volumes"] if v["name"] == mnt["name"]][0]
            if "hostPath" in vol:
                if vol["hostPath"]["path"] in host_ro:
                    self.assertTrue(mnt.get("readOnly"), mnt)
                    host_ro.discard(vol["hostPath"]["path"])
                else:
                    self.assertEqual(mnt["mountPath"], "/var/lib/profleet-agent")
        self.assertEqual(host_ro, set(), "host mounts missing")
        env = {e["name"]: e for e in c["env"]}
        self.assertEqual(env["K8S_NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"],
                         "spec.nodeName")
        a = args_map(c)
        self.assertIn("node=$(K8S_NODE_NAME)", a["--label"])
        self.assertEqual(a["--server"], ["http://pf-profleet-controller.profleet.svc:4320"])
        self.assertIn("--k8s", a)
        m, v = mount_for(pod, c, a["--token-file"][0])
        self.assertEqual(v["secret"]["items"], [{"key": "agent-token", "path": "agent-token"}])
        self.assertEqual(c["livenessProbe"]["httpGet"]["path"], "/healthz")
        self.assertEqual(a["--metrics-listen"], ["0.0.0.0:9464"])
        for k in ("requests", "limits"):
            self.assertIn("memory", c["resources"][k])
            self.assertIn("cpu", c["resources"][k])

        # RBAC: read-only on pods, bound to the agents' ServiceAccount.
        role = one(objs, "ClusterRole")
        self.assertEqual(role["rules"], [{"apiGroups": [""], "resources": ["pods"],
                                          "verbs": ["get", "list", "watch"]}])
        binding = one(objs, "ClusterRoleBinding")
        self.assertEqual(binding["roleRef"]["name"], role["metadata"]["name"])
        sa = one(objs, "ServiceAccount")
        self.assertEqual(binding["subjects"], [{"kind": "ServiceAccount",
                                                "name": sa["metadata"]["name"],
                                                "namespace": "profleet"}])
        self.assertEqual(pod["serviceAccountName"], sa["metadata"]["name"])

        # helm test hook on /readyz.
        test = one(objs, "Pod")
        self.assertEqual(test["metadata"]["annotations"]["helm.sh/hook"], "test")
        cmd = test["spec"]["containers"][0]["command"]
        self.assertEqual(cmd[0], "curl")
        self.assertEqual(cmd[-1], "http://pf-profleet-controller.profleet.svc:4320/readyz")

        # The default profiling config exports to the controller with the agent token.
        doc = yaml.safe_load(cm["data"]["default.yaml"])
        self.assertEqual(doc["profiling"]["exporters"], [{
            "type": "otlp_http", "auth": "agent_token",
            "endpoint": "http://pf-profleet-controller.profleet.svc:4320/v1development/profiles"}])
        self.assertEqual(doc["profiling"]["sampling"]["frequency_hz"], 99)

    def test_tls_from_secret_and_ingress(self):
        objs, texts = render({"controller": {
            "tls": {"enabled": True, "secretName": "my-tls"},
            "ingress": {"enabled": True, "host": "pf.example.org",
                        "tls": {"enabled": True, "secretName": "pf-ingress"}}},
            "profiling": {"exporters": [{"type": "pyroscope",
                                         "endpoint": "http://pyroscope:4040"}]}})
        self.check_common(objs)
        sts = one(objs, "StatefulSet")
        pod = sts["spec"]["template"]["spec"]
        c = container(pod, "controller")
        a = args_map(c)
        for flag, f in (("--tls-cert", "tls.crt"), ("--tls-key", "tls.key")):
            m, v = mount_for(pod, c, a[flag][0])
            self.assertEqual(v["secret"]["secretName"], "my-tls")
            self.assertEqual(os.path.basename(a[flag][0]), f)
        for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
            self.assertEqual(c[probe]["httpGet"]["scheme"], "HTTPS")
        ds = one(objs, "DaemonSet")
        pod = ds["spec"]["template"]["spec"]
        c = container(pod, "agent")
        a = args_map(c)
        self.assertEqual(a["--server"], ["https://pf-profleet-controller.profleet.svc:4320"])
        m, v = mount_for(pod, c, a["--ca-file"][0])
        self.assertEqual(v["secret"]["secretName"], "my-tls")
        self.assertEqual(v["secret"]["items"], [{"key": "ca.crt", "path": "ca.crt"}])
        ing = one(objs, "Ingress")
        self.assertEqual(ing["spec"]["tls"], [{"hosts": ["pf.example.org"],
                                              "secretName": "pf-ingress"}])
        self.assertEqual(ing["metadata"]["annotations"][
            "nginx.ingress.kubernetes.io/proxy-read-timeout"], "3600")
        self.assertEqual(ing["metadata"]["annotations"][
            "nginx.ingress.kubernetes.io/backend-protocol"], "HTTPS")
        self.assertEqual(ing["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"][
            "name"], "pf-profleet-controller")
        cm = one(objs, "ConfigMap")
        doc = yaml.safe_load(cm["data"]["default.yaml"])
        self.assertEqual(doc["profiling"]["exporters"][0]["tls"],
                         {"ca_file": "/var/run/profleet/tls/ca.crt"})
        self.assertTrue(doc["profiling"]["exporters"][0]["endpoint"].startswith("https://"))
        self.assertEqual(doc["profiling"]["exporters"][1],
                         {"type": "pyroscope", "endpoint": "http://pyroscope:4040"})
        test = one(objs, "Pod")
        self.assertIn("-k", test["spec"]["containers"][0]["command"])

    def test_cert_manager(self):
        vals = {"controller": {"tls": {"enabled": True, "certManager": {
            "enabled": True, "issuerRef": {"name": "ca-issuer", "kind": "ClusterIssuer"}}}}}
        with self.assertRaisesRegex(gt.FailError, "cert-manager"):
            render(vals)
        objs, _ = render(vals, api_versions=["cert-manager.io/v1"])
        self.check_common(objs)
        cert = one(objs, "Certificate")
        self.assertEqual(cert["apiVersion"], "cert-manager.io/v1")
        self.assertIn("pf-profleet-controller.profleet.svc", cert["spec"]["dnsNames"])
        self.assertEqual(cert["spec"]["issuerRef"]["kind"], "ClusterIssuer")
        pod = one(objs, "StatefulSet")["spec"]["template"]["spec"]
        self.assertIn(cert["spec"]["secretName"],
                      [v.get("secret", {}).get("secretName") for v in pod["volumes"]])

    def test_privileged_fallback(self):
        objs, _ = render({"agent": {"privileged": True}})
        sc = container(one(objs, "DaemonSet")["spec"]["template"]["spec"],
                       "agent")["securityContext"]
        self.assertIs(sc["privileged"], True)
        self.assertNotIn("capabilities", sc)

    def test_existing_token_secret(self):
        objs, _ = render({"tokens": {"existingSecret": "ops-tokens"}})
        self.assertEqual(by_kind(objs, "Secret"), [])
        for kind in ("StatefulSet", "DaemonSet"):
            vols = one(objs, kind)["spec"]["template"]["spec"]["volumes"]
            self.assertIn("ops-tokens", [v.get("secret", {}).get("secretName") for v in vols])

    def test_upgrade_keeps_tokens(self):
        old = {"data": {"admin-token": base64.b64encode(b"A" * 48).decode(),
                        "agent-token": base64.b64encode(b"B" * 48).decode()}}
        calls = []

        def lookup(api, kind, ns, name):
            calls.append((api, kind, ns, name))
            return old
        objs, _ = render(lookup=lookup)
        self.assertEqual(calls, [("v1", "Secret", "profleet", "pf-profleet-tokens")])
        self.assertEqual(one(objs, "Secret")["data"], old["data"])
        # A fresh install makes new random tokens each time.
        a = one(render()[0], "Secret")["data"]
        b = one(render()[0], "Secret")["data"]
        self.assertNotEqual(a["admin-token"], b["admin-token"])
        self.assertNotEqual(a["admin-token"], a["agent-token"])

    def test_external_controller(self):
        with self.assertRaisesRegex(gt.FailError, "agent.controllerURL"):
            render({"controller": {"enabled": False}})
        objs, _ = render({"controller": {"enabled": False},
                          "agent": {"controllerURL": "wss://fleet.example.org:4320",
                                    "labels": {"team": "core"}},
                          "tokens": {"existingSecret": "fleet-agent-token"},
                          "cluster": "prod-eu"})
        self.assertEqual(by_kind(objs, "StatefulSet"), [])
        self.assertEqual(by_kind(objs, "Pod"), [])
        c = container(one(objs, "DaemonSet")["spec"]["template"]["spec"], "agent")
        a = args_map(c)
        self.assertEqual(a["--server"], ["wss://fleet.example.org:4320"])
        self.assertIn("cluster=prod-eu", a["--label"])
        self.assertIn("team=core", a["--label"])
        env = {e["name"]: e for e in c["env"]}
        self.assertEqual(env["K8S_CLUSTER_NAME"]["value"], "prod-eu")

    def test_refusals(self):
        with self.assertRaisesRegex(gt.FailError, "store.postgres.host"):
            render({"store": {"type": "postgres"}})
        with self.assertRaisesRegex(gt.FailError, "needs store.type postgres"):
            render({"controller": {"replicas": 2}})
        with self.assertRaisesRegex(gt.FailError, "secretName or"):
            render({"controller": {"tls": {"enabled": True}}})
        with self.assertRaisesRegex(gt.FailError, "secretName is required"):
            render({"controller": {"ingress": {"enabled": True, "tls": {"enabled": True}}}})

    def test_postgres_store(self):
        """store.type postgres: --store with the URL built from the values and the password
        from its Secret; or the whole URL from a Secret; replicas > 1 allowed."""
        objs, _ = render({"controller": {"replicas": 3},
                          "store": {"type": "postgres", "postgres": {
                              "host": "db.example", "port": 5433,
                              "passwordSecret": {"name": "pg", "key": "pw"}}}})
        sts = one(objs, "StatefulSet")
        self.assertEqual(sts["spec"]["replicas"], 3)
        c = container(sts["spec"]["template"]["spec"], "controller")
        self.assertEqual(args_map(c)["--store"],
                         ["postgres://profleet@db.example:5433/profleet?sslmode=require"])
        env = {e["name"]: e for e in c["env"]}
        self.assertEqual(env["PGPASSWORD"]["valueFrom"]["secretKeyRef"],
                         {"name": "pg", "key": "pw"})
        objs, _ = render({"store": {"type": "postgres", "postgres": {
            "urlSecret": {"name": "pg-url", "key": "uri"}}}})
        c = container(one(objs, "StatefulSet")["spec"]["template"]["spec"], "controller")
        self.assertEqual(args_map(c)["--store"], ["$(PROFLEET_STORE_URL)"])
        env = {e["name"]: e for e in c["env"]}
        self.assertEqual(env["PROFLEET_STORE_URL"]["valueFrom"]["secretKeyRef"],
                         {"name": "pg-url", "key": "uri"})
        self.assertNotIn("PGPASSWORD", env)
        # sqlite (the default): no --store, no env.
        objs, _ = render({})
        c = container(one(objs, "StatefulSet")["spec"]["template"]["spec"], "controller")
        self.assertNotIn("--store", args_map(c))

    def test_every_optional_branch(self):
        """The switches the other variants leave alone, all flipped: every template branch
        renders into well-formed objects."""
        objs, texts = render({
            "imagePullSecrets": ["regcred"],
            "controller": {"persistence": {"enabled": False}, "listenAddress": "::",
                           "service": {"type": "LoadBalancer", "annotations": {"a": "b"}},
                           "podAnnotations": {"x": "y"}, "nodeSelector": {"pool": "infra"},
                           "tolerations": [{"key": "infra", "operator": "Exists"}],
                           "affinity": {"nodeAffinity": {}}, "priorityClassName": "high",
                           "extraArgs": ["--max-message-bytes=33554432"]},
            "agent": {"mountDebugfs": True, "metrics": {"enabled": False},
                      "podAttribution": {"enabled": False}, "extraArgs": ["--log-level=debug"],
                      "podAnnotations": {"x": "y"}, "affinity": {"nodeAffinity": {}},
                      "priorityClassName": ""},
            "serviceAccount": {"create": False, "name": "existing-sa"},
            "rbac": {"create": False},
            "exportToController": False,
        })
        self.check_common(objs)
        for kind in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding"):
            self.assertEqual(by_kind(objs, kind), [])
        sts = one(objs, "StatefulSet")
        self.assertNotIn("volumeClaimTemplates", sts["spec"])
        pod = sts["spec"]["template"]["spec"]
        self.assertIn({"name": "data", "emptyDir": {}}, pod["volumes"])
        self.assertEqual(pod["imagePullSecrets"], [{"name": "regcred"}])
        self.assertEqual(pod["priorityClassName"], "high")
        a = args_map(container(pod, "controller"))
        self.assertEqual(a["--listen"], ["[::]:4320"])
        self.assertEqual(a["--otlp-grpc-listen"], ["[::]:4317"])
        self.assertEqual(a["--max-message-bytes"], ["33554432"])
        svc = objs[("Service", "pf-profleet-controller")]
        self.assertEqual(svc["spec"]["type"], "LoadBalancer")
        ds = one(objs, "DaemonSet")
        pod = ds["spec"]["template"]["spec"]
        self.check_volumes(pod)
        self.assertEqual(pod["serviceAccountName"], "existing-sa")
        self.assertIs(pod["automountServiceAccountToken"], False)
        self.assertNotIn("priorityClassName", pod)
        c = container(pod, "agent")
        a = args_map(c)
        self.assertNotIn("--k8s", a)
        self.assertNotIn("--metrics-listen", a)
        self.assertNotIn("livenessProbe", c)
        m, v = mount_for(pod, c, "/sys/kernel/debug")
        self.assertTrue(m["readOnly"])
        cm = one(objs, "ConfigMap")
        self.assertEqual(yaml.safe_load(cm["data"]["default.yaml"])["profiling"]["exporters"],
                         None)

    def test_numbers_print_as_integers(self):
        """Helm values are float64: a million would print as 1e+06 without `int`."""
        objs, _ = render({"controller": {"opamp": {"maxAgents": 1000000},
                                         "profiles": {"maxBytes": 4398046511104}}})
        a = args_map(container(one(objs, "StatefulSet")["spec"]["template"]["spec"],
                               "controller"))
        self.assertEqual(a["--max-agents"], ["1000000"])
        self.assertEqual(a["--profile-max-bytes"], ["4398046511104"])

    def test_renderer_fails_loudly(self):
        """The renderer's strictness, so the checks above cannot pass on a silent no-op."""
        with self.assertRaises(gt.TemplateError):
            gt.render_chart({"templates/x.yaml": "{{ .Values.a.b.c }}"}, {"a": {}})
        with self.assertRaises(gt.TemplateError):
            gt.render_chart({"templates/x.yaml": "{{ eq .Values.n 1 }}"}, {"n": 1.0})
        with self.assertRaises(gt.TemplateError):
            gt.render_chart({"templates/x.yaml": "{{ .Values.m }}"}, {"m": {"k": 1}})
        out = gt.render_chart({"templates/x.yaml": "a {{- .Values.n }} {{ int .Values.n -}} b"},
                              {"n": 1e6})
        self.assertEqual(out["templates/x.yaml"], "a1e+06 1000000b")


@unittest.skipUnless(CONTROLLER_BIN and AGENT_BIN, "PF_CONTROLLER_BIN/PF_AGENT_BIN not set")
class AgainstBinaries(unittest.TestCase):

    def help_text(self, binary):
        p = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=20)
        return p.stdout + p.stderr

    def test_flags_exist(self):
        objs, _ = render({"controller": {"tls": {"enabled": True, "secretName": "t"}}})
        for kind, cname, binary in (("StatefulSet", "controller", CONTROLLER_BIN),
                                    ("DaemonSet", "agent", AGENT_BIN)):
            help_text = self.help_text(binary)
            c = container(one(objs, kind)["spec"]["template"]["spec"], cname)
            for flag in args_map(c):
                with self.subTest(binary=os.path.basename(binary), flag=flag):
                    self.assertRegex(help_text, re.escape(flag) + r"\b")

    def test_default_config_accepted_by_controller(self):
        for overrides in ({}, {"controller": {"tls": {"enabled": True, "secretName": "t"}}}):
            objs, _ = render(overrides)
            text = one(objs, "ConfigMap")["data"]["default.yaml"]
            tmp = tempfile.mkdtemp(prefix="pf-chart-")
            try:
                path = os.path.join(tmp, "default.yaml")
                with open(path, "w") as f:
                    f.write(text)
                p = subprocess.Popen([CONTROLLER_BIN, "--listen", "127.0.0.1:0", "--data-dir",
                                      os.path.join(tmp, "data"), "--default-config", path],
                                     stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True)
                out = ""
                deadline = time.monotonic() + 20
                try:
                    while time.monotonic() < deadline:
                        line = p.stdout.readline()
                        if not line:
                            break
                        out += line
                        if "as config 'default' version 1" in line:
                            break
                finally:
                    p.terminate()
                    try:
                        out += p.communicate(timeout=10)[0]
                    except subprocess.TimeoutExpired:
                        p.kill()
                        p.communicate()
                self.assertIn("as config 'default' version 1", out)
            finally:
                shutil.rmtree(tmp, ignore_errors=True)


class Dockerfiles(unittest.TestCase):

    def parse(self, name):
        """[(stage name, [(instruction, args)])] of a Dockerfile, continuations joined."""
        text = read(os.path.join(DOCKER, name))
        text = re.sub(r"\\\n", " ", text)
        stages = []
        for line in text.splitlines():
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            instr, _, rest = line.partition(" ")
            instr = instr.upper()
            if instr == "FROM":
                m = re.match(r"(\S+)(?:\s+AS\s+(\S+))?", rest, re.I)
                stages.append({"image": m.group(1), "name": m.group(2), "ins": []})
            else:
                self.assertTrue(stages, "%s: %s before FROM" % (name, instr))
                stages[-1]["ins"].append((instr, rest.strip()))
        return stages

    def deps_packages(self):
        text = read(os.path.join(SRC, "scripts", "install-deps.sh"))
        m = re.search(r"PKGS=\((.*?)\)", text, re.S)
        return set(m.group(1).split())

    def runtime_packages(self, stage):
        pkgs = set()
        for instr, rest in stage["ins"]:
            if instr == "RUN":
                for m in re.finditer(r"apt-get install ([^&;]*)", rest):
                    pkgs |= {w for w in m.group(1).split() if not w.startswith("-")}
        return pkgs

    def needed_packages(self, binary):
        out = subprocess.run(["readelf", "-d", binary], capture_output=True, text=True,
                             check=True, timeout=30).stdout
        libs = re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)
        self.assertTrue(libs)
        pkgs = {}
        for lib in libs:
            p = subprocess.run(["dpkg", "-S", "*/" + lib], capture_output=True, text=True,
                               timeout=30)
            owners = {l.split(":")[0] for l in p.stdout.splitlines() if l.strip()}
            self.assertTrue(owners, "no Debian package holds %s" % lib)
            pkgs[lib] = owners
        return pkgs

    def check_image(self, name, target, binary):
        stages = self.parse(name)
        self.assertGreaterEqual(len(stages), 2, "multi-stage")
        for s in stages:
            self.assertEqual(s["image"], "debian:12-slim")
        build, final = stages[0], stages[-1]
        self.assertEqual(build["name"], "build")
        runs = " ".join(r for i, r in build["ins"] if i == "RUN")
        self.assertIn("scripts/install-deps.sh", runs)
        self.assertIn("--target %s" % target, runs)
        m = re.search(r"cmake -S \. -B (\S+)", runs)
        self.assertTrue(m)
        build_dir = m.group(1)
        copies = [r for i, r in final["ins"] if i == "COPY" and r.startswith("--from=build")]
        self.assertGreaterEqual(len(copies), 1)
        src, dst = copies[0].split()[1:3]
        # Anything else copied from the build (the controller's console) is something this
        # build produced too.
        for extra in copies[1:]:
            esrc = extra.split()[1]
            prefix = "/src/" + build_dir + "/"
            self.assertTrue(esrc.startswith(prefix), extra)
            if BUILD:
                self.assertTrue(os.path.exists(os.path.join(BUILD, esrc[len(prefix):])),
                                "%s: %s is not in this build" % (name, esrc))
        # The path inside the image's build dir is where CMake puts the target in ours.
        if BUILD and binary:
            rel = os.path.relpath(binary, BUILD)
            self.assertEqual(src, "/src/" + build_dir + "/" + rel)
            self.assertTrue(os.access(binary, os.X_OK))
        entry = [json.loads(r) for i, r in final["ins"] if i == "ENTRYPOINT"]
        self.assertEqual(entry[0][0], dst)
        # Every shared library the binary links comes from a package the image installs.
        if binary and shutil.which("dpkg") and shutil.which("readelf"):
            pkgs = self.runtime_packages(final)
            for lib, owners in self.needed_packages(binary).items():
                if lib.startswith(("libc.so", "libm.so", "libpthread", "libdl.so")):
                    continue  # libc6 is in debian:12-slim
                self.assertTrue(owners & pkgs, "%s: %s (from %s) is not installed" % (
                    name, lib, ", ".join(sorted(owners))))
        self.assertIn("ca-certificates", self.runtime_packages(final))
        return final

    def test_controller_image(self):
        final = self.check_image("controller.Dockerfile", "profleet-controller", CONTROLLER_BIN)
        users = [r for i, r in final["ins"] if i == "USER"]
        self.assertEqual(len(users), 1)
        uid = users[0].split(":")[0]
        self.assertNotIn(uid, ("0", "root"))
        chart_uid = default_values()["controller"]["podSecurityContext"]["runAsUser"]
        self.assertEqual(int(uid), chart_uid)
        self.assertIn('"/var/lib/profleet"', " ".join(r for i, r in final["ins"]
                                                      if i in ("VOLUME", "CMD")))

    def test_agent_image(self):
        self.check_image("agent.Dockerfile", "profleet-agent", AGENT_BIN)

    def test_dockerignore(self):
        lines = read(os.path.join(SRC, ".dockerignore")).splitlines()
        for want in (".git", "build"):
            self.assertIn(want, lines)

    def test_build_packages_are_install_deps(self):
        """The build stage gets its packages from install-deps.sh and nothing else."""
        for name in ("controller.Dockerfile", "agent.Dockerfile"):
            build = self.parse(name)[0]
            self.assertEqual(self.runtime_packages(build), set(), name)
        self.assertIn("cmake", self.deps_packages())


def render_main(argv):
    """check_chart.py --render [-f VALUES.yaml]... [--set a.b=VALUE]...: prints the chart's
    manifests as this renderer sees them (values schema-checked first), for a look without
    helm. VALUE is parsed as YAML (true, 3, "x")."""
    over = {}
    i = 0
    while i < len(argv):
        if argv[i] == "-f" and i + 1 < len(argv):
            over = merge_all(over, load_yaml(argv[i + 1]) or {})
        elif argv[i] == "--set" and i + 1 < len(argv):
            key, _, val = argv[i + 1].partition("=")
            node = {}
            cur = node
            parts = key.split(".")
            for k in parts[:-1]:
                cur = cur.setdefault(k, {})
            cur[parts[-1]] = yaml.safe_load(val)
            over = merge_all(over, node)
        else:
            sys.exit("usage: check_chart.py --render [-f VALUES.yaml]... [--set a.b=VALUE]...")
        i += 2
    _, texts = render(over, release="profleet", namespace="profleet")
    for path, text in sorted(texts.items()):
        if text.strip():
            print("---\n# Source: profleet/%s\n%s" % (path, text.strip()))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--render"]:
        render_main(sys.argv[2:])
    else:
        unittest.main()
