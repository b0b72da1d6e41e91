// Pure functions over a flame graph tree ({name, value, children}, value = total): self
// weights, top functions and a function's sandwich. No DOM, no d3: unit-tested under node.

export function selfOf(d) {
  const kids = d.children || [];
  let s = d.value;
  for (const c of kids) s -= c.value;
  return Math.max(0, s);
}

// Top functions from a tree: self = weight where the function is the leaf, total = weight of
// stacks that contain it (counted once per stack even when recursive).
export function topFromTree(root) {
  const m = new Map();
  const walk = (n, onStack) => {
    const name = n.name;
    let e = m.get(name);
    if (!e) m.set(name, (e = { name, self: 0, total: 0 }));
    e.self += selfOf(n);
    const first = !onStack.has(name);
    if (first) {
      e.total += n.value;
      onStack.add(name);
    }
    for (const c of n.children || []) walk(c, onStack);
    if (first) onStack.delete(name);
  };
  for (const c of root.children || []) walk(c, new Set());
  return [...m.values()];
}

function mergeInto(dst, src) {
  dst.value += src.value;
  for (const c of src.children || []) {
    dst.children = dst.children || [];
    let d = dst.children.find((x) => x.name === c.name);
    if (!d) dst.children.push((d = { name: c.name, value: 0 }));
    mergeInto(d, c);
  }
}

// Sandwich of fn: callees = its subtrees merged (outermost occurrences); callers = the paths
// from the root to each outermost occurrence, reversed, weighted by that occurrence.
export function sandwich(root, fn) {
  const callees = { name: fn, value: 0, children: [] };
  const callers = { name: fn, value: 0, children: [] };
  const walk = (n, path) => {
    if (n.name === fn) {
      mergeInto(callees, { name: fn, value: n.value, children: n.children || [] });
      // the path is root-first; callers read from fn outwards
      const rev = path.slice().reverse();
      let node = { name: fn, value: n.value };
      let cur = node;
      for (const p of rev) {
        const k = { name: p, value: n.value };
        cur.children = [k];
        cur = k;
      }
      mergeInto(callers, node);
      return;
    }
    for (const c of n.children || []) walk(c, [...path, n.name]);
  };
  for (const c of root.children || []) walk(c, []);
  return { callers, callees };
}
