"""Exporter header secrets never leave: agent -> controller -> API, end to end.

The real controller and agent (--no-sampler; a pprof target served here makes the profiles).
A config holds an inline header secret (`headers`) and one read from a file on the agent's
host (`headers_from_file`); an OTLP/HTTP receiver run here on 127.0.0.1 records the requests.

Checked:
- both secrets reach the receiver as request headers (the file's content, trimmed);
- neither appears in the effective config the agent reports (GET /api/v1/agents/{uid} as
  admin and as viewer: the values are "[REDACTED]", the file path is shown), in the agents
  list, nor in the config view for a viewer token (GET /api/v1/configs/{name}), while an admin
  sees the document as stored;
- neither appears in the agent's or the controller's log (debug level);
- a headers_from_file that cannot be read fails the config (FAILED, the error names the key
  and the file, not the secret) and the previous config keeps exporting.
The viewer token is inserted into the store the way the controller stores tokens (SHA-256 of
the secret). Every wait is bounded.
"""
import hashlib
import http.server
import os
import sqlite3
import threading
import time
import unittest

from pfharness import IntegrationCase, read_text, wait_until
from test_agent_metrics import HEAP_PPROF, PprofServer, heap_config

INLINE = "inline-s3cr3t-7f2a"
FROM_FILE = "file-s3cr3t-91c4"


class Recorder:
    """A plain HTTP server recording every POST's path and headers; answers 200."""

    def __init__(self):
        self.requests = []
        self.lock = threading.Lock()
        outer = self

        class H(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                n = int(self.headers.get("Content-Length", "0"))
                self.rfile.read(n)
                with outer.lock:
                    outer.requests.append((self.path, dict(self.headers.items())))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *a):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
        self.port = self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def posts(self):
        with self.lock:
            return list(self.requests)

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class Secrets(IntegrationCase):
    def setUp(self):
        super().setUp()
        self.pprof = PprofServer(HEAP_PPROF)
        self.addCleanup(self.pprof.close)
        self.recv = Recorder()
        self.addCleanup(self.recv.close)

    def viewer_token(self, ctl):
        tok = "viewer-" + os.urandom(16).hex()
        db = sqlite3.connect(os.path.join(ctl.data_dir, "profleet.db"), timeout=10)
        with db:
            db.execute("INSERT INTO tokens (hash, role, name, created_ms) VALUES (?,?,?,?)",
                       (hashlib.sha256(tok.encode()).digest(), "viewer", "viewer",
                        int(time.time() * 1000)))
        db.close()
        return tok

    def config(self, key_file):
        return heap_config(self.pprof.port, [
            "    - type: otlp_http",
            "      endpoint: \"http://127.0.0.1:%d/v1development/profiles\"" % self.recv.port,
            "      timeout_seconds: 5",
            "      headers: {X-Api-Key: \"%s\"}" % INLINE,
            "      headers_from_file: {X-File-Key: \"%s\"}" % key_file])

    def test_secrets_end_to_end(self):
        key_file = os.path.join(self.workdir, "key.txt")
        with open(key_file, "w") as f:
            f.write("  %s\n" % FROM_FILE)
        ctl = self.controller()
        viewer = self.viewer_token(ctl)
        ag = self.agent(ctl, "sec", extra=["--no-sampler"])
        uid = ag.uid()
        st, body, _ = ctl.put_config("default", self.config(key_file))
        self.assertEqual(st, 201, body)

        def applied():
            a = self.agent_json(ctl, uid) or {}
            return a if (a.get("config") or {}).get("status") == "APPLIED" else None
        wait_until(applied, timeout=20, what="config APPLIED")

        # The secrets are sent where they belong.
        posts = wait_until(self.recv.posts, timeout=20, what="an OTLP request")
        h = posts[0][1]
        self.assertEqual(h.get("X-Api-Key"), INLINE)
        self.assertEqual(h.get("X-File-Key"), FROM_FILE)

        # ... and shown nowhere else.
        def effective(token):
            st, a, _ = ctl.request("GET", "/api/v1/agents/" + uid, token=token)
            self.assertEqual(st, 200, a)
            return a["config"]["effective"]
        wait_until(lambda: "X-Api-Key" in (effective("admin") or ""), timeout=10,
                   what="the effective config with the exporter")
        for tok in ("admin", viewer):
            eff = effective(tok)
            self.assertNotIn(INLINE, eff)
            self.assertNotIn(FROM_FILE, eff)
            self.assertIn('"X-Api-Key": "[REDACTED]"', eff)
            self.assertIn('"X-File-Key": "%s"' % key_file, eff)
        for tok in ("admin", viewer):
            st, lst, _ = ctl.request("GET", "/api/v1/agents", token=tok)
            self.assertEqual(st, 200)
            self.assertNotIn(INLINE, str(lst))
        st, cv, _ = ctl.request("GET", "/api/v1/configs/default", token=viewer)
        self.assertEqual(st, 200, cv)
        self.assertNotIn(INLINE, cv["body"])
        self.assertIn("[REDACTED]", cv["body"])
        st, cv, _ = ctl.request("GET", "/api/v1/configs/default")
        self.assertIn(INLINE, cv["body"])  # admin: as stored
        for log in ("agent-sec.log", "controller.log"):
            text = read_text(os.path.join(self.workdir, log))
            self.assertNotIn(INLINE, text, log)
            self.assertNotIn(FROM_FILE, text, log)

        # A file that cannot be read fails the config; the previous one keeps exporting.
        missing = os.path.join(self.workdir, "missing.txt")
        st, body, _ = ctl.put_config("default", self.config(missing))
        self.assertEqual(st, 201, body)

        def failed():
            a = self.agent_json(ctl, uid) or {}
            c = a.get("config") or {}
            return c if c.get("status") == "FAILED" else None
        c = wait_until(failed, timeout=20, what="config FAILED")
        self.assertIn("headers_from_file", c["error"])
        self.assertIn(missing, c["error"])
        self.assertIn("No such file", c["error"])
        n = len(self.recv.posts())
        wait_until(lambda: len(self.recv.posts()) > n, timeout=20,
                   what="the previous config still exporting")
        self.assertEqual(self.recv.posts()[-1][1].get("X-File-Key"), FROM_FILE)


if __name__ == "__main__":
    unittest.main()
