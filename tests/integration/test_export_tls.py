"""The otlp_http and pyroscope exporters over HTTPS (agent/export/otlp_http.c), end to end.

The real controller and agent (eBPF off: --no-sampler; a pprof target served by this test makes
the profiles) export to TLS servers run here with Python's http.server + ssl on 127.0.0.1. The
certificates are made at test time with the `openssl` command in the test's temp dir: two
throw-away CAs, a server certificate for IP:127.0.0.1 from the first CA, one from the same CA
for another address (IP:127.0.0.2, DNS:other.invalid), one for IP:127.0.0.1 from the second
CA, one for DNS:profleet.test only and a client certificate, both from the first CA.

test_https_exporters runs without a tls block: the agent trusts only the first CA through
OpenSSL's SSL_CERT_FILE (the default verify paths). test_tls_settings runs an agent without
SSL_CERT_FILE and uses the exporters' `tls` block (pf/profcfg.h) instead.

Checked:
- otlp_http over https with the trusted CA: the request arrives with its path, Host, the
  configured header, Content-Type application/x-protobuf, Content-Encoding gzip, and its body
  gunzips to exactly the bytes a file exporter of the same config wrote (the profile intact);
  no SNI is sent for an IP literal (RFC 6066 §3); the answer has no Content-Length and the
  server closes without close_notify, which must still count as delivered.
- pyroscope over https: /<base>/ingest?format=pprof&name=..., application/octet-stream, a
  gzip'd pprof body.
- A certificate from an untrusted CA: the exporter's health component is unhealthy with
  `certificate verify failed: unable to get local issuer certificate` in last_error, the item
  is retried (retried_total grows, failed_total and dropped_total stay 0, it stays queued) and
  delivered once the server presents a trusted certificate on the same port.
- A trusted certificate for another address: unhealthy with `IP address mismatch`.

test_tls_settings:
- tls.ca_file (the first CA) alone makes the exporter trust the server: delivered.
- mTLS: a server that requires a client certificate from the first CA gets the export from
  the exporter with cert_file/key_file (it sees the client's CN), and refuses the one without:
  that one's health last_error says the server wanted a certificate.
- insecure_skip_verify against the second CA's certificate delivers.
- server_name: profleet.test against a certificate for DNS:profleet.test only, served on
  127.0.0.1: delivered, and the server received SNI "profleet.test".
- a config whose ca_file does not exist is FAILED with
  `profiling.exporters[1].tls.ca_file: cannot load ...: No such file or directory`, the previous
  config stays effective and keeps exporting.
Every wait is bounded.
"""
import gzip
import http.server
import os
import shutil
import socket
import ssl
import subprocess
import threading
import unittest

from pfharness import AGENT_BIN, Agent, IntegrationCase, Proc, free_port, wait_until
from test_agent_metrics import HEAP_PPROF, PprofServer, http_get, parse_exposition, val

OPENSSL = shutil.which("openssl")


def openssl(*args, cwd):
    r = subprocess.run([OPENSSL] + list(args), cwd=cwd, capture_output=True, timeout=60)
    if r.returncode != 0:
        raise AssertionError("openssl %s: %s" % (" ".join(args), r.stderr.decode()))


def make_ca(d, name):
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", name + ".key", "-out", name + ".pem", "-days", "2", "-subj",
            "/CN=profleet test " + name, "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign", cwd=d)


def make_server_cert(d, name, ca, san, eku="serverAuth"):
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", name + ".key", "-out", name + ".csr", "-subj", "/CN=" + name, cwd=d)
    with open(os.path.join(d, name + ".ext"), "w") as f:
        f.write("subjectAltName=%s\nextendedKeyUsage=%s\n"
                "basicConstraints=critical,CA:FALSE\n" % (san, eku))
    openssl("x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key",
            "-CAcreateserial", "-out", name + ".pem", "-days", "2", "-extfile", name + ".ext",
            cwd=d)
    return os.path.join(d, name + ".pem"), os.path.join(d, name + ".key")


class TLSRecorder:
    """An HTTPS server that records every request (path, headers, body, SNI) and answers 200
    without Content-Length, closing the connection without a TLS close_notify."""

    def __init__(self, cert, key, port=0, client_ca=None):
        self.requests = []
        self.sni = []
        self.handshake_errors = []
        self.client_cns = []
        self.lock = threading.Lock()
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(cert, key)
        if client_ca:  # mTLS: a client certificate from client_ca is required
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(client_ca)
        outer = self

        def on_sni(sock, name, c):
            with outer.lock:
                outer.sni.append(name)
        ctx.sni_callback = on_sni

        class H(http.server.BaseHTTPRequestHandler):
            def setup(self):
                self.request.settimeout(10)
                try:
                    self.request.do_handshake()
                except (ssl.SSLError, OSError) as e:
                    with outer.lock:
                        outer.handshake_errors.append(str(e))
                    raise
                peer = self.request.getpeercert()
                if peer:
                    with outer.lock:
                        outer.client_cns.append(dict(x[0] for x in peer["subject"])
                                                .get("commonName"))
                super().setup()

            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(n)
                with outer.lock:
                    outer.requests.append((self.path, dict(self.headers.items()), body))
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.end_headers()  # HTTP/1.0, no Content-Length: the body ends at close
                self.close_connection = True

            def log_message(self, *a):
                pass

        class S(http.server.ThreadingHTTPServer):
            allow_reuse_address = True
            daemon_threads = True

            def finish_request(self, request, client_address):
                try:
                    super().finish_request(request, client_address)
                except (ssl.SSLError, OSError):
                    pass  # a handshake the client aborted: recorded in setup()

            def handle_error(self, request, client_address):
                pass

        self.httpd = S(("127.0.0.1", port), H, bind_and_activate=False)
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True,
                                            do_handshake_on_connect=False)
        self.httpd.server_bind()
        self.httpd.server_activate()
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def posts(self, prefix):
        with self.lock:
            return [r for r in self.requests if r[0].startswith(prefix)]

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class ExportTLS(IntegrationCase):

    def setUp(self):
        super().setUp()
        if not OPENSSL:
            self.skipTest("no openssl command")
        self.servers = []
        self.pprof = PprofServer(HEAP_PPROF)
        d = self.certs = os.path.join(self.workdir, "certs")
        os.makedirs(d)
        make_ca(d, "ca1")
        make_ca(d, "ca2")
        self.good = make_server_cert(d, "good", "ca1", "IP:127.0.0.1")
        self.other_ip = make_server_cert(d, "otherip", "ca1", "IP:127.0.0.2,DNS:other.invalid")
        self.untrusted = make_server_cert(d, "untrusted", "ca2", "IP:127.0.0.1")
        self.named = make_server_cert(d, "named", "ca1", "DNS:profleet.test")
        self.client = make_server_cert(d, "client", "ca1", "DNS:agent.invalid", "clientAuth")

    def tearDown(self):
        for s in self.servers:
            s.close()
        self.pprof.close()
        super().tearDown()

    def server(self, cert, port=0, client_ca=None):
        s = TLSRecorder(cert[0], cert[1], port, client_ca)
        self.servers.append(s)
        return s

    def start_agent(self, ctl, metrics_port, ca_env=True):
        """The harness's agent, with SSL_CERT_FILE set to the first CA (ca_env), else with
        neither SSL_CERT_FILE nor SSL_CERT_DIR (the system store, which knows no test CA)."""
        test = self

        class TLSAgent(Agent):
            def start(self):
                args = [AGENT_BIN, "--state-dir", self.state_dir, "--log-level", "debug",
                        "--server", self.server, "--token-file", self.token_file,
                        "--health-figures-seconds", "1"] + self.extra
                env = dict(os.environ)
                env.pop("SSL_CERT_FILE", None)
                env.pop("SSL_CERT_DIR", None)
                if ca_env:
                    env["SSL_CERT_FILE"] = os.path.join(test.certs, "ca1.pem")
                self.proc = Proc(args, os.path.join(self.workdir, "agent-%s.log" % self.name),
                                 env=env)
                return self

        a = TLSAgent(self.workdir, "tls", server="ws://127.0.0.1:%d/v1/opamp" % ctl.port,
                     token_file=ctl.agent_token_file,
                     extra=["--no-sampler", "--metrics-listen", "127.0.0.1:%d" % metrics_port])
        a.start()
        self._procs.append(a)
        return a

    def metrics(self, port):
        try:
            st, _, body = http_get("http://127.0.0.1:%d/metrics" % port)
        except OSError:
            return None
        if st != 200:
            return None
        return parse_exposition(body)[1]

    def components(self, ctl, uid):
        a = self.agent_json(ctl, uid) or {}
        return (a.get("health") or {}).get("components", {})

    def test_https_exporters(self):
        good = self.server(self.good)
        untrusted_port = free_port()
        untrusted = self.server(self.untrusted, untrusted_port)
        other_ip = self.server(self.other_ip)

        ctl = self.controller()
        mport = free_port()
        ag = self.start_agent(ctl, mport)
        uid = ag.uid()
        out_dir = os.path.join(self.workdir, "out")
        cfg = "\n".join([
            "profiling:",
            "  pprof:",
            "    targets:",
            "      - {url: \"http://127.0.0.1:%d/debug/pprof/heap\", type: heap, "
            "interval_seconds: 1}" % self.pprof.port,
            "  exporters:",
            "    - {type: file, path: \"%s\"}" % out_dir,
            "    - {type: otlp_http, endpoint: \"https://127.0.0.1:%d/v1development/profiles\","
            " headers: {X-Tenant: tls-test}, timeout_seconds: 5}" % good.port,
            "    - {type: pyroscope, endpoint: \"https://127.0.0.1:%d/pyro/\","
            " timeout_seconds: 5}" % good.port,
            "    - {type: otlp_http, endpoint: \"https://127.0.0.1:%d/v1development/profiles\","
            " timeout_seconds: 5}" % untrusted_port,
            "    - {type: otlp_http, endpoint: \"https://127.0.0.1:%d/v1development/profiles\","
            " timeout_seconds: 5}" % other_ip.port,
            ""])
        st, body, _ = ctl.put_config("default", cfg)
        self.assertEqual(st, 201, body)
        wait_until(lambda: (self.agent_json(ctl, uid) or {}).get("config", {}).get("status")
                   == "APPLIED", timeout=15, what="config APPLIED")

        # --- the trusted server: OTLP and pyroscope requests arrive intact
        wait_until(lambda: good.posts("/v1development/profiles") and good.posts("/pyro/"),
                   timeout=20, what="OTLP and pyroscope requests over https")
        path, h, body = good.posts("/v1development/profiles")[0]
        self.assertEqual(path, "/v1development/profiles")
        self.assertEqual(h.get("Host"), "127.0.0.1:%d" % good.port)
        self.assertEqual(h.get("Content-Type"), "application/x-protobuf")
        self.assertEqual(h.get("Content-Encoding"), "gzip")
        self.assertEqual(h.get("X-Tenant"), "tls-test")
        self.assertEqual(int(h.get("Content-Length")), len(body))
        otlp = gzip.decompress(body)
        self.assertGreater(len(otlp), 100)

        def files():
            if not os.path.isdir(out_dir):
                return set()
            out = set()
            for n in os.listdir(out_dir):
                if n.endswith(".otlp.pb"):
                    with open(os.path.join(out_dir, n), "rb") as f:
                        out.add(f.read())
            return out
        # the same encoded request went to the file exporter: byte-identical after gunzip
        wait_until(lambda: otlp in files(), timeout=10, what="https body equal to a file export")

        path, h, body = good.posts("/pyro/")[0]
        self.assertTrue(path.startswith("/pyro/ingest?format=pprof&name="), path)
        self.assertIn("&from=", path)
        self.assertEqual(h.get("Content-Type"), "application/octet-stream")
        self.assertNotIn("Content-Encoding", h)
        self.assertEqual(body[:2], b"\x1f\x8b")  # the pprof itself is gzip'd
        pprof = gzip.decompress(body)
        self.assertGreater(len(pprof), 50)
        self.assertEqual(pprof[0], 0x0a)  # Profile.sample_type = 1, length-delimited
        with good.lock:
            self.assertTrue(good.sni, "no handshake seen")
            self.assertEqual(set(good.sni), {None}, "SNI sent for an IP literal")

        # health and metrics of the good exporters
        ok = {"exporter": "1", "type": "otlp_http"}
        py = {"exporter": "2", "type": "pyroscope"}
        bad = {"exporter": "3", "type": "otlp_http"}
        mis = {"exporter": "4", "type": "otlp_http"}

        def m_ok(s):
            return (s and (val(s, "profleet_agent_exporter_confirmed_total", **ok) or 0) >= 1
                    and (val(s, "profleet_agent_exporter_confirmed_total", **py) or 0) >= 1
                    and (val(s, "profleet_agent_exporter_retried_total", **bad) or 0) >= 2
                    and (val(s, "profleet_agent_exporter_retried_total", **mis) or 0) >= 1)
        s = wait_until(lambda: m_ok(self.metrics(mport)) and self.metrics(mport), timeout=30,
                       interval=0.3, what="confirmed good exports and retried bad ones")
        self.assertEqual(val(s, "profleet_agent_exporter_last_http_status", **ok), 200)
        for lab in (ok, py):
            self.assertEqual(val(s, "profleet_agent_exporter_failed_total", **lab), 0)

        # --- untrusted CA: clear error, retried, still queued, nothing dropped or failed
        def comp(name, want_healthy):
            c = self.components(ctl, uid).get(name)
            return c if c and bool(c.get("healthy")) == want_healthy and (
                want_healthy or c.get("last_error")) else None
        c = wait_until(lambda: comp("exporter/3:otlp_http", False), timeout=15,
                       what="exporter/3 unhealthy in the controller")
        err = c["last_error"]
        self.assertIn("TLS handshake with 127.0.0.1:%d" % untrusted_port, err)
        self.assertIn("certificate verify failed", err)
        self.assertIn("unable to get local issuer certificate", err)
        self.assertIn("retrying", c.get("status", ""))
        self.assertEqual(untrusted.posts("/"), [])  # nothing was sent over that connection
        self.assertEqual(val(s, "profleet_agent_exporter_failed_total", **bad), 0)
        self.assertEqual(val(s, "profleet_agent_exporter_dropped_total", **bad), 0)
        self.assertEqual(val(s, "profleet_agent_exporter_confirmed_total", **bad), 0)
        self.assertGreaterEqual(val(s, "profleet_agent_exporter_queued_items", **bad), 1)
        self.assertEqual(val(s, "profleet_agent_exporter_last_http_status", **bad), 0)

        # --- a trusted certificate for another address
        c = wait_until(lambda: comp("exporter/4:otlp_http", False), timeout=15,
                       what="exporter/4 unhealthy in the controller")
        self.assertIn("certificate verify failed", c["last_error"])
        self.assertIn("IP address mismatch", c["last_error"])
        self.assertEqual(other_ip.posts("/"), [])
        self.assertEqual(val(s, "profleet_agent_exporter_failed_total", **mis), 0)
        self.assertEqual(val(s, "profleet_agent_exporter_dropped_total", **mis), 0)

        # --- the untrusted server gets a trusted certificate: the queued items are delivered
        untrusted.close()
        self.servers.remove(untrusted)
        fixed = self.server(self.good, untrusted_port)
        wait_until(lambda: fixed.posts("/v1development/profiles"), timeout=45,
                   what="retried export delivered after the certificate was fixed")
        s = wait_until(lambda: (lambda m: m if m and (val(
            m, "profleet_agent_exporter_confirmed_total", **bad) or 0) >= 1 else None)(
                self.metrics(mport)), timeout=15, interval=0.3, what="exporter/3 confirmed")
        self.assertEqual(val(s, "profleet_agent_exporter_failed_total", **bad), 0)
        self.assertEqual(val(s, "profleet_agent_exporter_dropped_total", **bad), 0)
        wait_until(lambda: comp("exporter/3:otlp_http", True), timeout=15,
                   what="exporter/3 healthy again")
        self.assertTrue(ag.proc.alive())

    def test_tls_settings(self):
        ca = os.path.join(self.certs, "ca1.pem")
        good = self.server(self.good)
        mtls = self.server(self.good, client_ca=ca)
        untrusted = self.server(self.untrusted)
        named = self.server(self.named)

        ctl = self.controller()
        mport = free_port()
        ag = self.start_agent(ctl, mport, ca_env=False)
        uid = ag.uid()

        def exporter(port, tls, path="/v1development/profiles"):
            return ("    - {type: otlp_http, endpoint: \"https://127.0.0.1:%d%s\", "
                    "timeout_seconds: 5, tls: {%s}}" % (port, path, tls))
        target = ("      - {url: \"http://127.0.0.1:%d/debug/pprof/heap\", type: heap, "
                  "interval_seconds: 1}" % self.pprof.port)
        cfg = "\n".join([
            "profiling:", "  pprof:", "    targets:", target, "  exporters:",
            exporter(good.port, "ca_file: \"%s\"" % ca, "/a"),
            exporter(mtls.port, "ca_file: \"%s\", cert_file: \"%s\", key_file: \"%s\""
                     % (ca, self.client[0], self.client[1]), "/mtls"),
            exporter(mtls.port, "ca_file: \"%s\"" % ca, "/no-client-cert"),
            exporter(untrusted.port, "insecure_skip_verify: true", "/insecure"),
            exporter(named.port, "ca_file: \"%s\", server_name: profleet.test" % ca, "/named"),
            ""])
        st, body, _ = ctl.put_config("default", cfg)
        self.assertEqual(st, 201, body)
        a = self.wait_agent(ctl, uid, "APPLIED")
        effective_before = a["config"]["effective_hash"]
        self.assertIn("insecure_skip_verify: true", a["config"]["effective"])
        self.assertIn("server_name: \"profleet.test\"", a["config"]["effective"])

        # (a) ca_file alone, no SSL_CERT_FILE; (b) mTLS with a client certificate;
        # (c) insecure_skip_verify; (d) server_name
        wait_until(lambda: good.posts("/a") and mtls.posts("/mtls") and
                   untrusted.posts("/insecure") and named.posts("/named"),
                   timeout=30, what="exports over ca_file, mTLS, insecure and server_name")
        with mtls.lock:
            self.assertIn("client", mtls.client_cns)
        with named.lock:
            self.assertIn("profleet.test", named.sni)
        for srv, p in ((good, "/a"), (mtls, "/mtls"), (untrusted, "/insecure"),
                       (named, "/named")):
            _, h, body = srv.posts(p)[0]
            self.assertEqual(h.get("Content-Encoding"), "gzip")
            self.assertGreater(len(gzip.decompress(body)), 100)

        # (b) without a client certificate the mTLS server refuses: unhealthy, and says why
        def comp(name):
            c = self.components(ctl, uid).get(name)
            return c if c and not c.get("healthy") and c.get("last_error") else None
        c = wait_until(lambda: comp("exporter/2:otlp_http"), timeout=20,
                       what="exporter/2 (no client certificate) unhealthy")
        self.assertIn("certificate required", c["last_error"])
        self.assertEqual(mtls.posts("/no-client-cert"), [])
        with mtls.lock:
            self.assertTrue(mtls.handshake_errors)
        for i in (0, 1, 3, 4):
            c = self.components(ctl, uid).get("exporter/%d:otlp_http" % i) or {}
            self.assertTrue(c.get("healthy"), (i, c))

        # (e) a ca_file that does not exist: FAILED with the key path, the old config stays
        missing = os.path.join(self.certs, "missing-ca.pem")
        bad = cfg.replace("ca_file: \"%s\", server_name" % ca,
                          "ca_file: \"%s\", server_name" % missing)
        bad = bad.replace("/named", "/named2")
        self.assertNotEqual(bad, cfg)
        st, body, _ = ctl.put_config("default", bad)
        self.assertEqual(st, 201, body)  # the shape is valid: only the agent can tell
        a = self.wait_agent(ctl, uid, "FAILED")
        self.assertIn("profiling.exporters[4].tls.ca_file: cannot load %s: "
                      "No such file or directory" % missing, a["config"]["error"])
        self.assertEqual(a["config"]["effective_hash"], effective_before)
        self.assertIn("/named\"", a["config"]["effective"])
        n = len(named.posts("/named"))
        wait_until(lambda: len(named.posts("/named")) > n, timeout=20,
                   what="the previous config still exporting")
        self.assertEqual(named.posts("/named2"), [])
        self.assertTrue(ag.proc.alive())

    def wait_agent(self, ctl, uid, status):
        def ok():
            a = self.agent_json(ctl, uid) or {}
            return a if (a.get("config") or {}).get("status") == status else None
        return wait_until(ok, timeout=20, what="config " + status)


if __name__ == "__main__":
    unittest.main()
