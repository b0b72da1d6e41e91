"""Pod attribution against a fake Kubernetes API server on loopback.

The fake server replays the recorded PodList (tests/data/k8s/pods-list.json, in two pages) and
watch events (pods-watch.jsonl): a watch that breaks in the middle of its stream, one that ends
normally, a 410 Gone that forces a relist, then a watch that stays open. The real pod cache runs
in profleet-podcache (the agent's agent_k8s library with procinfo on a fake /proc made of the
cgroup fixtures) and in profleet-agent (--k8s-api, health component "k8s" seen through the
controller). Checked: the exact list/watch requests (field selector, continue token,
resourceVersion resume, relist), the bearer token re-read after rotation, the attributes of
processes as pods change, and health while the API server is unreachable or refuses us.
"""
import json
import os
import queue
import shutil
import subprocess
import sys
import threading
import time
import unittest
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from pfharness import IntegrationCase, free_port, wait_until

PODCACHE_BIN = os.environ.get("PF_PODCACHE_BIN", "")
DATA = os.path.join(os.environ.get("PF_SOURCE_DIR", os.path.join(os.path.dirname(__file__),
                                                                  "..", "..")),
                    "tests", "data", "k8s")

CID_APP = "123beec1446e73544a838df719244e188ea8f7bd60b4531a75f9844d954ae3c3"
CID_APP2 = "3e81a2d5265cad0c049c10de1e5d67de7835d3d4e7999d77d909933f7e6276c0"
UID_CHECKOUT = "5f1c2d3e-4a5b-4c6d-8e7f-9a0b1c2d3e4f"


def load_list():
    with open(os.path.join(DATA, "pods-list.json")) as f:
        return json.load(f)


def load_events():
    with open(os.path.join(DATA, "pods-watch.jsonl")) as f:
        return [json.loads(l) for l in f if l.strip()]


class FakeAPIServer:
    """GET /api/v1/pods: lists in pages of 2 (limit/continue), watches from a script of
    handlers, one per watch request; records every request."""

    def __init__(self, port=0):
        self.requests = []
        self.watch_script = []
        self.status = None  # an HTTP status to answer everything with (403...)
        self.retry_after = None  # its Retry-After header
        self.list_rv = "1010"
        self.items = load_list()["items"]
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def do_GET(self):
                u = urllib.parse.urlparse(self.path)
                q = {k: v[0] for k, v in urllib.parse.parse_qs(u.query).items()}
                with outer.lock:
                    outer.requests.append({"path": u.path, "query": q, "t": time.monotonic(),
                                           "auth": self.headers.get("Authorization")})
                    status, retry_after = outer.status, outer.retry_after
                if status:
                    return self.send_json(status, {"kind": "Status", "code": status},
                                          retry_after)
                if u.path != "/api/v1/pods":
                    return self.send_json(404, {"kind": "Status", "code": 404})
                if q.get("watch") == "1":
                    with outer.lock:
                        fn = outer.watch_script.pop(0) if outer.watch_script else \
                            FakeAPIServer.hold_open
                    return fn(outer, self, q)
                start = int(q.get("continue", "0"))
                page = outer.items[start:start + 2]
                meta = {"resourceVersion": outer.list_rv}
                if start + 2 < len(outer.items):
                    meta["continue"] = str(start + 2)
                self.send_json(200, {"kind": "PodList", "apiVersion": "v1", "metadata": meta,
                                     "items": page})

            def send_json(self, status, obj, retry_after=None):
                body = json.dumps(obj).encode()
                self.send_response(status)
                if retry_after:
                    self.send_header("Retry-After", retry_after)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def start_stream(self):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()

            def event(self, ev):
                data = (json.dumps(ev) + "\n").encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                self.wfile.flush()

            def end_stream(self):
                self.wfile.write(b"0\r\n\r\n")
                self.wfile.flush()
                self.close_connection = True

            def break_stream(self):
                """Closes the connection in the middle of the chunked body."""
                self.wfile.write(b"40\r\n{\"type\":\"MODI")
                self.wfile.flush()
                self.close_connection = True
                try:
                    self.connection.shutdown(2)
                except OSError:
                    pass  # the client is gone already

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request, client_address):
                if not isinstance(sys.exc_info()[1], ConnectionError):
                    super().handle_error(request, client_address)  # a bug of the fake

        self.httpd = Server(("127.0.0.1", port), Handler)
        self.port = self.httpd.server_address[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @staticmethod
    def hold_open(server, h, q):
        """A watch that stays open, quiet, until the server stops (then it breaks)."""
        h.start_stream()
        server.stopping.wait(60)
        h.break_stream()

    def watches(self):
        with self.lock:
            return [r for r in self.requests if r["query"].get("watch") == "1"]

    def lists(self):
        with self.lock:
            return [r for r in self.requests if r["query"].get("watch") != "1"]

    def stop(self):
        self.stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()


def fake_proc(root):
    """Processes 101..106 in the containers of the cgroup fixtures."""
    fixtures = ["containerd-v1", "containerd-v2", "crio-v1", "crio-v2", "docker-v1",
                "docker-v2"]
    for i, name in enumerate(fixtures):
        d = os.path.join(root, str(101 + i))
        os.makedirs(d)
        shutil.copy(os.path.join(DATA, "cgroup", name + ".txt"), os.path.join(d, "cgroup"))
        with open(os.path.join(d, "comm"), "w") as f:
            f.write("server\n")
        with open(os.path.join(d, "environ"), "w") as f:
            f.write("")
        os.symlink("/usr/bin/server", os.path.join(d, "exe"))
    return [str(101 + i) for i in range(len(fixtures))]


class PodcacheTool:
    def __init__(self, workdir, api, token_file=None, proc_root=None, pids=(), extra=()):
        args = [PODCACHE_BIN, "--node", "node-1", "--api", api, "--watch-timeout", "30"]
        if token_file:
            args += ["--token-file", token_file]
        if proc_root:
            args += ["--proc-root", proc_root]
        for p in pids:
            args += ["--pid", p]
        args += list(extra)
        self.log = open(os.path.join(workdir, "podcache.log"), "wb")
        self.p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log,
                                  stdin=subprocess.DEVNULL)
        self.lines = queue.Queue()
        self.last = None
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.put(json.loads(line))

    def wait(self, pred, timeout=15, what="podcache state"):
        def poll():
            while True:
                try:
                    self.last = self.lines.get_nowait()
                except queue.Empty:
                    break
                if pred(self.last):
                    return self.last
            return None
        return wait_until(poll, timeout=timeout, what=what)

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(timeout=5)
        self.p.stdout.close()
        self.log.close()
        return self.p.returncode


def proc(line, pid):
    for p in line["processes"]:
        if p["pid"] == pid:
            return p["attributes"]
    return None


class K8sPods(IntegrationCase):

    def setUp(self):
        super().setUp()
        if not PODCACHE_BIN or not os.access(PODCACHE_BIN, os.X_OK):
            self.fail("PF_PODCACHE_BIN is not set to an executable (run through ctest)")
        self.servers = []

    def tearDown(self):
        for s in self.servers:
            s.stop()
        super().tearDown()

    def server(self, port=0):
        s = FakeAPIServer(port)
        self.servers.append(s)
        return s

    def tool(self, *a, **kw):
        t = PodcacheTool(self.workdir, *a, **kw)
        self._procs.append(t)
        return t

    def test_list_watch_break_resume_relist(self):
        api = self.server()
        events = load_events()
        token = os.path.join(self.workdir, "token")
        with open(token, "w") as f:
            f.write("token-one\n")
        send_events, send_break, send_end = threading.Event(), threading.Event(), \
            threading.Event()

        def watch1(server, h, q):
            # MODIFIED (app restarted, new container id) and ADDED, then the stream breaks
            h.start_stream()
            send_events.wait(15)
            h.event(events[0])
            h.event(events[1])
            send_break.wait(15)
            h.break_stream()

        def watch2(server, h, q):
            # DELETED and a BOOKMARK, then a normal end of the watch
            h.start_stream()
            h.event(events[2])
            h.event(events[3])
            send_end.wait(15)
            h.end_stream()

        def watch3(server, h, q):
            # the resourceVersion is too old: relist
            server.list_rv = "1030"
            h.start_stream()
            h.event({"type": "ERROR", "object": {"kind": "Status", "code": 410,
                                                 "reason": "Expired",
                                                 "message": "too old resource version"}})
            h.end_stream()

        api.watch_script = [watch1, watch2, watch3]
        root = os.path.join(self.workdir, "proc")
        pids = fake_proc(root)
        t = self.tool(api.url, token_file=token, proc_root=root, pids=pids)

        # The list (two pages) gives every fixture process its pod and container.
        line = t.wait(lambda l: l["synced"] and proc(l, 101) and
                      proc(l, 101).get("k8s.container.name"), what="listed")
        self.assertEqual(line["pods"], 4)
        names = {p: proc(line, p).get("k8s.container.name") for p in range(101, 107)}
        self.assertEqual(names, {101: "app", 102: "envoy", 103: "db", 104: "exporter",
                                 105: "web", 106: "log"})
        a = proc(line, 101)
        self.assertEqual(a["k8s.pod.name"], "checkout-7d9f8b6c5d-x2x7k")
        self.assertEqual(a["k8s.namespace.name"], "shop")
        self.assertEqual(a["k8s.deployment.name"], "checkout")
        self.assertEqual(a["k8s.pod.label.team"], "payments")
        self.assertEqual(a["service.name"], "checkout-api")
        self.assertEqual(a["container.id"], CID_APP)
        self.assertEqual(proc(line, 103)["k8s.statefulset.name"], "db")
        self.assertEqual(proc(line, 105)["service.name"], "legacy-web")
        lists = api.lists()
        self.assertEqual(len(lists), 2, api.requests)
        for r in lists:
            self.assertEqual(r["query"]["fieldSelector"], "spec.nodeName=node-1")
            self.assertEqual(r["auth"], "Bearer token-one")
        self.assertNotIn("continue", lists[0]["query"])
        self.assertEqual(lists[1]["query"]["continue"], "2")
        wait_until(lambda: len(api.watches()) == 1, timeout=10, what="the first watch")
        send_events.set()

        # watch 1 from the list's resourceVersion: the app container's old id is gone, so
        # process 101 keeps only its pod (the cgroup names the pod uid).
        line = t.wait(lambda l: proc(l, 101) and "k8s.container.name" not in proc(l, 101),
                      what="MODIFIED applied")
        self.assertEqual(proc(line, 101)["k8s.pod.uid"], UID_CHECKOUT)
        self.assertEqual(proc(line, 101)["k8s.pod.name"], "checkout-7d9f8b6c5d-x2x7k")
        w = api.watches()
        self.assertEqual(w[0]["query"]["resourceVersion"], "1010")
        self.assertEqual(w[0]["query"]["allowWatchBookmarks"], "true")
        self.assertEqual(w[0]["query"]["fieldSelector"], "spec.nodeName=node-1")
        # the token rotates (projected tokens do); the next request carries the new one
        with open(token, "w") as f:
            f.write("token-two\n")
        send_break.set()

        # watch 2 resumes after the break from the last event's resourceVersion (1012), not
        # with a new list; DELETED removes the legacy pod from processes 105 and 106.
        line = t.wait(lambda l: proc(l, 105) is not None and
                      "k8s.pod.name" not in proc(l, 105), what="DELETED applied")
        self.assertNotIn("k8s.pod.name", proc(line, 106))
        w = api.watches()
        self.assertEqual(len(w), 2)
        self.assertEqual(w[1]["query"]["resourceVersion"], "1012")
        self.assertEqual(w[1]["auth"], "Bearer token-two")
        self.assertEqual(len(api.lists()), 2)
        send_end.set()
        wait_until(lambda: len(api.watches()) >= 3, timeout=15, what="third watch")
        w = api.watches()
        # watch 3 resumes from the BOOKMARK (1020), gets 410 and the cache relists.
        self.assertEqual(w[2]["query"]["resourceVersion"], "1020")
        line = t.wait(lambda l: l["relists"] >= 1 and l["lists"] >= 2 and
                      l["resource_version"] == "1030", what="relist after 410")
        self.assertEqual(len(api.lists()), 4)  # two pages, twice
        # the relist brings back what the fake server lists (legacy included)
        self.assertEqual(proc(line, 105)["k8s.pod.name"], "legacy")
        wait_until(lambda: len(api.watches()) >= 4, timeout=15, what="watch after relist")
        self.assertEqual(api.watches()[3]["query"]["resourceVersion"], "1030")
        self.assertTrue(line["reachable"])
        self.assertEqual(line["last_error"], "")

    def test_oversized_event_relists(self):
        """A watch event over the 4 MiB bound cannot be resumed past: the cache lists again
        and watches from the new list's resourceVersion."""
        api = self.server()
        big = load_events()[1]
        big["object"]["metadata"]["annotations"] = {"blob": "x" * (5 << 20)}

        def watch1(server, h, q):
            server.list_rv = "2000"
            h.start_stream()
            h.event(big)
            server.stopping.wait(30)
            h.break_stream()
        api.watch_script = [watch1]
        t = self.tool(api.url)
        line = t.wait(lambda l: l["relists"] >= 1 and l["resource_version"] == "2000",
                      timeout=20, what="relist after an oversized event")
        self.assertEqual(line["pods"], 4)  # the big event was never applied
        wait_until(lambda: len(api.watches()) >= 2, timeout=15, what="watch after relist")
        self.assertEqual(api.watches()[1]["query"]["resourceVersion"], "2000")
        self.assertEqual(len(api.lists()), 4)

    def test_429_retry_after_is_honoured(self):
        api = self.server()
        api.status, api.retry_after = 429, "2"
        t = self.tool(api.url)  # backoff 100 ms .. 2 s: without Retry-After it would retry sooner
        line = t.wait(lambda l: "429" in l["last_error"], what="429 reported")
        self.assertFalse(line["reachable"])
        wait_until(lambda: len(api.lists()) >= 2, timeout=10, what="a second list")
        api.status = None
        lists = api.lists()
        self.assertGreaterEqual(lists[1]["t"] - lists[0]["t"], 1.9)
        t.wait(lambda l: l["synced"] and l["reachable"], timeout=15, what="synced")

    def test_unreachable_then_reachable(self):
        port = free_port()
        t = self.tool("http://127.0.0.1:%d" % port)
        line = t.wait(lambda l: not l["reachable"] and l["last_error"],
                      what="unreachable reported")
        self.assertIn("API server unreachable", line["last_error"])
        self.assertFalse(line["synced"])
        api = self.server(port)
        line = t.wait(lambda l: l["reachable"] and l["synced"], timeout=20,
                      what="synced once the API server is up")
        self.assertEqual(line["pods"], 4)
        # refused (RBAC): the cache keeps its pods and says why
        api.status = 403
        api.stop()  # breaks the open watch
        self.servers.remove(api)
        api2 = self.server(port)
        api2.status = 403
        # "HTTP 403", not "403" alone: the port in an unreachable message may hold it
        line = t.wait(lambda l: not l["reachable"] and "HTTP 403" in l["last_error"],
                      timeout=20, what="403 reported")
        self.assertIn("RBAC", line["last_error"])
        self.assertEqual(line["pods"], 4)

    def test_agent_health_component(self):
        api = self.server()
        ctl = self.controller()
        ag = self.agent(ctl, "k8s", extra=["--no-sampler", "--k8s-api", api.url,
                                            "--k8s-node", "node-1"])
        uid = ag.uid()

        def k8s_component(pred):
            def check():
                a = self.agent_json(ctl, uid)
                c = a and a.get("health", {}).get("components", {}).get("k8s")
                return c if c and pred(c) else None
            return check
        c = wait_until(k8s_component(lambda c: c["healthy"] and
                                     c.get("status", "").startswith("watching")),
                       timeout=15, what="k8s component healthy")
        self.assertEqual(c["status"], "watching pods of node node-1: 4 pods, 7 containers")
        api.stop()
        self.servers.remove(api)
        c = wait_until(k8s_component(lambda c: not c["healthy"]), timeout=20,
                       what="k8s component unhealthy")
        self.assertIn("API server unreachable", c["last_error"])
        a = self.agent_json(ctl, uid)
        self.assertFalse(a["health"]["healthy"])
        self.assertTrue(a["connected"])


if __name__ == "__main__":
    unittest.main()
