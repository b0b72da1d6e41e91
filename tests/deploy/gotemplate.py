"""A small renderer for the subset of Go templates + Helm/Sprig functions the profleet chart uses.

There is no helm binary on the build machines, so tests/deploy/check_chart.py renders the chart
with this and checks the Kubernetes objects that come out. It follows text/template's rules
where the chart depends on them and fails loudly (TemplateError) instead of guessing:
  - actions {{ }}, trim markers {{- -}}, comments {{/* */}};
  - if / else if / else, with / else, range (lists and maps, `$k, $v :=`), define, end;
  - variables ($x := / $x =, block scoped; $ is the template's data), fields (.a.b, $x.a),
    parenthesized pipelines, `|` pipes, method calls on objects (.Capabilities.APIVersions.Has);
  - values are JSON-like as in Helm: every number from values is a float64, literals in the
    template are int; comparing an int with a float is an error, as in Go; floats print the
    way Go's fmt %v prints them (1e+06), which is why the chart converts with `int`;
  - a field of a missing map key is nil; a field of nil is an error (Go: nil pointer
    evaluating interface {}.x); printing a map or list is an error (Go would print map[...]);
  - functions: the Sprig/Helm ones listed in FUNCS below.
"""
import base64
import decimal
import hashlib
import random
import re
import string

import yaml


class TemplateError(Exception):
    pass


class FailError(TemplateError):
    """The chart called `fail` or `required`: a refusal the tests expect."""


# ------------------------------------------------------------------------- values and printing

def go_float(f):
    """fmt.Sprint(float64): strconv.FormatFloat(f, 'g', -1, 64), whose %e form is used when
    the decimal exponent is < -4 or >= 6 for the shortest precision (strconv/ftoa.go), so a
    million prints as 1e+06 and 1073741824 as 1.073741824e+09."""
    if f != f:
        return "NaN"
    if f in (float("inf"), float("-inf")):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "0"
    sign, digits, exp = decimal.Decimal(repr(f)).as_tuple()
    digits = list(digits)
    while len(digits) > 1 and digits[-1] == 0:
        digits.pop()
        exp += 1
    nd = len(digits)
    dp = nd + exp
    e = dp - 1
    s = "-" if sign else ""
    ds = "".join(str(x) for x in digits)
    if e < -4 or e >= 6:
        mant = ds[0] + ("." + ds[1:] if nd > 1 else "")
        return "%s%se%s%02d" % (s, mant, "-" if e < 0 else "+", abs(e))
    if dp <= 0:
        return s + "0." + "0" * (-dp) + ds
    if dp >= nd:
        return s + ds + "0" * (dp - nd)
    return s + ds[:dp] + "." + ds[dp:]


def to_str(v):
    """How a value prints in a template action."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return go_float(v)
    if isinstance(v, str):
        return v
    raise TemplateError("printing a %s (%r): Go would print map[...]/[...]" % (
        type(v).__name__, v))


def truth(v):
    if v is None or v is False:
        return False
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return v != 0
    if isinstance(v, (str, list, dict, tuple)):
        return len(v) > 0
    return True


def floats(v):
    """Values as Helm sees them: every number a float64 (JSON)."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return float(v)
    if isinstance(v, dict):
        return {k: floats(x) for k, x in v.items()}
    if isinstance(v, list):
        return [floats(x) for x in v]
    return v


def deep_merge(base, over):
    """Helm's value coalescing: maps merge, null deletes, anything else replaces."""
    out = dict(base)
    for k, v in over.items():
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def _json_like(v):
    if isinstance(v, float) and v.is_integer() and abs(v) < 1e15:
        return int(v)
    if isinstance(v, dict):
        return {k: _json_like(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_json_like(x) for x in v]
    return v


def to_yaml(v):
    """sigs.k8s.io/yaml via JSON (sorted keys, integral floats as integers), without the
    final newline (Helm's toYaml trims it)."""
    if v is None:
        return "null"
    out = yaml.safe_dump(_json_like(v), default_flow_style=False, sort_keys=True, width=1 << 20)
    if out.endswith("...\n"):
        out = out[:-4]
    return out.rstrip("\n")


# ---------------------------------------------------------------------------------- functions

def _num_kind(v):
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    return None


def _cmp_args(a, b, op):
    ka, kb = _num_kind(a), _num_kind(b)
    if (ka or kb) and ka != kb:
        raise TemplateError("%s: incompatible types for comparison (%r, %r)" % (op, a, b))
    return a, b


def f_eq(a, *bs):
    for b in bs:
        _cmp_args(a, b, "eq")
        if a == b:
            return True
    return False


def f_printf(fmt, *args):
    out, i, ai = [], 0, 0
    while i < len(fmt):
        c = fmt[i]
        if c != "%":
            out.append(c)
            i += 1
            continue
        verb = fmt[i + 1]
        i += 2
        if verb == "%":
            out.append("%")
            continue
        if ai >= len(args):
            out.append("%!" + verb + "(MISSING)")
            continue
        a = args[ai]
        ai += 1
        if verb == "s" or verb == "v":
            out.append(to_str(a) if not (verb == "s" and isinstance(a, (int, float))
                                          and not isinstance(a, bool)) else
                       "%!s(" + ("int=" if isinstance(a, int) else "float64=") + to_str(a) + ")")
        elif verb == "d":
            if isinstance(a, int) and not isinstance(a, bool):
                out.append(str(a))
            else:
                out.append("%!d(" + type(a).__name__ + "=" + to_str(a) + ")")
        elif verb == "q":
            out.append(f_quote(a))
        else:
            raise TemplateError("printf verb %%%s not supported" % verb)
    if ai < len(args):
        out.append("%!(EXTRA)")
    return "".join(out)


def f_quote(*args):
    return " ".join('"' + to_str(a).replace("\\", "\\\\").replace('"', '\\"')
                    .replace("\n", "\\n").replace("\t", "\\t") + '"'
                    for a in args if a is not None)


def f_indent(n, s):
    pad = " " * n
    return pad + to_str(s).replace("\n", "\n" + pad)


def f_int(v):
    if v is None:
        return 0
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (int, float)):
        return int(v)
    if isinstance(v, str):
        try:
            return int(v, 0)
        except ValueError:
            return 0
    raise TemplateError("int of %r" % (v,))


def f_default(d, *v):
    if not v:
        return d
    return v[0] if truth(v[0]) else d


def f_required(msg, v=None):
    if v is None or (isinstance(v, str) and v == ""):
        raise FailError(msg)
    return v


def f_fail(msg):
    raise FailError(msg)


def f_dict(*kv):
    if len(kv) % 2:
        raise TemplateError("dict needs key/value pairs")
    return {to_str(kv[i]): kv[i + 1] for i in range(0, len(kv), 2)}


def f_omit(d, *keys):
    return {k: v for k, v in (d or {}).items() if k not in keys}


def f_index(v, *keys):
    for k in keys:
        if v is None:
            raise TemplateError("index of untyped nil")
        if isinstance(v, dict):
            v = v.get(k)
        elif isinstance(v, list):
            v = v[k]
        else:
            raise TemplateError("can't index item of type %s" % type(v).__name__)
    return v


def f_and(*a):
    for x in a:
        if not truth(x):
            return x
    return a[-1]


def f_or(*a):
    for x in a:
        if truth(x):
            return x
    return a[-1]


def _ordered(op, fn):
    def f(a, b):
        _cmp_args(a, b, op)
        return fn(a, b)
    return f


FUNCS = {
    "default": f_default,
    "quote": f_quote,
    "squote": lambda *a: " ".join("'" + to_str(x) + "'" for x in a if x is not None),
    "toYaml": to_yaml,
    "indent": f_indent,
    "nindent": lambda n, s: "\n" + f_indent(n, s),
    "printf": f_printf,
    "eq": f_eq,
    "ne": lambda a, b: not f_eq(a, b),
    "lt": _ordered("lt", lambda a, b: a < b),
    "le": _ordered("le", lambda a, b: a <= b),
    "gt": _ordered("gt", lambda a, b: a > b),
    "ge": _ordered("ge", lambda a, b: a >= b),
    "and": f_and,
    "or": f_or,
    "not": lambda a: not truth(a),
    "empty": lambda a=None: not truth(a),
    "required": f_required,
    "fail": f_fail,
    "b64enc": lambda s: base64.b64encode(to_str(s).encode()).decode(),
    "b64dec": lambda s: base64.b64decode(to_str(s)).decode(),
    "randAlphaNum": lambda n: "".join(random.SystemRandom().choice(
        string.ascii_letters + string.digits) for _ in range(n)),
    "trunc": lambda n, s: to_str(s)[:n] if n >= 0 else to_str(s)[n:],
    "trimSuffix": lambda suf, s: to_str(s)[:-len(suf)] if suf and to_str(s).endswith(suf)
    else to_str(s),
    "trim": lambda s: to_str(s).strip(),
    "replace": lambda old, new, s: to_str(s).replace(old, new),
    "upper": lambda s: to_str(s).upper(),
    "lower": lambda s: to_str(s).lower(),
    "contains": lambda sub, s: to_str(sub) in to_str(s),
    "hasPrefix": lambda p, s: to_str(s).startswith(to_str(p)),
    "hasKey": lambda d, k: k in (d or {}),
    "dict": f_dict,
    "list": lambda *a: list(a),
    "omit": f_omit,
    "int": f_int,
    "int64": f_int,
    "toString": to_str,
    "sha256sum": lambda s: hashlib.sha256(to_str(s).encode()).hexdigest(),
    "len": lambda v: len(v or []),
    "index": f_index,
}


# ------------------------------------------------------------------------------------ lexing

ACTION = re.compile(r"\{\{(-\s)?(.*?)(\s-)?\}\}", re.S)
TOKEN = re.compile(r"""
    (?P<ws>\s+) |
    (?P<str>"(?:[^"\\]|\\.)*") |
    (?P<raw>`[^`]*`) |
    (?P<num>-?\d+(?:\.\d+)?) |
    (?P<decl>:=) |
    (?P<assign>=) |
    (?P<pipe>\|) |
    (?P<lp>\() | (?P<rp>\)) | (?P<comma>,) |
    (?P<var>\$[A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*) |
    (?P<field>(?:\.[A-Za-z0-9_]+)+|\.) |
    (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
""", re.X)


def tokenize(src):
    toks, i = [], 0
    while i < len(src):
        m = TOKEN.match(src, i)
        if not m:
            raise TemplateError("cannot read %r" % src[i:])
        i = m.end()
        kind = m.lastgroup
        if kind != "ws":
            toks.append((kind, m.group()))
    return toks


def lex(text, name):
    """[(kind, payload)] with kind 'text' or 'action'; trim markers applied."""
    out, pos = [], 0
    for m in ACTION.finditer(text):
        chunk = text[pos:m.start()]
        if m.group(1):
            chunk = chunk.rstrip(" \t\r\n")
        out.append(["text", chunk])
        body = m.group(2).strip()
        if body.startswith("/*"):
            if not body.endswith("*/"):
                raise TemplateError("%s: unclosed comment" % name)
        else:
            out.append(["action", body])
        pos = m.end()
        if m.group(3):
            rest = text[pos:]
            pos += len(rest) - len(rest.lstrip(" \t\r\n"))
    out.append(["text", text[pos:]])
    return out


# ----------------------------------------------------------------------------------- parsing

class Node:
    def __init__(self, kind, **kw):
        self.kind = kind
        self.__dict__.update(kw)


def parse_pipeline(toks):
    """toks -> (decl_vars, op, commands); commands: [[operand...]...]."""
    decl, op = [], None
    for j, (k, _) in enumerate(toks):
        if k in ("decl", "assign"):
            names = [v for kk, v in toks[:j] if kk == "var"]
            if not names or any(kk not in ("var", "comma") for kk, _ in toks[:j]):
                raise TemplateError("bad declaration %r" % toks)
            decl, op, toks = names, k, toks[j + 1:]
            break
    cmds, cur, depth, sub = [], [], 0, []
    for k, v in toks:
        if depth:
            if k == "lp":
                depth += 1
            elif k == "rp":
                depth -= 1
                if depth == 0:
                    cur.append(("paren", parse_pipeline(sub)))
                    sub = []
                    continue
            sub.append((k, v))
            continue
        if k == "lp":
            depth = 1
        elif k == "pipe":
            cmds.append(cur)
            cur = []
        elif k == "rp":
            raise TemplateError("unbalanced )")
        else:
            cur.append((k, v))
    if depth:
        raise TemplateError("unbalanced (")
    cmds.append(cur)
    if any(not c for c in cmds):
        raise TemplateError("empty command in %r" % toks)
    return decl, op, cmds


def parse(items, name):
    """Returns (nodes, defines)."""
    defines = {}
    pos = 0

    def block(stop):
        nonlocal pos
        nodes = []
        while pos < len(items):
            kind, body = items[pos]
            pos += 1
            if kind == "text":
                if body:
                    nodes.append(Node("text", text=body))
                continue
            word = body.split(None, 1)[0] if body else ""
            rest = body[len(word):].strip()
            if word in stop:
                return nodes, word, rest
            if word in ("if", "with", "range"):
                nodes.append(branch(word, rest))
            elif word == "define":
                tname = tokenize(rest)
                if len(tname) != 1 or tname[0][0] != "str":
                    raise TemplateError("%s: define needs a name" % name)
                body_nodes, end, _ = block(("end",))
                defines[eval_literal(tname[0][1])] = body_nodes
            elif word in ("end", "else"):
                raise TemplateError("%s: unexpected {{%s}}" % (name, body))
            elif word in ("template", "block", "break", "continue"):
                raise TemplateError("%s: {{%s}} not supported" % (name, word))
            else:
                nodes.append(Node("action", pipe=parse_pipeline(tokenize(body))))
        if stop:
            raise TemplateError("%s: missing {{end}}" % name)
        return nodes, None, None

    def branch(word, rest):
        pipe = parse_pipeline(tokenize(rest))
        body, end, erest = block(("end", "else"))
        node = Node(word, pipe=pipe, body=body, orelse=[])
        if end == "else":
            if erest.startswith("if ") and word == "if":
                node.orelse = [branch("if", erest[3:])]
                return node
            if erest:
                raise TemplateError("%s: {{else %s}} not supported" % (name, erest))
            node.orelse, end, _ = block(("end",))
        return node

    nodes, _, _ = block(())
    return nodes, defines


def eval_literal(s):
    if s.startswith("`"):
        return s[1:-1]
    return bytes(s[1:-1], "utf-8").decode("unicode_escape")


# --------------------------------------------------------------------------------- execution

class Scope:
    def __init__(self, root):
        self.frames = [{"$": root}]

    def push(self):
        self.frames.append({})

    def pop(self):
        self.frames.pop()

    def declare(self, name, v):
        self.frames[-1][name] = v

    def assign(self, name, v):
        for f in reversed(self.frames):
            if name in f:
                f[name] = v
                return
        raise TemplateError("undefined variable %s" % name)

    def get(self, name):
        for f in reversed(self.frames):
            if name in f:
                return f[name]
        raise TemplateError("undefined variable %s" % name)


def field(v, names, what):
    for n in names:
        if v is None:
            raise TemplateError("nil pointer evaluating interface {}.%s (%s)" % (n, what))
        if isinstance(v, dict):
            v = v.get(n)
        elif hasattr(v, n):
            v = getattr(v, n)
        else:
            raise TemplateError("can't evaluate field %s in %s (%s)" % (n, type(v).__name__,
                                                                        what))
    return v


class Renderer:
    def __init__(self, defines, lookup=None):
        self.defines = defines
        self.lookup_fn = lookup or (lambda *a: {})
        self.depth = 0

    def include(self, name, data):
        if name not in self.defines:
            raise TemplateError("include of undefined template %r" % name)
        self.depth += 1
        if self.depth > 50:
            raise TemplateError("include nesting too deep")
        try:
            return self.run(self.defines[name], data)
        finally:
            self.depth -= 1

    def run(self, nodes, dot):
        out = []
        self.exec_nodes(nodes, dot, Scope(dot), out)
        return "".join(out)

    def exec_nodes(self, nodes, dot, scope, out):
        for n in nodes:
            if n.kind == "text":
                out.append(n.text)
            elif n.kind == "action":
                v = self.pipeline(n.pipe, dot, scope)
                if not n.pipe[0]:
                    out.append(to_str(v))
            elif n.kind == "if":
                scope.push()
                c = self.pipeline(n.pipe, dot, scope)
                self.exec_nodes(n.body if truth(c) else n.orelse, dot, scope, out)
                scope.pop()
            elif n.kind == "with":
                scope.push()
                c = self.pipeline(n.pipe, dot, scope)
                if truth(c):
                    self.exec_nodes(n.body, c, scope, out)
                else:
                    self.exec_nodes(n.orelse, dot, scope, out)
                scope.pop()
            elif n.kind == "range":
                self.exec_range(n, dot, scope, out)

    def exec_range(self, n, dot, scope, out):
        decl, op, cmds = n.pipe
        scope.push()
        seq = self.pipeline((None, None, cmds), dot, scope)
        if isinstance(seq, dict):
            pairs = sorted(seq.items())
        elif isinstance(seq, list):
            pairs = list(enumerate(seq))
        elif seq is None:
            pairs = []
        elif isinstance(seq, int):
            pairs = [(i, i) for i in range(seq)]
        else:
            raise TemplateError("range can't iterate over %r" % (seq,))
        if not pairs:
            self.exec_nodes(n.orelse, dot, scope, out)
        for k, v in pairs:
            scope.push()
            if len(decl) == 1:
                scope.declare(decl[0], v)
            elif len(decl) == 2:
                scope.declare(decl[0], k)
                scope.declare(decl[1], v)
            self.exec_nodes(n.body, v, scope, out)
            scope.pop()
        scope.pop()

    def pipeline(self, pipe, dot, scope):
        decl, op, cmds = pipe
        v, have = None, False
        for cmd in cmds:
            v = self.command(cmd, dot, scope, v if have else _NOARG)
            have = True
        if decl:
            if len(decl) != 1:
                raise TemplateError("only range declares two variables")
            if op == "decl":
                scope.declare(decl[0], v)
            else:
                scope.assign(decl[0], v)
        return v

    def operand(self, tok, dot, scope):
        k, v = tok
        if k == "paren":
            return self.pipeline(v, dot, scope)
        if k == "str":
            return eval_literal(v)
        if k == "raw":
            return v[1:-1]
        if k == "num":
            return float(v) if "." in v else int(v)
        if k == "field":
            return dot if v == "." else field(dot, v[1:].split("."), v)
        if k == "var":
            parts = v.split(".")
            return field(scope.get(parts[0]), parts[1:], v)
        if k == "ident":
            if v in ("true", "false"):
                return v == "true"
            if v == "nil":
                return None
            raise TemplateError("function %s used as a value" % v)
        raise TemplateError("unexpected %r" % (tok,))

    def command(self, cmd, dot, scope, piped):
        head = cmd[0]
        args = cmd[1:]
        if head[0] == "ident" and head[1] not in ("true", "false", "nil"):
            fn = self.func(head[1])
            vals = [self.operand(a, dot, scope) for a in args]
            if piped is not _NOARG:
                vals.append(piped)
            # and/or evaluate lazily in Go; our arguments have no side effects but fail may:
            try:
                return fn(*vals)
            except TypeError as e:
                raise TemplateError("%s: %s" % (head[1], e))
        v = self.operand(head, dot, scope)
        if callable(v):
            vals = [self.operand(a, dot, scope) for a in args]
            if piped is not _NOARG:
                vals.append(piped)
            return v(*vals)
        if args or piped is not _NOARG:
            raise TemplateError("%r is not a function" % (head,))
        return v

    def func(self, name):
        if name == "include":
            return lambda n, data: self.include(n, data)
        if name == "lookup":
            return self.lookup_fn
        if name in FUNCS:
            return FUNCS[name]
        raise TemplateError("function %r not defined" % name)


_NOARG = object()


class APIVersions:
    def __init__(self, versions):
        self.versions = set(versions)

    def Has(self, v):
        return v in self.versions


def render_chart(templates, values, release="profleet", namespace="profleet", chart=None,
                 api_versions=(), lookup=None, is_upgrade=False):
    """templates: {relative path: text}. Returns {path: rendered text} for every template
    that is not a partial (_*.tpl), NOTES.txt included."""
    parsed, defines = {}, {}
    for path, text in sorted(templates.items()):
        nodes, defs = parse(lex(text, path), path)
        parsed[path] = nodes
        defines.update(defs)
    chart = chart or {}
    data = {
        "Values": values,
        "Release": {"Name": release, "Namespace": namespace, "Service": "Helm",
                    "IsInstall": not is_upgrade, "IsUpgrade": is_upgrade, "Revision": 1},
        "Chart": {"Name": chart.get("name"), "Version": chart.get("version"),
                  "AppVersion": chart.get("appVersion")},
        "Capabilities": {"APIVersions": APIVersions(
            ["v1", "apps/v1", "rbac.authorization.k8s.io/v1", "networking.k8s.io/v1"] +
            list(api_versions))},
    }
    r = Renderer(defines, lookup)
    out = {}
    for path, nodes in parsed.items():
        base = path.rsplit("/", 1)[-1]
        if base.startswith("_"):
            continue
        d = dict(data)
        d["Template"] = {"Name": path, "BasePath": "templates"}
        out[path] = r.run(nodes, d)
    return out
