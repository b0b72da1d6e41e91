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

// A tree as flat arrays in depth-first order, children by name (ascending): what the canvas
// flame graph draws and hit-tests without one object per frame. For node i: value, self, its
// offset x0 (in value units, from the root's left edge), depth, parent (-1 for the root),
// end (one past its last descendant: i's subtree is i..end-1), name and type (indices into
// names and types), and, for a diff, delta and base. maxDepth: the deepest node's depth.
export function flattenTree(root) {
  let n = 0;
  const count = [root];
  while (count.length) {
    const x = count.pop();
    n++;
    if (x.children) for (const c of x.children) count.push(c);
  }
  const f = {
    n, maxDepth: 0, names: [], types: [""],
    value: new Float64Array(n), self: new Float64Array(n), x0: new Float64Array(n),
    depth: new Uint16Array(n), parent: new Int32Array(n), end: new Uint32Array(n),
    name: new Uint32Array(n), type: new Uint8Array(n), delta: null, base: null,
  };
  const nameIdx = new Map(), typeIdx = new Map([["", 0]]);
  const byName = (a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
  const sorted = (kids) => {
    for (let j = 1; j < kids.length; j++) if (byName(kids[j - 1], kids[j]) > 0) return kids.slice().sort(byName);
    return kids;
  };
  // an explicit stack (a deep tree is no recursion limit): nodes, with their parent and offset
  const stack = new Array(n), sParent = new Int32Array(n), sX0 = new Float64Array(n);
  let top = 0;
  stack[top] = root; sParent[top] = -1; sX0[top] = 0; top++;
  for (let i = 0; top > 0; i++) {
    top--;
    const x = stack[top], parent = sParent[top], x0 = sX0[top];
    stack[top] = null;
    const v = Number(x.value) || 0;
    const depth = parent < 0 ? 0 : f.depth[parent] + 1;
    f.value[i] = v;
    f.x0[i] = x0;
    f.depth[i] = depth;
    f.parent[i] = parent;
    if (depth > f.maxDepth) f.maxDepth = depth;
    const name = x.name === undefined ? "" : String(x.name);
    let k = nameIdx.get(name);
    if (k === undefined) { k = f.names.length; f.names.push(name); nameIdx.set(name, k); }
    f.name[i] = k;
    if (x.type) {
      let t = typeIdx.get(x.type);
      if (t === undefined) { t = f.types.length; f.types.push(String(x.type)); typeIdx.set(x.type, t); }
      f.type[i] = t;
    }
    if (x.delta !== undefined || x.base !== undefined) {
      if (!f.delta) { f.delta = new Float64Array(n); f.base = new Float64Array(n); }
      f.delta[i] = Number(x.delta) || 0;
      f.base[i] = Number(x.base) || 0;
    }
    let s = v;
    if (x.children && x.children.length) {
      const kids = sorted(x.children);
      let off = x0;
      for (const c of kids) off += Number(c.value) || 0;
      s -= off - x0;
      // pushed last-first: the first child is drawn (and numbered) next
      for (let j = kids.length - 1; j >= 0; j--) {
        off -= Number(kids[j].value) || 0;
        stack[top] = kids[j]; sParent[top] = i; sX0[top] = off; top++;
      }
    }
    f.self[i] = Math.max(0, s);
  }
  // subtree ends from subtree sizes, children before their parents
  const size = new Uint32Array(n).fill(1);
  for (let i = n - 1; i > 0; i--) size[f.parent[i]] += size[i];
  for (let i = 0; i < n; i++) f.end[i] = i + size[i];
  return f;
}

// The deepest node of the flat tree f whose range holds value offset v at depth d, within
// node z's subtree (the walk starts at z, whose ancestors span every offset); -1 when none.
export function nodeAt(f, z, v, d) {
  if (d < f.depth[z]) {
    let a = z;
    while (a >= 0 && f.depth[a] > d) a = f.parent[a];
    return a;
  }
  let i = z;
  if (v < f.x0[z] || v >= f.x0[z] + f.value[z]) return -1;
  while (f.depth[i] < d) {
    let c = i + 1, hit = -1;
    while (c < f.end[i]) {
      if (v >= f.x0[c] && v < f.x0[c] + f.value[c]) { hit = c; break; }
      c = f.end[c];
    }
    if (hit < 0) return -1;
    i = hit;
  }
  return i;
}
