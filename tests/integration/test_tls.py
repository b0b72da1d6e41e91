"""The controller's TLS listeners and the agent's TLS side, with certificates made here.

The test makes two throw-away CAs with the `openssl` command: a server certificate for
IP:127.0.0.1 (and a second one, for the reload) and a client certificate from the first CA,
and a client certificate from the second CA.

Checked:
- policy: TLS 1.3 is negotiated when the client can; TLS 1.2 works with an ECDHE AEAD suite;
  TLS 1.1 and 1.0 are refused even by a client that offers them (SECLEVEL=0); the TLS 1.2
  suites without forward secrecy or AEAD (AES128-SHA, AES256-GCM-SHA384) are refused; plain
  HTTP to the TLS port gets no HTTP answer; a client that trusts only the other CA refuses
  the server.
- SIGHUP: after the files are replaced by a new certificate, new handshakes get it while a
  keep-alive connection opened before goes on answering; a mismatched certificate and key
  are refused with an error in the log and the previous certificate stays.
- mTLS (--client-ca with --agent-listen): the main listener asks no client certificate (no
  CertificateRequest, browsers reach /readyz and the API); the agent listener answers with
  the right client certificate and refuses none or one from the other CA; a real agent with
  --client-cert/--client-key connects there over wss:// and one without does not;
  --client-ca without --agent-listen is refused at start.
- the agent verifies the controller (--ca-file): a certificate from another CA, or from its
  CA for another address, is refused and the agent never connects;
- the agent refuses, at start, to send its token over ws:// to a non-loopback host
  (192.0.2.1, never contacted) and says how to proceed.
Every wait is bounded.
"""
import os
import shutil
import signal
import socket
import ssl
import subprocess
import unittest

from pfharness import (AGENT_BIN, CONTROLLER_BIN, IntegrationCase, free_port, plain_http_reply,
                       wait_until)
from test_export_tls import OPENSSL, make_ca, make_server_cert


def s_client(port, *args, stdin=b"", timeout=20):
    """openssl s_client against 127.0.0.1:port; (exit code, output)."""
    r = subprocess.run([OPENSSL, "s_client", "-connect", "127.0.0.1:%d" % port] + list(args),
                       input=stdin, capture_output=True, timeout=timeout)
    return r.returncode, (r.stdout + r.stderr).decode(errors="replace")


def https_get(port, path, ca, cert=None, timeout=5):
    """GET over TLS with a fresh connection; the HTTP status line, or raises on TLS errors."""
    ctx = ssl.create_default_context(cafile=ca)
    if cert:
        ctx.load_cert_chain(cert[0], cert[1])
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            s.sendall(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % path).encode())
            data = s.recv(4096)
            if not data:
                raise ConnectionError("closed without an answer")
            return data.split(b"\r\n", 1)[0].decode()


def read_answer(s, want=b"ready"):
    """Reads from s until want arrived (bounded: 16 reads, the socket's timeout each)."""
    data = b""
    for _ in range(16):
        if want in data:
            break
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    return data


def peer_cn(port, ca):
    ctx = ssl.create_default_context(cafile=ca)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            return dict(x[0] for x in s.getpeercert()["subject"])["commonName"]


@unittest.skipUnless(OPENSSL, "needs the openssl command")
class TLS(IntegrationCase):
    def setUp(self):
        super().setUp()
        d = self.workdir
        make_ca(d, "ca")
        make_ca(d, "otherca")
        self.ca = os.path.join(d, "ca.pem")
        self.otherca = os.path.join(d, "otherca.pem")
        self.srv = make_server_cert(d, "server", "ca", "IP:127.0.0.1")
        self.srv2 = make_server_cert(d, "server2", "ca", "IP:127.0.0.1")
        self.client = make_server_cert(d, "client", "ca", "DNS:agent-1", eku="clientAuth")
        self.badclient = make_server_cert(d, "badclient", "otherca", "DNS:agent-1",
                                          eku="clientAuth")
        # The controller reads its certificate from these paths (replaced for the reload).
        self.crt = os.path.join(d, "tls.crt")
        self.key = os.path.join(d, "tls.key")
        shutil.copy(self.srv[0], self.crt)
        shutil.copy(self.srv[1], self.key)

    def tls_controller(self, extra=()):
        return self.controller(extra=["--tls-cert", self.crt, "--tls-key", self.key] +
                               list(extra), tls_ca=self.ca)

    def test_policy(self):
        ctl = self.tls_controller()
        p = ctl.port
        rc, out = s_client(p, "-CAfile", self.ca)
        self.assertEqual(rc, 0, out)
        self.assertIn("TLSv1.3", out)
        self.assertIn("Verify return code: 0 (ok)", out)
        rc, out = s_client(p, "-tls1_2", "-CAfile", self.ca)
        self.assertEqual(rc, 0, out)
        self.assertRegex(out, r"Cipher is ECDHE-ECDSA-(AES(128|256)-GCM-SHA(256|384)|CHACHA20)")
        for old in ("-tls1_1", "-tls1"):
            rc, out = s_client(p, old, "-cipher", "DEFAULT@SECLEVEL=0")
            self.assertNotEqual(rc, 0, out)
            self.assertIn("Cipher is (NONE)", out, out)
        for weak in ("AES128-SHA", "AES256-GCM-SHA384", "ECDHE-ECDSA-AES128-SHA"):
            rc, out = s_client(p, "-tls1_2", "-cipher", weak)
            self.assertNotEqual(rc, 0, out)
            self.assertIn("Cipher is (NONE)", out, weak + ": " + out)
        # The client trusts another CA: verification fails.
        with self.assertRaises(ssl.SSLCertVerificationError):
            https_get(p, "/readyz", self.otherca)
        # Plain HTTP to the TLS port gets no HTTP answer.
        data = plain_http_reply(p)
        self.assertFalse(data.startswith(b"HTTP/"), data)
        self.assertTrue(https_get(p, "/readyz", self.ca).endswith("200 OK"))

    def test_sighup_reload(self):
        ctl = self.tls_controller()
        p = ctl.port
        self.assertEqual(peer_cn(p, self.ca), "server")
        # A keep-alive connection opened before the reload.
        ctx = ssl.create_default_context(cafile=self.ca)
        raw = socket.create_connection(("127.0.0.1", p), timeout=5)
        old = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
        self.addCleanup(old.close)
        req = b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        old.sendall(req)
        self.assertIn(b" 200 ", read_answer(old))

        shutil.copy(self.srv2[0], self.crt)
        shutil.copy(self.srv2[1], self.key)
        ctl.proc.p.send_signal(signal.SIGHUP)
        wait_until(lambda: peer_cn(p, self.ca) == "server2", timeout=10,
                   what="the reloaded certificate on new handshakes")
        self.assertIn("TLS certificate reloaded", ctl.proc.output())
        old.sendall(req)
        self.assertIn(b" 200 ", read_answer(old))
        self.assertTrue(ctl.proc.alive())

        # A key that does not match: refused, the previous pair stays.
        shutil.copy(self.srv[1], self.key)
        ctl.proc.p.send_signal(signal.SIGHUP)
        wait_until(lambda: "TLS reload failed" in ctl.proc.output(), timeout=10,
                   what="the failed reload in the log")
        self.assertIn("key values mismatch", ctl.proc.output())
        self.assertEqual(peer_cn(p, self.ca), "server2")

    def test_mtls_agent_listener(self):
        ap = free_port()
        ctl = self.tls_controller(["--client-ca", self.ca, "--agent-listen", "127.0.0.1:%d" % ap])
        wait_until(lambda: "agent listener on https://127.0.0.1:%d" % ap in ctl.proc.output(),
                   timeout=10, what="agent listener")
        # The main listener asks no client certificate: a browser gets the console and API.
        rc, out = s_client(ctl.port, "-CAfile", self.ca, "-tls1_2")
        self.assertEqual(rc, 0, out)
        self.assertNotIn("Client Certificate Types", out)
        self.assertTrue(https_get(ctl.port, "/readyz", self.ca).endswith("200 OK"))
        st, _, _ = ctl.request("GET", "/api/v1/fleet/summary")
        self.assertEqual(st, 200)
        # The agent listener asks for one and takes only the right one.
        rc, out = s_client(ap, "-CAfile", self.ca, "-tls1_2", "-cert", self.client[0], "-key",
                           self.client[1])
        self.assertIn("Client Certificate Types", out)
        self.assertIn("Acceptable client certificate CA names\nCN = profleet test ca", out)
        self.assertTrue(https_get(ap, "/readyz", self.ca, self.client).endswith("200 OK"))
        for cert in (None, self.badclient):
            with self.assertRaises((ssl.SSLError, ConnectionError, OSError)):
                https_get(ap, "/readyz", self.ca, cert)

        url = "wss://127.0.0.1:%d/v1/opamp" % ap
        good = self.agent(ctl, "mtls", server=url, extra=[
            "--ca-file", self.ca, "--client-cert", self.client[0], "--client-key",
            self.client[1], "--no-sampler"])
        uid = good.uid()
        wait_until(lambda: (self.agent_json(ctl, uid) or {}).get("connected"), timeout=15,
                   what="agent connected over mTLS")
        bad = self.agent(ctl, "nocert", server=url, extra=["--ca-file", self.ca, "--no-sampler"])
        buid = bad.uid()
        wait_until(lambda: "cannot connect" in bad.proc.output(), timeout=15,
                   what="agent without a client certificate refused")
        self.assertIsNone(self.agent_json(ctl, buid))

    def test_agent_verifies_server(self):
        """A server certificate from a CA the agent does not trust, then one from the trusted
        CA for another address: refused both times, never connected."""
        ctl = self.tls_controller()
        url = "wss://127.0.0.1:%d/v1/opamp" % ctl.port

        def refused(name, ca):
            ag = self.agent(ctl, name, server=url, extra=["--ca-file", ca, "--no-sampler"])
            wait_until(lambda: "cannot connect" in ag.proc.output(), timeout=15,
                       what=name + ": the agent refuses the server")
            self.assertNotIn("opamp: connected", ag.proc.output())
            ag.stop()

        def serve(pair, n):
            shutil.copy(pair[0], self.crt)
            shutil.copy(pair[1], self.key)
            ctl.proc.p.send_signal(signal.SIGHUP)
            wait_until(lambda: ctl.proc.output().count("TLS certificate reloaded") == n,
                       timeout=10, what="reload %d" % n)

        refused("wrongca", self.otherca)
        serve(make_server_cert(self.workdir, "otherip", "ca", "IP:127.0.0.2"), 1)
        refused("wrongname", self.ca)
        serve(self.srv, 2)
        self.assertEqual(ctl.summary()["agents"], 0)

    def test_client_ca_needs_agent_listener(self):
        r = subprocess.run([CONTROLLER_BIN, "--listen", "127.0.0.1:%d" % free_port(),
                            "--data-dir", os.path.join(self.workdir, "d"), "--tls-cert",
                            self.crt, "--tls-key", self.key, "--client-ca", self.ca],
                           capture_output=True, timeout=20)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(b"--client-ca and --agent-listen go together", r.stderr)
        r = subprocess.run([CONTROLLER_BIN, "--agent-listen", "127.0.0.1"], capture_output=True,
                           timeout=20)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(b"tls.agent_listen: expected HOST:PORT, got '127.0.0.1'", r.stderr)

    def test_agent_refuses_plaintext_token(self):
        tok = os.path.join(self.workdir, "agent.token")
        with open(tok, "w") as f:
            f.write("not-a-real-token\n")
        r = subprocess.run([AGENT_BIN, "--server", "ws://192.0.2.1:4320/v1/opamp",
                            "--token-file", tok, "--no-sampler", "--state-dir",
                            os.path.join(self.workdir, "a")], capture_output=True, timeout=20)
        self.assertEqual(r.returncode, 2, r.stderr)
        err = r.stderr.decode()
        self.assertIn("refusing to send the agent token in plain text to 192.0.2.1", err)
        self.assertIn("--allow-insecure", err)
        self.assertNotIn("not-a-real-token", err + r.stdout.decode())


if __name__ == "__main__":
    unittest.main()
