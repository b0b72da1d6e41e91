// The console's pure logic, under node's test runner (no browser): locating a key path in
// YAML, the version diff, secret redaction, top functions and the sandwich from a tree.
import { test } from "node:test";
import assert from "node:assert/strict";
import { lineOfPath, diffLines } from "../src/pages/configs.js";
import { redact } from "../src/pages/agent.js";
import { topFromTree, sandwich } from "../src/tree.js";

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
