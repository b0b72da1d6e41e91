#!/usr/bin/env python3
"""Schema compatibility of our .proto files (proto/) with the upstream copies.

For each schema family (opamp, otlp, pprof) both sides are compiled by protoc into a
FileDescriptorSet (--include_imports), which protoc also decodes to text format; the text is
parsed here (python3 stdlib only). For every message and enum of every upstream file we
define, we require: the same full name; every field with the same name, number, type, label,
type_name, oneof and proto3_optional; no extra fields; the same reserved ranges; every enum
value with the same number and no extra values; services with the same methods.

Usage:
  schema_compare.py --protoc PROTOC --ours PROTO_DIR --upstream REF_DIR
  schema_compare.py ... --self-test   also checks that a deliberately broken copy of ours
                                       is caught, with each planted difference reported.
Exit: 0 compatible, 1 differences (listed on stdout), 2 usage/tool error, 77 skipped.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77

# (family, our import root relative to PROTO_DIR, files relative to that root)
FAMILIES = [
    ("opamp", ".", ["opamp/v1/opamp.proto", "opamp/v1/anyvalue.proto"]),
    ("otlp", "otlp", [
        "opentelemetry/proto/common/v1/common.proto",
        "opentelemetry/proto/resource/v1/resource.proto",
        "opentelemetry/proto/profiles/v1development/profiles.proto",
        "opentelemetry/proto/collector/profiles/v1development/profiles_service.proto",
        "opentelemetry/proto/trace/v1/trace.proto",
        "opentelemetry/proto/collector/trace/v1/trace_service.proto",
    ]),
    ("pprof", "pprof", ["perftools/profile.proto"]),
]

DESCRIPTOR_INCLUDE = "/usr/include"
COMPARED = {}  # kind -> number of upstream definitions compared


class ToolError(Exception):
    pass


# ---- text format parsing -------------------------------------------------------------------

def _unquote(val):
    if len(val) >= 2 and val[0] == '"' and val[-1] == '"':
        # protoc escapes with C escapes (octal for non-ASCII); names never need more
        return bytes(val[1:-1], "utf-8").decode("unicode_escape")
    return val


def parse_text(text):
    """Parses protoc's text format output (one "key {", "}" or "key: value" per line) into
    nested dicts: key -> list of values (dict or str)."""
    root = {}
    stack = [root]
    for lineno, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        if line == "}":
            stack.pop()
            if not stack:
                raise ToolError("line %d: unbalanced '}' in descriptor text" % lineno)
        elif line.endswith("{"):
            key = line[:-1].strip()
            child = {}
            stack[-1].setdefault(key, []).append(child)
            stack.append(child)
        elif ":" in line:
            key, val = line.split(":", 1)
            stack[-1].setdefault(key.strip(), []).append(_unquote(val.strip()))
        else:
            raise ToolError("line %d: cannot parse %r" % (lineno, line))
    if len(stack) != 1:
        raise ToolError("unbalanced braces in descriptor text")
    return root


def one(d, key, default=None):
    v = d.get(key)
    return v[0] if v else default


# ---- descriptor compilation -----------------------------------------------------------------

def descriptor_text(protoc, include_dir, files, workdir, tag):
    out = os.path.join(workdir, tag + ".pb")
    cmd = [protoc, "-I", include_dir, "--include_imports", "--descriptor_set_out=" + out] + files
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise ToolError("%s failed:\n%s" % (" ".join(cmd), r.stderr))
    with open(out, "rb") as f:
        r = subprocess.run([protoc, "--decode=google.protobuf.FileDescriptorSet", "-I",
                            DESCRIPTOR_INCLUDE, "google/protobuf/descriptor.proto"],
                           stdin=f, capture_output=True)
    if r.returncode != 0:
        raise ToolError("protoc --decode FileDescriptorSet failed:\n%s" %
                        r.stderr.decode(errors="replace"))
    return r.stdout.decode("utf-8", errors="replace")


def index_set(fds):
    """{file name: file dict}, and {full name: ('message'|'enum'|'service', dict)}."""
    files = {}
    types = {}
    for f in fds.get("file", []):
        name = one(f, "name")
        files[name] = f
        pkg = one(f, "package", "")
        prefix = "." + pkg if pkg else ""

        def walk_msg(m, scope, fname):
            full = scope + "." + one(m, "name")
            types[full] = ("message", m, fname)
            for nm in m.get("nested_type", []):
                walk_msg(nm, full, fname)
            for e in m.get("enum_type", []):
                types[full + "." + one(e, "name")] = ("enum", e, fname)

        for m in f.get("message_type", []):
            walk_msg(m, prefix, name)
        for e in f.get("enum_type", []):
            types[prefix + "." + one(e, "name")] = ("enum", e, name)
        for s in f.get("service", []):
            types[prefix + "." + one(s, "name")] = ("service", s, name)
    return files, types


def field_sig(m, fld):
    oneofs = [one(o, "name") for o in m.get("oneof_decl", [])]
    oi = one(fld, "oneof_index")
    oneof = oneofs[int(oi)] if oi is not None and int(oi) < len(oneofs) else None
    return {
        "number": one(fld, "number"),
        "type": one(fld, "type"),
        "label": one(fld, "label"),
        "type_name": one(fld, "type_name"),
        "oneof": oneof,
        "proto3_optional": one(fld, "proto3_optional", "false"),
    }


def ranges(m, key):
    return sorted((one(r, "start"), one(r, "end")) for r in m.get(key, []))


def compare_sets(up_text, our_text, files):
    """Returns a list of human-readable differences."""
    diffs = []
    up_files, up_types = index_set(parse_text(up_text))
    our_files, our_types = index_set(parse_text(our_text))
    for fname in files:
        if fname not in up_files:
            diffs.append("%s: not in the upstream descriptor set" % fname)
            continue
        if fname not in our_files:
            diffs.append("%s: we do not define this file" % fname)
            continue
        if one(up_files[fname], "package") != one(our_files[fname], "package"):
            diffs.append("%s: package %s, upstream %s" % (fname, one(our_files[fname], "package"),
                                                          one(up_files[fname], "package")))
    wanted = set(files)
    for full, (kind, up, fname) in sorted(up_types.items()):
        if fname not in wanted:
            continue
        COMPARED[kind] = COMPARED.get(kind, 0) + 1
        if full not in our_types:
            diffs.append("%s %s: missing in ours" % (kind, full))
            continue
        okind, ours, ofname = our_types[full]
        if okind != kind:
            diffs.append("%s: is a %s in ours, a %s upstream" % (full, okind, kind))
            continue
        if ofname != fname:
            diffs.append("%s: defined in %s, upstream in %s" % (full, ofname, fname))
        if kind == "message":
            ufields = {one(f, "name"): field_sig(up, f) for f in up.get("field", [])}
            ofields = {one(f, "name"): field_sig(ours, f) for f in ours.get("field", [])}
            for name, usig in ufields.items():
                if name not in ofields:
                    diffs.append("%s.%s: field missing in ours" % (full, name))
                    continue
                for k, uv in usig.items():
                    if ofields[name][k] != uv:
                        diffs.append("%s.%s: %s is %s, upstream %s" %
                                     (full, name, k, ofields[name][k], uv))
            for name in ofields:
                if name not in ufields:
                    diffs.append("%s.%s: extra field in ours" % (full, name))
            uopt = one(one(up, "options", {}) or {}, "map_entry", "false")
            oopt = one(one(ours, "options", {}) or {}, "map_entry", "false")
            if uopt != oopt:
                diffs.append("%s: map_entry %s, upstream %s" % (full, oopt, uopt))
            for key in ("reserved_range", "extension_range"):
                if ranges(up, key) != ranges(ours, key):
                    diffs.append("%s: %s %s, upstream %s" % (full, key, ranges(ours, key),
                                                             ranges(up, key)))
            if up.get("reserved_name", []) != ours.get("reserved_name", []):
                diffs.append("%s: reserved names differ" % full)
        elif kind == "enum":
            uvals = {one(v, "name"): one(v, "number") for v in up.get("value", [])}
            ovals = {one(v, "name"): one(v, "number") for v in ours.get("value", [])}
            for name, num in uvals.items():
                if name not in ovals:
                    diffs.append("%s.%s: enum value missing in ours" % (full, name))
                elif ovals[name] != num:
                    diffs.append("%s.%s: enum value %s, upstream %s" % (full, name, ovals[name],
                                                                       num))
            for name in ovals:
                if name not in uvals:
                    diffs.append("%s.%s: extra enum value in ours" % (full, name))
        else:
            def methods(s):
                return {one(mm, "name"): (one(mm, "input_type"), one(mm, "output_type"),
                                          one(mm, "client_streaming", "false"),
                                          one(mm, "server_streaming", "false"))
                        for mm in s.get("method", [])}
            if methods(up) != methods(ours):
                diffs.append("service %s: methods %s, upstream %s" % (full, methods(ours),
                                                                     methods(up)))
    for full, (kind, _, fname) in sorted(our_types.items()):
        if fname in wanted and full not in up_types:
            diffs.append("%s %s: extra in ours" % (kind, full))
    return diffs


def compare_tree(protoc, ours, upstream, workdir):
    diffs = []
    for fam, root, files in FAMILIES:
        up_text = descriptor_text(protoc, upstream, files, workdir, fam + "-upstream")
        our_text = descriptor_text(protoc, os.path.join(ours, root), files, workdir,
                                   fam + "-ours")
        # A sanity floor: an empty parse would "match" trivially.
        if len(index_set(parse_text(up_text))[1]) < 2:
            raise ToolError("%s: upstream descriptor set parsed to nothing" % fam)
        diffs += ["[%s] %s" % (fam, d) for d in compare_sets(up_text, our_text, files)]
    return diffs


# ---- self test: plant differences in a copy and make sure each one is reported --------------

MUTATIONS = [
    # (file relative to PROTO_DIR, old text, new text, substring expected in the report)
    ("opamp/v1/opamp.proto", "uint64 sequence_num = 2;", "uint64 sequence_num = 20;",
     ".opamp.proto.v1.AgentToServer.sequence_num: number is 20, upstream 2"),
    ("opamp/v1/anyvalue.proto", "int64 int_value = 3;", "sint64 int_value = 3;",
     ".opamp.proto.v1.AnyValue.int_value: type is TYPE_SINT64, upstream TYPE_INT64"),
    ("opamp/v1/opamp.proto", "AgentCapabilities_ReportsHeartbeat = 0x00002000;",
     "AgentCapabilities_ReportsHeartbeat = 0x00004001;",
     ".opamp.proto.v1.AgentCapabilities.AgentCapabilities_ReportsHeartbeat: enum value 16385"),
    ("otlp/opentelemetry/proto/profiles/v1development/profiles.proto",
     "repeated int32 location_indices = 1;", "int32 location_indices = 1;",
     "Stack.location_indices: label is LABEL_OPTIONAL, upstream LABEL_REPEATED"),
    ("otlp/opentelemetry/proto/trace/v1/trace.proto", "SPAN_KIND_CONSUMER = 5;",
     "SPAN_KIND_CONSUMER = 6;", "Span.SpanKind.SPAN_KIND_CONSUMER: enum value 6, upstream 5"),
    ("otlp/opentelemetry/proto/common/v1/common.proto", "string schema_url = 1;",
     "bytes schema_url = 1;", "EntityRef.schema_url: type is TYPE_BYTES, upstream TYPE_STRING"),
    ("pprof/perftools/profile.proto", "message Label {", "message Label {\n  int64 extra = 9;",
     ".perftools.profiles.Label.extra: extra field in ours"),
    ("opamp/v1/opamp.proto", "  oneof Details {\n    RetryInfo retry_info = 3;\n  }",
     "  RetryInfo retry_info = 3;",
     "ServerErrorResponse.retry_info: oneof is None, upstream Details"),
]


def self_test(protoc, ours, upstream, workdir):
    broken = os.path.join(workdir, "broken")
    shutil.copytree(ours, broken, ignore=shutil.ignore_patterns("codec", "CMakeLists.txt"))
    for rel, old, new, _ in MUTATIONS:
        path = os.path.join(broken, rel)
        with open(path) as f:
            text = f.read()
        if old not in text:
            raise ToolError("self-test: %r not found in %s (update MUTATIONS)" % (old, rel))
        with open(path, "w") as f:
            f.write(text.replace(old, new, 1))
    diffs = compare_tree(protoc, broken, upstream, workdir)
    report = "\n".join(diffs)
    missed = [exp for _, _, _, exp in MUTATIONS if exp not in report]
    if missed:
        print("self-test FAILED: the comparer did not report:")
        for m in missed:
            print("  " + m)
        print("its report was:\n" + report)
        return 1
    print("self-test ok: %d planted differences reported (%d lines)" % (len(MUTATIONS),
                                                                       len(diffs)))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--protoc", default="")
    ap.add_argument("--ours", required=True)
    ap.add_argument("--upstream", required=True)
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if not os.path.isdir(a.upstream):
        print("SKIP: upstream schemas not found at %s (set PF_SHARED_DIR)" % a.upstream)
        return SKIP
    if not a.protoc or not shutil.which(a.protoc):
        print("SKIP: protoc not available")
        return SKIP
    if not os.path.exists(os.path.join(DESCRIPTOR_INCLUDE, "google/protobuf/descriptor.proto")):
        print("SKIP: google/protobuf/descriptor.proto not under %s (libprotobuf-dev)" %
              DESCRIPTOR_INCLUDE)
        return SKIP
    with tempfile.TemporaryDirectory(prefix="pf-schema-") as wd:
        try:
            if a.self_test:
                return self_test(a.protoc, a.ours, a.upstream, wd)
            diffs = compare_tree(a.protoc, a.ours, a.upstream, wd)
        except ToolError as e:
            print("ERROR: %s" % e)
            return 2
    if diffs:
        print("%d schema differences between proto/ and %s:" % (len(diffs), a.upstream))
        for d in diffs:
            print("  " + d)
        return 1
    print("schemas compatible (%s compared): %s" %
          (", ".join("%d %ss" % (n, k) for k, n in sorted(COMPARED.items())),
           ", ".join(f for _, _, fl in FAMILIES for f in fl)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
