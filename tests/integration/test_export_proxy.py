"""The agent's outbound HTTP through libcurl (agent/http_client/http_client.c), end to end: proxies,
connection reuse, redirects of pprof targets, HTTP/2.

The real controller and agent (eBPF off: --no-sampler; a pprof target served by this test makes
the profiles), with HTTPS_PROXY, http_proxy and NO_PROXY=localhost in the agent's environment
and a forwarding HTTP proxy written here that counts what it is asked (CONNECT tunnels and
absolute-form requests). Three otlp_http exporters:
- http://127.0.0.1 (plain): the POSTs reach the receiver through the proxy as absolute-form
  requests, never directly;
- https://127.0.0.1 (the first test CA trusted through SSL_CERT_FILE): through CONNECT tunnels
  to that port, the body intact (TLS end to end: the proxy sees only the tunnel);
- http://localhost (in NO_PROXY): directly, never through the proxy; that receiver speaks
  HTTP/1.1 with keep-alive, and the exporter's connection pool sends several exports over
  fewer connections than exports.
The pprof target is http://localhost:<redirector>/..., which answers 302 to the real pprof
server: scrapes follow the redirect (the windows the exporters send exist only then).

test_http2: where `go` is installed, an HTTPS server in Go (net/http offers h2 by ALPN) records
each request's protocol: the exporter's requests arrive as HTTP/2.0. Skipped without go.
Every wait is bounded.
"""
import http.server
import os
import select
import shutil
import socket
import subprocess
import threading
import unittest
import urllib.parse

from pfharness import AGENT_BIN, Agent, IntegrationCase, Proc, free_port, wait_until
from test_agent_metrics import HEAP_PPROF, PprofServer
from test_export_tls import OPENSSL, TLSRecorder, make_ca, make_server_cert


class CountingProxy:
    """A forwarding HTTP proxy: CONNECT tunnels and absolute-form requests, both counted."""

    def __init__(self):
        self.lock = threading.Lock()
        self.connects = []   # "host:port"
        self.requests = []   # (method, absolute URL)
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_CONNECT(self):
                with outer.lock:
                    outer.connects.append(self.path)
                host, port = self.path.rsplit(":", 1)
                try:
                    up = socket.create_connection((host, int(port)), timeout=10)
                except OSError:
                    self.send_error(502)
                    return
                self.send_response(200, "Connection established")
                self.end_headers()
                self.close_connection = True
                socks = [self.connection, up]
                for _ in range(100000):  # bounded relay, until one side closes
                    r, _, _ = select.select(socks, [], [], 10)
                    if not r:
                        break
                    done = False
                    for s in r:
                        data = s.recv(65536)
                        if not data:
                            done = True
                            break
                        (up if s is self.connection else self.connection).sendall(data)
                    if done:
                        break
                up.close()

            def forward(self):
                with outer.lock:
                    outer.requests.append((self.command, self.path))
                u = urllib.parse.urlsplit(self.path)
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n) if n else b""
                try:
                    up = socket.create_connection((u.hostname, u.port or 80), timeout=10)
                except OSError:
                    self.send_error(502)
                    return
                target = u.path + ("?" + u.query if u.query else "")
                head = ["%s %s HTTP/1.0" % (self.command, target or "/")]
                for k, v in self.headers.items():
                    if k.lower() not in ("proxy-connection", "connection", "keep-alive"):
                        head.append("%s: %s" % (k, v))
                up.sendall(("\r\n".join(head) + "\r\n\r\n").encode() + body)
                resp = b""
                while len(resp) < (64 << 20):
                    d = up.recv(65536)
                    if not d:
                        break
                    resp += d
                up.close()
                hdr, _, rbody = resp.partition(b"\r\n\r\n")
                lines = hdr.decode("latin-1").split("\r\n")
                status = lines[0].split(" ", 2)
                self.send_response(int(status[1]), status[2] if len(status) > 2 else "")
                for line in lines[1:]:
                    k, _, v = line.partition(":")
                    if k.lower() not in ("content-length", "connection", "transfer-encoding"):
                        self.send_header(k, v.strip())
                self.send_header("Content-Length", str(len(rbody)))
                self.end_headers()
                self.wfile.write(rbody)

            do_GET = forward
            do_POST = forward

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def counts(self):
        with self.lock:
            return list(self.connects), list(self.requests)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class Receiver:
    """A plain HTTP/1.1 OTLP receiver with keep-alive: records paths and client connections."""

    def __init__(self, host="127.0.0.1"):
        self.lock = threading.Lock()
        self.posts = []
        self.peers = set()
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                with outer.lock:
                    outer.posts.append((self.path, body))
                    outer.peers.add(self.client_address)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer((host, 0), H)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def snapshot(self):
        with self.lock:
            return list(self.posts), set(self.peers)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class Redirector:
    """Answers every GET with 302 to base + the same path, counting them."""

    def __init__(self, base):
        self.hits = 0
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                outer.hits += 1
                self.send_response(302)
                self.send_header("Location", base + self.path)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


GO_H2_SERVER = r'''
package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
)

func main() {
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		fmt.Printf("%s %s %d\n", r.Proto, r.URL.Path, n)
		os.Stdout.Sync()
		w.WriteHeader(200)
	})
	srv := &http.Server{Addr: "127.0.0.1:" + os.Args[1]}
	fmt.Println(srv.ListenAndServeTLS(os.Args[2], os.Args[3]))
}
'''


class ExportProxy(IntegrationCase):

    def setUp(self):
        super().setUp()
        if not OPENSSL:
            self.skipTest("no openssl command")
        self.closers = []
        self.pprof = PprofServer(HEAP_PPROF)
        self.closers.append(self.pprof)
        d = self.certs = os.path.join(self.workdir, "certs")
        os.makedirs(d)
        make_ca(d, "ca1")
        self.good = make_server_cert(d, "good", "ca1", "IP:127.0.0.1")

    def tearDown(self):
        for c in self.closers:
            c.close()
        super().tearDown()

    def start_agent(self, ctl, env_extra):
        test = self

        class ProxyAgent(Agent):
            def start(self):
                args = [AGENT_BIN, "--state-dir", self.state_dir, "--log-level", "debug",
                        "--server", self.server, "--token-file", self.token_file,
                        "--health-figures-seconds", "1"] + self.extra
                env = dict(os.environ)
                for k in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy",
                          "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy", "SSL_CERT_DIR"):
                    env.pop(k, None)
                env["SSL_CERT_FILE"] = os.path.join(test.certs, "ca1.pem")
                env.update(env_extra)
                self.proc = Proc(args, os.path.join(self.workdir, "agent-%s.log" % self.name),
                                 env=env)
                return self

        a = ProxyAgent(self.workdir, "proxy", server="ws://127.0.0.1:%d/v1/opamp" % ctl.port,
                       token_file=ctl.agent_token_file, extra=["--no-sampler"])
        a.start()
        self._procs.append(a)
        return a

    def apply(self, ctl, uid, exporters, target):
        cfg = "\n".join([
            "profiling:",
            "  pprof:",
            "    targets:",
            "      - {url: \"%s\", type: heap, interval_seconds: 1}" % target,
            "  exporters:"] + ["    - " + e for e in exporters] + [""])
        st, body, _ = ctl.put_config("default", cfg)
        self.assertEqual(st, 201, body)
        wait_until(lambda: (self.agent_json(ctl, uid) or {}).get("config", {}).get("status")
                   == "APPLIED", timeout=15, what="config APPLIED")

    def test_proxy_no_proxy_reuse_redirect(self):
        proxy = CountingProxy()
        plain = Receiver()
        direct = Receiver()
        tls = TLSRecorder(self.good[0], self.good[1])
        redir = Redirector("http://localhost:%d" % self.pprof.port)
        self.closers += [proxy, plain, direct, tls, redir]

        ctl = self.controller()
        purl = "http://127.0.0.1:%d" % proxy.port
        ag = self.start_agent(ctl, {"HTTPS_PROXY": purl, "http_proxy": purl,
                                    "NO_PROXY": "localhost"})
        uid = ag.uid()
        self.apply(ctl, uid, [
            "{type: otlp_http, endpoint: \"http://127.0.0.1:%d/plain\", timeout_seconds: 5}"
            % plain.port,
            "{type: otlp_http, endpoint: \"https://127.0.0.1:%d/tls\", timeout_seconds: 5}"
            % tls.port,
            "{type: otlp_http, endpoint: \"http://localhost:%d/direct\", timeout_seconds: 5}"
            % direct.port,
        ], "http://localhost:%d/debug/pprof/heap" % redir.port)

        def enough():
            p, _ = plain.snapshot()
            d, _ = direct.snapshot()
            return len(p) >= 3 and len(d) >= 3 and len(tls.posts("/tls")) >= 1
        wait_until(enough, timeout=40, what="exports to all three receivers")

        connects, requests = proxy.counts()
        tls_port = "127.0.0.1:%d" % tls.port
        # https: CONNECT tunnels to the receiver's port; no other exporter tunnelled (the
        # OpAMP WebSocket, libwebsockets', honours http_proxy with a CONNECT of its own)
        self.assertIn(tls_port, connects)
        self.assertEqual(set(connects) - {"127.0.0.1:%d" % ctl.port}, {tls_port}, connects)
        # plain http: absolute-form POSTs to the plain receiver only
        plain_url = "http://127.0.0.1:%d/plain" % plain.port
        self.assertIn(("POST", plain_url), requests)
        posts, _ = plain.snapshot()
        self.assertLessEqual(len(posts), len([r for r in requests if r == ("POST", plain_url)]))
        # NO_PROXY: neither the localhost receiver nor the localhost pprof target went through it
        self.assertFalse([r for r in requests if "localhost" in r[1]], requests)
        # redirects: the scrapes went to the redirector, then to the pprof server
        self.assertGreaterEqual(redir.hits, 1)
        self.assertGreaterEqual(self.pprof.hits, 1)
        # one connection pool per exporter: keep-alive reuse to the direct receiver
        dposts, peers = direct.snapshot()
        self.assertGreaterEqual(len(dposts), 3)
        self.assertLess(len(peers), len(dposts), "no connection was reused: %r" % peers)

    def test_http2(self):
        go = shutil.which("go")
        if not go:
            self.skipTest("go not installed: no HTTP/2 server")
        d = os.path.join(self.workdir, "h2")
        os.makedirs(d)
        with open(os.path.join(d, "main.go"), "w") as f:
            f.write(GO_H2_SERVER)
        env = dict(os.environ, GOPATH=os.path.join(d, "gopath"), GOCACHE=os.path.join(d, "cache"),
                   GOFLAGS="", GO111MODULE="off", GOPROXY="off")
        subprocess.run([go, "build", "-o", "h2srv", "main.go"], cwd=d, env=env, check=True,
                       timeout=180, capture_output=True)
        port = free_port()
        log = os.path.join(d, "h2.log")
        srv = Proc([os.path.join(d, "h2srv"), str(port), self.good[0], self.good[1]], log)
        self._procs.append(srv)

        ctl = self.controller()
        ag = self.start_agent(ctl, {})
        uid = ag.uid()
        self.apply(ctl, uid, [
            "{type: otlp_http, endpoint: \"https://127.0.0.1:%d/h2\", timeout_seconds: 5}"
            % port], "http://127.0.0.1:%d/debug/pprof/heap" % self.pprof.port)

        def lines():
            with open(log) as f:
                got = [l.split() for l in f if l.startswith("HTTP/")]
            return got if got else None
        got = wait_until(lines, timeout=40, what="exports at the Go HTTPS server")
        self.assertEqual(got[0][0], "HTTP/2.0", got)
        self.assertEqual(got[0][1], "/h2")
        self.assertGreater(int(got[0][2]), 50)


if __name__ == "__main__":
    unittest.main()
