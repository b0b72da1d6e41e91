"""The controller binds exactly the address it is given (--listen, and --agent-listen for the
mTLS agent listener), and so does the agent (--metrics-listen), checked with `ss -ltn`.

libwebsockets opens a dual-stack IPv6 socket unless IPv6 is disabled on the vhost, so an IPv4
address given to --listen used to answer on every address of the host (`*:PORT`).
"""
import os
import shutil
import socket
import subprocess
import tempfile
import unittest

from pfharness import AGENT_BIN, CONTROLLER_BIN, Proc, free_port, wait_until
from test_export_tls import OPENSSL, make_ca, make_server_cert


def listeners(port):
    """Local addresses (as ss prints them) of TCP sockets listening on port."""
    out = subprocess.run(["ss", "-ltnH", "sport = :%d" % port], check=True,
                         capture_output=True, text=True, timeout=10).stdout
    found = []
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 4:
            found.append(cols[3])
    return found


def connects(family, addr, port):
    try:
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.settimeout(1)
            s.connect((addr, port))
            return True
    except OSError:
        return False


def has_ipv6_loopback():
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
            return True
    except OSError:
        return False


@unittest.skipUnless(shutil.which("ss"), "ss (iproute2) is not installed")
class ListenTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="pf-listen-")
        self.proc = None

    def tearDown(self):
        if self.proc:
            self.proc.stop()
        shutil.rmtree(self.tmp, ignore_errors=True)

    def start(self, listen, port, extra=(), argv=None, what="controller"):
        data = os.path.join(self.tmp, "data-%d" % port)
        if argv is None:
            argv = [CONTROLLER_BIN, "--listen", listen, "--data-dir", data] + list(extra)
        self.proc = Proc(argv, os.path.join(self.tmp, "%s-%d.log" % (what, port)))
        wait_until(lambda: listeners(port) or (not self.proc.alive() and
                                                self.fail(what + " exited:\n" +
                                                          self.proc.output())),
                   timeout=15, what="the %s's listener on port %d" % (what, port))
        return listeners(port)

    @unittest.skipUnless(OPENSSL, "needs the openssl command")
    def test_agent_listener_is_loopback_only(self):
        make_ca(self.tmp, "ca")
        crt, key = make_server_cert(self.tmp, "server", "ca", "IP:127.0.0.1")
        port, aport = free_port(), free_port()
        self.start("127.0.0.1:%d" % port, port,
                   ["--tls-cert", crt, "--tls-key", key, "--client-ca",
                    os.path.join(self.tmp, "ca.pem"), "--agent-listen", "127.0.0.1:%d" % aport])
        self.assertEqual(listeners(port), ["127.0.0.1:%d" % port])
        self.assertEqual(listeners(aport), ["127.0.0.1:%d" % aport])
        if has_ipv6_loopback():
            self.assertFalse(connects(socket.AF_INET6, "::1", aport))

    def test_agent_metrics_listener_is_loopback_only(self):
        port = free_port()
        argv = [AGENT_BIN, "--no-sampler", "--state-dir", os.path.join(self.tmp, "agent"),
                "--server", "ws://127.0.0.1:%d/v1/opamp" % free_port(),
                "--metrics-listen", "127.0.0.1:%d" % port]
        self.assertEqual(self.start(None, port, argv=argv, what="agent"),
                         ["127.0.0.1:%d" % port])
        if has_ipv6_loopback():
            self.assertFalse(connects(socket.AF_INET6, "::1", port))

    def test_ipv4_loopback_is_loopback_only(self):
        port = free_port()
        self.assertEqual(self.start("127.0.0.1:%d" % port, port), ["127.0.0.1:%d" % port])
        self.assertTrue(connects(socket.AF_INET, "127.0.0.1", port))
        if has_ipv6_loopback():
            self.assertFalse(connects(socket.AF_INET6, "::1", port))

    def test_localhost_means_ipv4_loopback(self):
        port = free_port()
        self.assertEqual(self.start("localhost:%d" % port, port), ["127.0.0.1:%d" % port])

    def test_ipv4_any_is_ipv4_only(self):
        port = free_port()
        self.assertEqual(self.start("0.0.0.0:%d" % port, port), ["0.0.0.0:%d" % port])

    @unittest.skipUnless(has_ipv6_loopback(), "no IPv6 loopback on this host")
    def test_ipv6_loopback_is_loopback_only(self):
        port = free_port()
        self.assertEqual(self.start("[::1]:%d" % port, port), ["[::1]:%d" % port])
        self.assertFalse(connects(socket.AF_INET, "127.0.0.1", port))

    @unittest.skipUnless(has_ipv6_loopback(), "no IPv6 loopback on this host")
    def test_ipv6_any_is_dual_stack(self):
        port = free_port()
        got = self.start("[::]:%d" % port, port)
        self.assertEqual(len(got), 1, got)
        self.assertIn(got[0], ("*:%d" % port, "[::]:%d" % port))
        self.assertTrue(connects(socket.AF_INET, "127.0.0.1", port))
        self.assertTrue(connects(socket.AF_INET6, "::1", port))


if __name__ == "__main__":
    unittest.main()
