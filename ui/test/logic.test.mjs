// The console's pure logic, under node's test runner (no browser): locating a key path in
// YAML, the version diff, secret redaction, top functions and the sandwich from a tree, and the
// flat tree the canvas flame graph draws, the Profiles page's query (URL, filters, baseline, units, frame colors, timeline buckets).
import { test } from "node:test";
import assert from "node:assert/strict";
import { lineOfPath, diffLines } from "../src/pages/configs.js";
import { redact } from "../src/pages/agent.js";
import { topFromTree, sandwich, flattenTree, nodeAt } from "../src/tree.js";
import { parseQuery, formatQuery, timeRange, filterParams, pairsQs, defaultBaseline, fmtValue, unitOfType, frameColor,
  nameColor, diffColor, frameTypesIn, bucketProfiles, stepFor } from "../src/query.js";

const YAML = `profiling:
  enabled: true
  sampling: {frequency_hz: 5000, duration_seconds: 10}
  triggers:
    high_cpu:
      threshold_percent: 80
  exporters:
    - {type: file, path: /tmp/x}
    - type: otlp_http
      endpoint: "http://c:4318"
      headers:
        authorization: Bearer abc
  limits: {max_cpu_percent: 1.0}
`;

test("lineOfPath finds nested keys, flow maps and list items", () => {
  assert.equal(lineOfPath(YAML, "profiling"), 1);
  assert.equal(lineOfPath(YAML, "profiling.sampling.frequency_hz"), 3);
  assert.equal(lineOfPath(YAML, "profiling.triggers.high_cpu.threshold_percent"), 6);
  assert.equal(lineOfPath(YAML, "profiling.exporters[0].path"), 8);
  assert.equal(lineOfPath(YAML, "profiling.exporters[1]"), 9);
  assert.equal(lineOfPath(YAML, "profiling.exporters[1].endpoint"), 10);
  assert.equal(lineOfPath(YAML, "profiling.limits.max_cpu_percent"), 13);
  // a key that is not there: the deepest line found
  assert.equal(lineOfPath(YAML, "profiling.triggers.slow_span.enabled"), 4);
  assert.equal(lineOfPath(YAML, "nope"), 0);
});

test("diffLines marks added and removed lines and keeps the rest", () => {
  const d = diffLines("a\nb\nc\n", "a\nB\nc\nd\n");
  assert.deepEqual(d.map((l) => l.op + l.text), [" a", "-b", "+B", " c", "+d", " "]);
  assert.deepEqual(diffLines("x", "x"), [{ op: " ", text: "x" }]);
});

test("redact hides secret-looking values and everything under headers", () => {
  const r = redact(YAML + "  token_file: /etc/t\n  api_key: k1\n");
  assert.doesNotMatch(r, /Bearer abc/);
  assert.match(r, /authorization: ‹redacted›/);
  assert.match(r, /api_key: ‹redacted›/);
  assert.match(r, /token_file: ‹redacted›/);
  assert.match(r, /endpoint: "http:\/\/c:4318"/, "other values stay");
  assert.match(redact("    - {type: otlp_http, headers: {x-key: s3cret}}\n"), /headers: \{‹redacted›\}/);
  assert.doesNotMatch(redact("headers: {a: s3cret}\n"), /s3cret/);
  assert.equal(redact("headers: {}\n"), "headers: {}\n");
});

// all(10) -> main(10) -> { work(6) -> { hash(4), work(2) -> hash(2) }, idle(4) }
const TREE = { name: "all", value: 10, children: [
  { name: "main", value: 10, children: [
    { name: "work", value: 6, children: [
      { name: "hash", value: 2 },
      { name: "work", value: 4, children: [{ name: "hash", value: 4 }] }] },
    { name: "idle", value: 4 }] }] };

test("topFromTree: self at the leaf, total once per stack even when recursive", () => {
  const t = Object.fromEntries(topFromTree(TREE).map((f) => [f.name, f]));
  assert.deepEqual(t.hash, { name: "hash", self: 6, total: 6 });
  assert.deepEqual(t.work, { name: "work", self: 0, total: 6 });
  assert.deepEqual(t.main, { name: "main", self: 0, total: 10 });
  assert.deepEqual(t.idle, { name: "idle", self: 4, total: 4 });
});

test("sandwich: callers and callees of a function, weighted by its outermost frames", () => {
  const s = sandwich(TREE, "work");
  assert.equal(s.callees.value, 6);
  const kids = Object.fromEntries(s.callees.children.map((c) => [c.name, c.value]));
  assert.deepEqual(kids, { hash: 2, work: 4 });
  assert.equal(s.callers.value, 6);
  assert.equal(s.callers.children[0].name, "main");
  assert.equal(s.callers.children[0].value, 6);
  const h = sandwich(TREE, "hash");
  assert.equal(h.callers.value, 6);
  assert.deepEqual(h.callers.children.map((c) => [c.name, c.value]), [["work", 6]]);
});

test("flattenTree: depth-first, children by name, offsets, self, subtree ends", () => {
  const f = flattenTree(TREE);
  const names = [...f.value.keys()].map((i) => f.names[f.name[i]]);
  assert.deepEqual(names, ["all", "main", "idle", "work", "hash", "work", "hash"]);
  assert.deepEqual([...f.depth], [0, 1, 2, 2, 3, 3, 4]);
  assert.deepEqual([...f.parent], [-1, 0, 1, 1, 3, 3, 5]);
  assert.deepEqual([...f.end], [7, 7, 3, 7, 5, 7, 7]);
  assert.deepEqual([...f.x0], [0, 0, 0, 4, 4, 6, 6]);
  assert.deepEqual([...f.self], [0, 0, 4, 0, 2, 0, 4]);
  assert.equal(f.maxDepth, 4);
  assert.equal(f.names.length, 5, "names interned");
  assert.equal(f.delta, null);
  const d = flattenTree({ name: "all", value: 5, base: 3, delta: 2, children: [{ name: "a", value: 5, base: 0, delta: 5, type: "go" }] });
  assert.deepEqual([...d.delta], [2, 5]);
  assert.deepEqual([...d.base], [3, 0]);
  assert.equal(d.types[d.type[1]], "go");
  assert.equal(d.types[d.type[0]], "");
});

test("nodeAt: the frame under an offset at a depth, within the zoomed frame", () => {
  const f = flattenTree(TREE);
  const at = (z, v, d) => { const i = nodeAt(f, z, v, d); return i < 0 ? null : `${f.names[f.name[i]]}@${f.x0[i]}`; };
  assert.equal(at(0, 0, 0), "all@0");
  assert.equal(at(0, 3.9, 2), "idle@0");
  assert.equal(at(0, 4, 2), "work@4");
  assert.equal(at(0, 5, 3), "hash@4");
  assert.equal(at(0, 7, 4), "hash@6");
  assert.equal(at(0, 1, 3), null, "idle has no children");
  assert.equal(at(0, 10, 1), null, "past the root");
  assert.equal(at(3, 1, 1), "main@0", "an ancestor of the zoomed frame, wherever the pointer is");
  assert.equal(at(3, 2, 3), null, "outside the zoomed frame");
  // a deep chain (no recursion limit)
  let deep = { name: "leaf", value: 1 };
  for (let i = 0; i < 20000; i++) deep = { name: "f" + (i % 7), value: 1, children: [deep] };
  const g = flattenTree(deep);
  assert.equal(g.maxDepth, 20000);
  assert.equal(g.names[g.name[nodeAt(g, 0, 0.5, 20000)]], "leaf");
});

test("frame colors without types, and diff colors by delta", () => {
  assert.match(nameColor("main"), /^hsl\(\d+, \d+%, \d+%\)$/);
  assert.equal(nameColor("main"), nameColor("main"));
  assert.equal(diffColor(5, 5, 0), "hsl(34, 100%, 66%)", "only in the range: orange");
  assert.equal(diffColor(0, 5, 5), "hsl(0, 0%, 86%)", "unchanged: grey");
  assert.match(diffColor(3, 5, 2), /^hsl\(0, /, "bigger share now: red");
  assert.match(diffColor(-3, 5, 8), /^hsl\(218, /, "smaller: blue");
  const light = (c) => Number(/(\d+(\.\d+)?)%\)$/.exec(c)[1]);
  assert.ok(light(diffColor(4, 5, 1)) < light(diffColor(1, 5, 4)), "deeper as the delta grows");
});

test("the profiles query round-trips through the URL, with defaults left out", () => {
  const q = parseQuery(new URLSearchParams("service=checkout&match=k8s.namespace.name=shop&match=host.name=a=b&type=off_cpu&range=6h&sel=100-200&view=table"));
  assert.equal(q.service, "checkout");
  assert.deepEqual(q.matchers, [{ key: "k8s.namespace.name", value: "shop" }, { key: "host.name", value: "a=b" }]);
  assert.equal(q.type, "off_cpu");
  assert.equal(q.preset, "6h");
  assert.deepEqual(q.sel, [100, 200]);
  assert.equal(q.view, "table");
  assert.deepEqual(parseQuery(new URLSearchParams(formatQuery(q).slice(1))), q);
  const d = parseQuery(new URLSearchParams(""));
  assert.deepEqual([d.type, d.preset, d.view, d.sel, d.compare], ["cpu", "1h", "both", null, false]);
  assert.equal(formatQuery(d), "");
  // an absolute range wins over a preset; a bad one falls back to the default preset
  const a = parseQuery(new URLSearchParams("from=1000&to=5000&range=7d"));
  assert.deepEqual([a.from, a.to, a.preset], [1000, 5000, null]);
  assert.deepEqual(timeRange(a), [1000, 5000]);
  assert.equal(parseQuery(new URLSearchParams("from=5000&to=1000")).preset, "1h");
  assert.equal(parseQuery(new URLSearchParams("sel=9-3")).sel, null);
  assert.deepEqual(timeRange(parseQuery(new URLSearchParams("range=15m")), 1e6), [1e6 - 900e3, 1e6]);
});

test("filters: match= with the label API, named parameters without it", () => {
  const q = parseQuery(new URLSearchParams("service=s&match=k8s.pod.name=p1&match=host.name=h"));
  assert.deepEqual(filterParams(q, { labels: true }), [[["service", "s"], ["match", "k8s.pod.name=p1"], ["match", "host.name=h"], ["type", "cpu"]], []]);
  const [pairs, unsupported] = filterParams(q, { labels: false });
  assert.deepEqual(pairs, [["service", "s"], ["pod", "p1"], ["type", "cpu"]]);
  assert.deepEqual(unsupported, [{ key: "host.name", value: "h" }]);
  assert.equal(pairsQs([["match", "a=b"], ["match", "c=d"], ["x", ""]]), "?match=a%3Db&match=c%3Dd");
});

test("the default baseline: the same length before the selection, within stored data", () => {
  assert.deepEqual(defaultBaseline([1000, 2000], null), { base: [0, 1000], sel: [1000, 2000] });
  assert.deepEqual(defaultBaseline([1000, 2000], 0), { base: [0, 1000], sel: [1000, 2000] });
  // data starts after the full-length baseline would: it starts with the data
  assert.deepEqual(defaultBaseline([1000, 2000], 600), { base: [600, 1000], sel: [1000, 2000] });
  // nothing stored before the selection: its first half against its second
  assert.deepEqual(defaultBaseline([1000, 2000], 1000), { base: [1000, 1500], sel: [1500, 2000] });
  assert.deepEqual(defaultBaseline([1000, 2000], 1400), { base: [1400, 1700], sel: [1700, 2000] });
});

test("values in their unit, and a type's unit when the controller does not say", () => {
  assert.equal(fmtValue(1500, "nanoseconds"), "1.50 µs");
  assert.equal(fmtValue(2.5e9, "nanoseconds"), "2.50 s");
  assert.equal(fmtValue(90e9, "nanoseconds"), "1.50 min");
  assert.equal(fmtValue(512, "bytes"), "512 B");
  assert.equal(fmtValue(3 * 1024 * 1024, "bytes"), "3.00 MiB");
  assert.equal(fmtValue(990, "samples"), "990 samples");
  assert.equal(fmtValue(123456, "count"), "123k");
  assert.deepEqual(["cpu", "off_cpu", "wall", "alloc_space", "inuse_space", "goroutine"].map(unitOfType),
    ["samples", "nanoseconds", "nanoseconds", "bytes", "bytes", "count"]);
});

test("frame types: colors per type, the legend lists the types a tree holds", () => {
  const t = { name: "all", value: 3, children: [{ name: "main", type: "native", value: 3, children: [
    { name: "PyEval", type: "cpython", value: 2 }, { name: "do_syscall_64", type: "kernel", value: 1 }, { name: "x", type: "beam", value: 0 }] }] };
  const { known, other } = frameTypesIn(t);
  assert.deepEqual(known.map(([k]) => k), ["native", "kernel", "cpython"]);
  assert.deepEqual(other, ["beam"]);
  assert.match(frameColor("go", "main.main"), /^hsl\(190, 60%, \d+%\)$/);
  assert.notEqual(frameColor("jvm", "a"), frameColor("v8js", "a"));
  assert.equal(frameColor("go", "f"), frameColor("go", "f"));
  assert.deepEqual(frameTypesIn({ name: "all", value: 0 }), { known: [], other: [] });
});

test("timeline fallback: profiles bucketed by start, a step of about 120 points", () => {
  const pts = bucketProfiles([{ start_ms: 0, samples: 2 }, { start_ms: 15, samples: 3 }, { start_ms: 25, samples: 1 }, { start_ms: 99, samples: 7 }], 0, 30, 10);
  assert.deepEqual(pts, [[0, 2], [10, 3], [20, 1]]);
  assert.equal(stepFor(0, 3600e3), 30e3);
  assert.equal(stepFor(0, 900e3), 10e3);
  assert.equal(stepFor(0, 7 * 86400e3), 3 * 3600e3);
  assert.equal(stepFor(0, 365 * 86400e3), 86400e3);
});
