#!/usr/bin/env python3
"""Wire interop of proto/codec/opamp_codec with the upstream OpAMP schema, using protoc as the
independent implementation (python3 stdlib only).

  ours -> protoc: opamp_wire encode-a2s/encode-s2a writes our bytes; `protoc --decode` with
                  the upstream opamp.proto must show the expected field values and no unknown
                  fields.
  protoc -> ours: `protoc --encode` of text-format messages (typed AnyValues, fields we
                  ignore, a oneof) against the upstream schema; opamp_wire decode-* prints
                  what our decoder saw, which must match.

Usage: wire_interop.py --protoc PROTOC --wire OPAMP_WIRE --upstream REF_PROTO_DIR
Exit: 0 ok, 1 mismatch, 2 tool error, 77 skipped.
"""
import argparse
import hashlib
import os
import shutil
import struct
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from schema_compare import one, parse_text  # noqa: E402

SKIP = 77
SCHEMA = "opamp/v1/opamp.proto"
UID = bytes(range(0x10, 0x20))
NEW_UID = bytes(range(0x80, 0x90))
YAML = b"profiling:\n  enabled: true\n"

failures = []


def check(what, got, want):
    if got != want:
        failures.append("%s: got %r, want %r" % (what, got, want))


def c_unescape(s):
    """Bytes of a protoc text-format string literal body (C escapes, octal for binary)."""
    out = bytearray()
    i = 0
    raw = s.encode("latin-1", errors="strict") if isinstance(s, str) else s
    simple = {ord("n"): 10, ord("r"): 13, ord("t"): 9, ord('"'): 34, ord("'"): 39,
              ord("\\"): 92, ord("a"): 7, ord("b"): 8, ord("f"): 12, ord("v"): 11,
              ord("?"): 63}
    while i < len(raw):
        c = raw[i]
        if c != 92:
            out.append(c)
            i += 1
            continue
        i += 1
        c = raw[i]
        if c in simple:
            out.append(simple[c])
            i += 1
        elif 48 <= c <= 55:
            j = i
            while j < len(raw) and j < i + 3 and 48 <= raw[j] <= 55:
                j += 1
            out.append(int(raw[i:j], 8))
            i = j
        elif c == ord("x"):
            j = i + 1
            while j < len(raw) and j < i + 3 and chr(raw[j]) in "0123456789abcdefABCDEF":
                j += 1
            out.append(int(raw[i + 1:j], 16))
            i = j
        else:
            raise ValueError("unknown escape \\%s" % chr(c))
    return bytes(out)


def octal(b):
    return "".join("\\%03o" % x for x in b)


def run(cmd, stdin=None):
    r = subprocess.run(cmd, input=stdin, capture_output=True)
    if r.returncode != 0:
        raise RuntimeError("%s failed (%d):\n%s%s" % (" ".join(cmd), r.returncode,
                                                      r.stdout.decode(errors="replace"),
                                                      r.stderr.decode(errors="replace")))
    return r.stdout


def protoc_decode(a, msg, data):
    """Raw text (strings kept escaped, so bytes survive) parsed into nested dicts."""
    out = run([a.protoc, "--decode=opamp.proto.v1." + msg, "-I", a.upstream, SCHEMA], data)
    text = out.decode("latin-1")
    # parse_text unescapes strings as unicode; we want raw bytes, so keep literals escaped
    # by re-parsing values ourselves: protect backslashes before parse_text sees them.
    tree = parse_text(text.replace("\\", "\\\\"))
    return tree, text


def b(node, key):
    v = one(node, key)
    return None if v is None else c_unescape(v)


def no_unknown(tree, path, what):
    for key, vals in tree.items():
        if key.isdigit():
            failures.append("%s: protoc sees unknown field %s at %s" % (what, key, path))
        for v in vals:
            if isinstance(v, dict):
                no_unknown(v, path + "." + key, what)


def kvs(node, key):
    return [(one(kv, "key"), one(one(kv, "value", {}), "string_value"))
            for kv in node.get(key, [])]


def health_children(h):
    return {one(e, "key"): one(e, "value", {}) for e in h.get("component_health_map", [])}


def ours_to_protoc(a, wd):
    # AgentToServer
    path = os.path.join(wd, "a2s.bin")
    run([a.wire, "encode-a2s", path])
    with open(path, "rb") as f:
        t, text = protoc_decode(a, "AgentToServer", f.read())
    no_unknown(t, "AgentToServer", "a2s")
    check("a2s.instance_uid", b(t, "instance_uid"), UID)
    check("a2s.sequence_num", one(t, "sequence_num"), "42")
    check("a2s.capabilities", one(t, "capabilities"), str(0x1 | 0x800 | 0x2000))
    check("a2s.flags", one(t, "flags"), "1")
    d = one(t, "agent_description", {})
    check("a2s.identifying", kvs(d, "identifying_attributes"),
          [("service.name", "profleet-agent"), ("service.instance.id", "web-01")])
    check("a2s.non_identifying", kvs(d, "non_identifying_attributes"), [("os.type", "linux")])
    h = one(t, "health", {})
    check("a2s.health.healthy", one(h, "healthy"), "true")
    check("a2s.health.start_time", one(h, "start_time_unix_nano"), "1700000000000000000")
    check("a2s.health.status", one(h, "status"), "running")
    check("a2s.health.status_time", one(h, "status_time_unix_nano"), "9")
    kids = health_children(h)
    check("a2s.health.children", sorted(kids), ["exporter", "sampler"])
    s = kids.get("sampler", {})
    check("a2s.health[sampler].status", one(s, "status"), "degraded")
    check("a2s.health[sampler].healthy", one(s, "healthy"), None)  # false is not sent
    check("a2s.health[sampler].start", one(s, "start_time_unix_nano"), "5")
    cpu0 = health_children(s).get("cpu0", {})
    check("a2s.health[sampler][cpu0].last_error", b(cpu0, "last_error"),
          b"perf_event_open: EACCES")
    check("a2s.health[exporter].healthy", one(kids.get("exporter", {}), "healthy"), "true")
    cm = one(one(one(t, "effective_config", {}), "config_map", {}), "config_map", {})
    check("a2s.effective_config key", one(cm, "key"), "profiling.yaml")
    check("a2s.effective_config body", b(one(cm, "value", {}), "body"), YAML)
    check("a2s.effective_config content_type", one(one(cm, "value", {}), "content_type"),
          "text/yaml")
    rcs = one(t, "remote_config_status", {})
    check("a2s.rcs.hash", b(rcs, "last_remote_config_hash"), b"\xde\xad\xbe\xef")
    check("a2s.rcs.status", one(rcs, "status"), "RemoteConfigStatuses_APPLIED")
    check("a2s.agent_disconnect present", "agent_disconnect" in t, True)
    check("a2s.custom_capabilities", one(t, "custom_capabilities", {}).get("capabilities"),
          ["io.profleet.capture"])
    msg = one(t, "custom_message", {})
    check("a2s.custom_message.capability", one(msg, "capability"), "io.profleet.capture")
    check("a2s.custom_message.type", one(msg, "type"), "start")
    check("a2s.custom_message.data", b(msg, "data"), b"\x01\x00\x02")

    # ServerToAgent
    path = os.path.join(wd, "s2a.bin")
    run([a.wire, "encode-s2a", path])
    with open(path, "rb") as f:
        t, text = protoc_decode(a, "ServerToAgent", f.read())
    no_unknown(t, "ServerToAgent", "s2a")
    check("s2a.instance_uid", b(t, "instance_uid"), UID)
    check("s2a.flags", one(t, "flags"), "1")
    check("s2a.capabilities", one(t, "capabilities"), str(0x1 | 0x2 | 0x4 | 0x20))
    e = one(t, "error_response", {})
    check("s2a.error.type", one(e, "type"), "ServerErrorResponseType_Unavailable")
    check("s2a.error.message", one(e, "error_message"), "try later")
    check("s2a.error.retry", one(one(e, "retry_info", {}), "retry_after_nanoseconds"),
          "15000000000")
    rc = one(t, "remote_config", {})
    cm = one(one(rc, "config", {}), "config_map", {})
    check("s2a.remote_config key", one(cm, "key"), "profiling.yaml")
    check("s2a.remote_config body", b(one(cm, "value", {}), "body"), YAML)
    check("s2a.remote_config hash", b(rc, "config_hash"), b"\xde\xad\xbe\xef")
    cs = one(t, "connection_settings", {})
    check("s2a.connection_settings.opamp.heartbeat",
          one(one(cs, "opamp", {}), "heartbeat_interval_seconds"), "30")
    check("s2a.connection_settings.hash", b(cs, "hash"),
          hashlib.sha256(struct.pack("<Q", 30)).digest())
    check("s2a.new_instance_uid", b(one(t, "agent_identification", {}), "new_instance_uid"),
          NEW_UID)
    check("s2a.custom_capabilities", one(t, "custom_capabilities", {}).get("capabilities"),
          ["io.profleet.capture"])
    msg = one(t, "custom_message", {})
    check("s2a.custom_message.type", one(msg, "type"), "done")
    check("s2a.custom_message.data", b(msg, "data"), None)


A2S_TEXT = r'''
instance_uid: "%(uid)s"
sequence_num: 7
capabilities: 6145
flags: 1
agent_description {
  identifying_attributes { key: "service.name" value { string_value: "svc \"q\"" } }
  identifying_attributes { key: "n" value { int_value: -5 } }
  non_identifying_attributes { key: "b" value { bool_value: true } }
  non_identifying_attributes { key: "d" value { double_value: 2.5 } }
  non_identifying_attributes { key: "by" value { bytes_value: "\253\315" } }
  non_identifying_attributes { key: "arr" value { array_value {
      values { int_value: 1 } values { string_value: "x" } values { double_value: 0.1 } } } }
  non_identifying_attributes { key: "kv" value { kvlist_value {
      values { key: "a" value { bool_value: false } } values { key: "z" } } } }
  non_identifying_attributes { key: "unset" }
}
health {
  healthy: true
  start_time_unix_nano: 123
  status: "ok"
  component_health_map { key: "c1" value { last_error: "boom" status_time_unix_nano: 77 } }
  attributes { key: "ignored" value { string_value: "z" } }
}
effective_config { config_map { config_map {
  key: "a.yaml" value { body: "x: 1\n" content_type: "text/yaml" } } } }
remote_config_status {
  last_remote_config_hash: "\001\002"
  status: RemoteConfigStatuses_FAILED
  error_message: "bad"
}
package_statuses { error_message: "ignored by us" }
agent_disconnect {}
connection_settings_request { opamp { certificate_request { csr: "x" } } }
custom_capabilities { capabilities: "c1" capabilities: "c2" }
custom_message { capability: "c1" type: "t" data: "\000\377" }
available_components { hash: "\001" }
connection_settings_status { status: ConnectionSettingsStatuses_APPLIED }
'''

S2A_TEXT = r'''
instance_uid: "%(uid)s"
error_response {
  type: ServerErrorResponseType_BadRequest
  error_message: "nope"
  retry_info { retry_after_nanoseconds: 99 }
}
remote_config {
  config { config_map { key: "p.yaml" value { body: "k: v" content_type: "text/yaml" } }
           config_map { key: "q.yaml" value { } } }
  config_hash: "\001\002\003"
}
connection_settings {
  hash: "\000"
  opamp { destination_endpoint: "wss://example.invalid/v1/opamp" heartbeat_interval_seconds: 45 }
  own_metrics { destination_endpoint: "http://127.0.0.1:4318" }
}
packages_available { all_packages_hash: "\001" }
flags: 3
capabilities: 7
agent_identification { new_instance_uid: "%(new_uid)s" }
command { type: CommandType_Restart }
custom_capabilities { capabilities: "c" }
custom_message { capability: "c" type: "t" data: "d" }
'''


def decode_lines(out):
    res = {}
    for line in out.decode("utf-8", errors="replace").splitlines():
        k, _, v = line.partition("=")
        res[k] = v
    return res


def protoc_to_ours(a, wd):
    subst = {"uid": octal(UID), "new_uid": octal(NEW_UID)}
    enc = run([a.protoc, "--encode=opamp.proto.v1.AgentToServer", "-I", a.upstream, SCHEMA],
              (A2S_TEXT % subst).encode())
    path = os.path.join(wd, "a2s-protoc.bin")
    with open(path, "wb") as f:
        f.write(enc)
    got = decode_lines(run([a.wire, "decode-a2s", path]))
    want = {
        "instance_uid": UID.hex(), "instance_uid_len": "16", "sequence_num": "7",
        "capabilities": "6145", "flags": "1", "has_description": "1",
        "identifying[service.name]": 'svc "q"', "identifying[n]": "-5",
        "non_identifying[b]": "true", "non_identifying[d]": "2.5",
        "non_identifying[by]": "abcd", "non_identifying[arr]": '[1,"x",0.1]',
        "non_identifying[kv]": '{"a":false,"z":null}', "non_identifying[unset]": "",
        "has_health": "1", "health.healthy": "1", "health.start_time_unix_nano": "123",
        "health.status": "ok", "health.n_children": "1", "health[c1].last_error": "boom",
        "health[c1].status_time_unix_nano": "77", "health[c1].healthy": "0",
        "has_effective_config": "1", "effective_config.n_files": "1",
        "effective_config[a.yaml].body": b"x: 1\n".hex(),
        "effective_config[a.yaml].content_type": "text/yaml",
        "has_remote_config_status": "1", "rcs.last_hash": "0102", "rcs.status": "3",
        "rcs.error_message": "bad", "has_disconnect": "1", "has_custom_capabilities": "1",
        "custom_capabilities[0]": "c1", "custom_capabilities[1]": "c2",
        "has_custom_message": "1", "custom_message.capability": "c1",
        "custom_message.type": "t", "custom_message.data": "00ff",
    }
    for k, v in want.items():
        check("protoc->ours a2s " + k, got.get(k), v)

    enc = run([a.protoc, "--encode=opamp.proto.v1.ServerToAgent", "-I", a.upstream, SCHEMA],
              (S2A_TEXT % subst).encode())
    path = os.path.join(wd, "s2a-protoc.bin")
    with open(path, "wb") as f:
        f.write(enc)
    got = decode_lines(run([a.wire, "decode-s2a", path]))
    want = {
        "instance_uid": UID.hex(), "instance_uid_len": "16", "flags": "3", "capabilities": "7",
        "has_error": "1", "error.type": "1", "error.message": "nope", "has_retry_after": "1",
        "retry_after_nanoseconds": "99", "has_remote_config": "1",
        "remote_config.n_files": "2", "remote_config[p.yaml].body": b"k: v".hex(),
        "remote_config[p.yaml].content_type": "text/yaml", "remote_config[q.yaml].body": "",
        "remote_config_hash": "010203", "has_heartbeat_interval": "1",
        "heartbeat_interval_seconds": "45", "has_new_instance_uid": "1",
        "new_instance_uid": NEW_UID.hex(), "has_custom_capabilities": "1",
        "custom_capabilities[0]": "c", "has_custom_message": "1",
        "custom_message.data": b"d".hex(),
    }
    for k, v in want.items():
        check("protoc->ours s2a " + k, got.get(k), v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--protoc", default="")
    ap.add_argument("--wire", required=True)
    ap.add_argument("--upstream", required=True)
    a = ap.parse_args()
    if not os.path.isfile(os.path.join(a.upstream, SCHEMA)):
        print("SKIP: upstream OpAMP schema not found at %s (set PF_SHARED_DIR)" % a.upstream)
        return SKIP
    if not a.protoc or not shutil.which(a.protoc):
        print("SKIP: protoc not available")
        return SKIP
    with tempfile.TemporaryDirectory(prefix="pf-wire-") as wd:
        try:
            ours_to_protoc(a, wd)
            protoc_to_ours(a, wd)
        except (RuntimeError, ValueError) as e:
            print("ERROR: %s" % e)
            return 2
    if failures:
        print("%d wire mismatches:" % len(failures))
        for f in failures:
            print("  " + f)
        return 1
    print("wire interop ok: AgentToServer and ServerToAgent both ways")
    return 0


if __name__ == "__main__":
    sys.exit(main())
