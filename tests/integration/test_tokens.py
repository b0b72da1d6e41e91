"""Tokens, roles, audit and client-controlled limits against the real controller on loopback.

Token management over HTTP (create, list without secrets, revoke, expiry), a revoked agent
credential disconnecting a real agent's OpAMP WebSocket within a second (its enrollment token
revoked leaves it connected), an expired shared token closing the connection of a client that
keeps it, --token-file-dir, the audit query, and the limits of docs/limits.md at the limit and
one past it.
"""
import base64
import gzip
import json
import os
import socket
import time
import unittest

from pfharness import IntegrationCase, wait_until
from test_conn_limits import ws_frame


def raw_http(port, request, timeout=5.0):
    """Sends raw bytes; returns (status or 0 when the server closed without an answer, text)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        try:
            s.sendall(request)
        except (BrokenPipeError, ConnectionResetError):
            pass  # a refusal (413, 400) may answer and close before the whole body is sent
        data = b""
        try:
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
                head, sep, body = data.partition(b"\r\n\r\n")
                if sep:
                    cl = [l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
                    if cl and len(body) >= int(cl[0].split(b":")[1]):
                        break
        except (ConnectionResetError, socket.timeout):
            pass
    text = data.decode(errors="replace")
    return (int(text.split(" ")[1]) if text.startswith("HTTP/") else 0), text


class TokensTest(IntegrationCase):
    def create(self, ctl, name, role, expires_in=None, token="admin"):
        body = {"name": name, "role": role}
        if expires_in is not None:
            body["expires_in"] = expires_in
        st, j, _ = ctl.request("POST", "/api/v1/tokens", json.dumps(body), token=token)
        self.assertEqual(st, 201, j)
        return j

    def test_create_list_revoke_and_audit(self):
        ctl = self.controller()
        t = self.create(ctl, "oncall", "operator")
        secret = t["token"]
        self.assertEqual(ctl.request("GET", "/api/v1/agents", token=secret)[0], 200)
        # operator: captures yes, configs and tokens no
        self.assertEqual(ctl.request("PUT", "/api/v1/configs/x", "profiling: {}\n",
                                     token=secret)[0], 403)
        self.assertEqual(ctl.request("GET", "/api/v1/tokens", token=secret)[0], 403)
        st, j, _ = ctl.request("GET", "/api/v1/tokens")
        self.assertEqual(st, 200)
        self.assertNotIn(secret, json.dumps(j))
        mine = [x for x in j["tokens"] if x["id"] == t["id"]]
        self.assertEqual(len(mine), 1)
        self.assertEqual(mine[0]["created_by"], "bootstrap admin")
        self.assertIsNotNone(mine[0]["last_used"])
        # revoke: the next call fails at once
        st, j, _ = ctl.request("DELETE", "/api/v1/tokens/" + t["id"])
        self.assertEqual(st, 200, j)
        st, j, _ = ctl.request("GET", "/api/v1/agents", token=secret)
        self.assertEqual(st, 401)
        # the audit log names the token, the source and the outcome
        st, j, _ = ctl.request("GET", "/api/v1/audit?action=token&limit=10")
        self.assertEqual(st, 200, j)
        acts = [(e["action"], e["actor"], e["source"], e["status"]) for e in j["entries"]]
        self.assertEqual(acts, [("token.revoke", "bootstrap admin", "127.0.0.1", 200),
                                ("token.create", "bootstrap admin", "127.0.0.1", 201)])
        st, j, _ = ctl.request("GET", "/api/v1/audit?actor=oncall")
        self.assertEqual([(e["action"], e["status"]) for e in j["entries"]],
                         [("config.put", 403)])
        self.assertEqual(ctl.request("GET", "/api/v1/audit", token=None)[0], 401)

    def test_expiry(self):
        ctl = self.controller()
        t = self.create(ctl, "short", "viewer", expires_in=1)
        self.assertEqual(ctl.request("GET", "/api/v1/agents", token=t["token"])[0], 200)
        wait_until(lambda: ctl.request("GET", "/api/v1/agents", token=t["token"])[0] == 401,
                   timeout=5, what="the token to expire")
        st, j, _ = ctl.request("GET", "/api/v1/agents", token=t["token"])
        self.assertIn("expired", j["error"]["message"])

    def agent_connected(self, ctl, uid):
        j = self.agent_json(ctl, uid)
        return j is not None and j.get("connected")

    def test_expired_agent_token_disconnects(self):
        ctl = self.controller()
        t = self.create(ctl, "short-agent", "agent", expires_in=4)
        # an OpAMP agent that does not accept connection settings (as opamp-go's) keeps the
        # shared token: its open WebSocket is closed when the token expires
        st, ws = ws_open(ctl.port, t["token"])
        self.assertEqual(st, 101)
        self.addCleanup(ws.close)
        uid = os.urandom(16)
        ws.sendall(ws_frame(b"\x0a\x10" + uid + b"\x10\x00\x20\x01"))
        name = "%s-%s-%s-%s-%s" % tuple(uid.hex()[a:b] for a, b in
                                          ((0, 8), (8, 12), (12, 16), (16, 20), (20, 32)))
        wait_until(lambda: self.agent_connected(ctl, name), timeout=15, what="client connected")
        # a profleet agent enrolled with it has its own credential by then and stays
        tf = os.path.join(self.workdir, "short.token")
        with open(tf, "w") as f:
            f.write(t["token"] + "\n")
        os.chmod(tf, 0o600)
        a = self.agent(ctl, "a1", token_file=tf, extra=["--no-sampler"])
        auid = a.uid()
        wait_until(lambda: (self.agent_json(ctl, auid) or {}).get("credential") == "own",
                   timeout=15, what="agent on its own credential")
        wait_until(lambda: "token expired" in ctl.proc.output(), timeout=10,
                   what="the controller closing the connection of the expired token")
        wait_until(lambda: not self.agent_connected(ctl, name), timeout=10,
                   what="the client shown disconnected")
        self.assertTrue(self.agent_connected(ctl, auid))

    def test_revoked_agent_token_disconnects(self):
        ctl = self.controller()
        t = self.create(ctl, "rack-7", "agent")
        tf = os.path.join(self.workdir, "rack7.token")
        with open(tf, "w") as f:
            f.write(t["token"] + "\n")
        os.chmod(tf, 0o600)
        a = self.agent(ctl, "a1", token_file=tf, extra=["--no-sampler"])
        uid = a.uid()
        wait_until(lambda: (self.agent_json(ctl, uid) or {}).get("credential") == "own",
                   timeout=15, what="agent connected on its own credential")
        # its use by OpAMP (the enrollment) shows in the list
        st, j, _ = ctl.request("GET", "/api/v1/tokens")
        self.assertIsNotNone([x for x in j["tokens"] if x["id"] == t["id"]][0]["last_used"])
        # an agent token is not an API token
        self.assertEqual(ctl.request("GET", "/api/v1/agents", token=t["token"])[0], 403)
        # the enrollment token goes: the enrolled agent stays
        st, j, _ = ctl.request("DELETE", "/api/v1/tokens/" + t["id"])
        self.assertEqual(st, 200, j)
        self.assertTrue(self.agent_connected(ctl, uid))
        # its own credential goes: its connection closes at once
        t0 = time.monotonic()
        st, j, _ = ctl.request("DELETE", "/api/v1/agents/%s/credential" % uid)
        self.assertEqual(st, 200, j)
        wait_until(lambda: not self.agent_connected(ctl, uid), timeout=1.0,
                   what="the agent's connection to close after revocation")
        took = time.monotonic() - t0
        print("revoked agent credential: disconnected after %.0f ms" % (took * 1000))
        # it retries and is refused at the upgrade
        def rejected():
            st, body, _ = ctl.request("GET", "/metrics", token=None, raw=True)
            for line in body.decode().splitlines():
                if line.startswith("profleet_opamp_connections_rejected_auth_total"):
                    return float(line.split()[1]) >= 1
            return False
        wait_until(rejected, timeout=20, what="the agent's retry refused (401)")
        self.assertFalse(self.agent_connected(ctl, uid))

    def test_token_file_dir(self):
        d = os.path.join(self.workdir, "tokens")
        os.makedirs(d)
        sec = "ci-secret-0123456789abcdef"
        with open(os.path.join(d, "ci"), "w") as f:
            f.write("operator:" + sec + "\n")
        with open(os.path.join(d, ".hidden"), "w") as f:
            f.write("garbage")
        # the admin and agent tokens come from the directory too; the harness reads them
        # from the data dir, where the controller writes none when tokens exist
        data = os.path.join(self.workdir, "controller-data")
        os.makedirs(data)
        for role in ("admin", "agent"):
            s = "%s-secret-from-the-dir-0123456789" % role
            with open(os.path.join(d, role), "w") as f:
                f.write("%s:%s\n" % (role, s))
            with open(os.path.join(data, role + ".token"), "w") as f:
                f.write(s)
        ctl = self.controller(extra=["--token-file-dir", d])
        self.assertEqual(ctl.request("GET", "/api/v1/agents", token=sec)[0], 200)
        st, j, _ = ctl.request("GET", "/api/v1/tokens")
        ci = [x for x in j["tokens"] if x["name"] == "ci"]
        self.assertEqual((len(ci), ci[0]["role"], ci[0]["created_by"]),
                         (1, "operator", "token-file-dir"))
        # a new secret replaces it; a file gone revokes it
        ctl.stop()
        sec2 = "ci-secret-rotated-0123456789"
        with open(os.path.join(d, "ci"), "w") as f:
            f.write("operator:" + sec2)
        ctl.start()
        self.assertEqual(ctl.request("GET", "/api/v1/agents", token=sec)[0], 401)
        self.assertEqual(ctl.request("GET", "/api/v1/agents", token=sec2)[0], 200)
        ctl.stop()
        os.unlink(os.path.join(d, "ci"))
        ctl.start()
        self.assertEqual(ctl.request("GET", "/api/v1/agents", token=sec2)[0], 401)
        # a bad file stops the start, naming the key
        with open(os.path.join(d, "bad"), "w") as f:
            f.write("root:" + sec)
        ctl.stop()
        with self.assertRaises(AssertionError) as cm:
            ctl.start()
        self.assertIn("tokens.file_dir", str(cm.exception))


def ws_open(port, token):
    """An upgraded OpAMP WebSocket left open: (status, socket or None)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(("GET /v1/opamp HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n"
               "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
               "Authorization: Bearer %s\r\n\r\n" % (key, token)).encode())
    data = b""
    while b"\r\n\r\n" not in data and len(data) < 65536:
        chunk = s.recv(4096)
        if not chunk:
            break
        data += chunk
    st = int(data.split(b" ")[1]) if data.startswith(b"HTTP/") else 0
    if st != 101:
        s.close()
        return st, None
    return st, s


class LimitsTest(IntegrationCase):
    MAX_MSG = 1 << 16
    PER_SOURCE = 3

    def setUp(self):
        super().setUp()
        self.ctl = self.controller(extra=["--max-message-bytes", str(self.MAX_MSG),
                                          "--max-connections-per-source",
                                          str(self.PER_SOURCE)])
        self.port = self.ctl.port
        self.auth = "Authorization: Bearer %s\r\n" % self.ctl.admin_token

    def req(self, head, body=b""):
        return raw_http(self.port, head.encode() + body)

    def test_content_length(self):
        st, _ = self.req("PUT /api/v1/configs/x HTTP/1.1\r\nHost: x\r\n%sContent-Length: -1"
                         "\r\n\r\n" % self.auth)
        self.assertEqual(st, 400)
        st, _ = self.req("PUT /api/v1/configs/x HTTP/1.1\r\nHost: x\r\n%sContent-Length: +5"
                         "\r\n\r\n" % self.auth)
        self.assertEqual(st, 400)

    def test_api_body(self):
        limit = 1 << 20  # PF_API_MAX_BODY
        for n, want_413 in ((limit, False), (limit + 1, True)):
            body = b"#" * n
            st, text = self.req("PUT /api/v1/configs/big HTTP/1.1\r\nHost: x\r\n%s"
                                "Content-Length: %d\r\n\r\n" % (self.auth, n), body)
            self.assertEqual(st == 413, want_413, (n, st, text[-200:]))

    def test_opamp_body_and_encoding(self):
        agent = "Authorization: Bearer %s\r\n" % self.ctl.agent_token
        for n, want in ((self.MAX_MSG, 200), (self.MAX_MSG + 1, 413)):
            st, _ = self.req("POST /v1/opamp HTTP/1.1\r\nHost: x\r\n%sContent-Type: "
                             "application/x-protobuf\r\nContent-Length: %d\r\n\r\n" % (agent, n),
                             b"\x00" * n)
            self.assertEqual(st, want, n)
        # the same limit on the decompressed bytes of a gzip body
        for n, want in ((self.MAX_MSG, 200), (self.MAX_MSG + 1, 413)):
            z = gzip.compress(b"\x00" * n)
            st, _ = self.req("POST /v1/opamp HTTP/1.1\r\nHost: x\r\n%sContent-Type: "
                             "application/x-protobuf\r\nContent-Encoding: gzip\r\n"
                             "Content-Length: %d\r\n\r\n" % (agent, len(z)), z)
            self.assertEqual(st, want, ("gzip", n))
        st, text = self.req("POST /v1development/profiles HTTP/1.1\r\nHost: x\r\n%s"
                            "Content-Type: application/x-protobuf\r\nContent-Encoding: br\r\n"
                            "Content-Length: 3\r\n\r\n" % agent, b"abc")
        self.assertEqual(st, 415, text)
        st, _ = self.req("PUT /api/v1/assignments/a HTTP/1.1\r\nHost: x\r\n%s"
                         "Content-Encoding: gzip\r\nContent-Length: 2\r\n\r\n" % self.auth, b"{}")
        self.assertEqual(st, 415)

    def test_nul_in_path(self):
        st, text = self.req("GET /api/v1/agents/%%00x HTTP/1.1\r\nHost: x\r\n%s\r\n" % self.auth)
        self.assertEqual(st, 400, text)
        # where lws' own URI parser refuses the %00 it closes without an answer: never a route
        st, text = self.req("GET /api/v1/agents%%00 HTTP/1.1\r\nHost: x\r\n%s\r\n" % self.auth)
        self.assertIn(st, (0, 400), text)

    def test_selector(self):
        # assignment selectors: 1023 bytes stored, 1024 refused; errors say "selector:" once
        self.assertEqual(self.ctl.put_config("c", "profiling: {}\n")[0], 201)
        ok = "a=" + "x" * 1021
        st, j, _ = self.ctl.request("PUT", "/api/v1/assignments/a1",
                                    json.dumps({"config": "c", "selector": ok}))
        self.assertEqual(st, 200, j)
        st, j, _ = self.ctl.request("PUT", "/api/v1/assignments/a1",
                                    json.dumps({"config": "c", "selector": ok + "x"}))
        self.assertEqual(st, 400, j)
        st, j, _ = self.ctl.request("PUT", "/api/v1/assignments/a1",
                                    json.dumps({"config": "c", "selector": "a in ("}))
        self.assertEqual(st, 400)
        self.assertTrue(j["error"]["message"].startswith("selector: "), j)
        self.assertNotIn("selector: selector:", j["error"]["message"])

    def test_connections_per_source(self):
        socks = []
        try:
            for _ in range(self.PER_SOURCE):
                st, s = ws_open(self.port, self.ctl.agent_token)
                self.assertEqual(st, 101)
                socks.append(s)
            st, _ = ws_open(self.port, self.ctl.agent_token)
            self.assertEqual(st, 429)
            socks.pop().close()
            def reopened():
                st, s = ws_open(self.port, self.ctl.agent_token)
                if s:
                    socks.append(s)
                return st == 101
            wait_until(reopened, timeout=5, what="a slot freed by a closed connection")
        finally:
            for s in socks:
                s.close()

    def test_max_agents(self):
        ctl = self.controller(extra=["--max-agents", "2", "--max-connections-per-source", "0"])
        socks = []
        try:
            for _ in range(2):
                st, s = ws_open(ctl.port, ctl.agent_token)
                self.assertEqual(st, 101)
                socks.append(s)
            self.assertEqual(ws_open(ctl.port, ctl.agent_token)[0], 503)
        finally:
            for s in socks:
                s.close()

    def test_path_length(self):
        # the path is kept whole (511 bytes) or refused: a cut path could name another route
        base = "/api/v1/agents/"
        for n, want in ((511, 404), (512, 414)):
            path = base + "x" * (n - len(base))
            st, text = self.req("GET %s HTTP/1.1\r\nHost: x\r\n%s\r\n" % (path, self.auth))
            self.assertEqual(st, want, (n, text[-200:]))

    def test_header_size(self):
        # lws keeps at most 4096 bytes of header data per request; past that it closes the
        # connection without an answer (no 414/431 hook in lws 4.1): documented
        st, _ = self.req("GET /api/v1/agents HTTP/1.1\r\nHost: x\r\n%sX-Pad: %s\r\n\r\n"
                         % (self.auth, "p" * 2000))
        self.assertEqual(st, 200)
        st, _ = self.req("GET /api/v1/agents HTTP/1.1\r\nHost: x\r\n%sX-Pad: %s\r\n\r\n"
                         % (self.auth, "p" * 5000))
        self.assertEqual(st, 0)
        st, _ = self.req("GET /api/v1/agents?x=%s HTTP/1.1\r\nHost: x\r\n%s\r\n"
                         % ("u" * 5000, self.auth))
        self.assertEqual(st, 0)


if __name__ == "__main__":
    unittest.main()
