// A flame graph drawn on one <canvas>: the tree flattened once into typed arrays (tree.js
// flattenTree), each draw one pass over the visible frames in depth-first order, a frame
// narrower than a pixel skipped with its subtree (runs of such siblings drawn as one grey
// block), labels fitted to their box with widths measured once per name and width bucket.
// Hover and click find the frame under the pointer from its coordinates (tree.js nodeAt): a
// box outlines it and a tooltip shows its label. Click zooms to a frame (its ancestors stay,
// faded, full width; the root zooms out); search highlights frames whose name matches.
// Root at the bottom, or at the top when inverted.
import { flattenTree, nodeAt } from "./tree.js";
import { h } from "./dom.js";

const ROW = 18, MIN_W = 1, LABEL_MIN = 28, PAD = 4;
const FONT = "12px Verdana, sans-serif";
const HIGHLIGHT = "#e600e6", NARROW = "#d4d4d4";

// el: the (empty) element to draw into, as wide as it is laid out. fill(f, i): frame i's color;
// label(f, i): its tooltip; onClick(f, i) / onHover(f, i) after a click / on entering a frame.
export function flameCanvas(el, tree, { inverted = false, fill, label, onClick = null, onHover = null } = {}) {
  const f = flattenTree(tree);
  const canvas = h("canvas", { class: "flame-canvas", role: "img", "aria-label": "flame graph" });
  const hover = h("div", { class: "flame-hover", hidden: true });
  const tip = h("div", { class: "flame-tip", hidden: true });
  el.append(canvas, hover, tip);
  const ctx = canvas.getContext("2d");
  const fills = new Array(f.n);
  const fitted = new Map(); // name index * 4096 + width bucket → label text
  const nameW = new Float32Array(f.names.length).fill(-1);
  let zoomed = 0, hl = null, width = 0, hovered = -1;

  const rowY = (d) => (inverted ? d : f.maxDepth - d) * ROW;
  const scale = () => width / (f.value[zoomed] || 1);

  // Calls box(i, x, w) for each frame drawn (ancestors of the zoomed frame first, full width)
  // and narrow(depth, x, w) for each run of frames too narrow to draw on their own.
  const visit = (box, narrow) => {
    const k = scale(), zx = f.x0[zoomed];
    for (let a = f.parent[zoomed]; a >= 0; a = f.parent[a]) box(a, 0, width, true);
    const runX = new Float64Array(f.maxDepth + 1).fill(-1), runW = new Float64Array(f.maxDepth + 1);
    const flush = (d) => {
      if (runX[d] >= 0 && runW[d] >= MIN_W) narrow(d, runX[d], runW[d]);
      runX[d] = -1;
    };
    for (let i = zoomed, e = f.end[zoomed]; i < e;) {
      const w = f.value[i] * k, x = (f.x0[i] - zx) * k, d = f.depth[i];
      if (w < MIN_W) {
        if (runX[d] >= 0 && Math.abs(runX[d] + runW[d] - x) < 0.01) runW[d] += w;
        else { flush(d); runX[d] = x; runW[d] = w; }
        i = f.end[i];
        continue;
      }
      flush(d);
      box(i, x, w, false);
      i++;
    }
    for (let d = 0; d <= f.maxDepth; d++) flush(d);
  };

  const colorOf = (i) => {
    if (hl && hl[i]) return HIGHLIGHT;
    return fills[i] || (fills[i] = fill(f, i));
  };
  const fit = (i, avail) => {
    const k = f.name[i], name = f.names[k];
    if (nameW[k] < 0) nameW[k] = ctx.measureText(name).width;
    if (nameW[k] <= avail) return name;
    const bucket = Math.floor(avail / 8);
    const key = k * 4096 + Math.min(bucket, 4095);
    let s = fitted.get(key);
    if (s === undefined) {
      const room = bucket * 8;
      let m = Math.min(name.length - 1, Math.floor((room / nameW[k]) * name.length));
      s = "";
      while (m >= 2) {
        const t = name.slice(0, m) + "…";
        if (ctx.measureText(t).width <= room) { s = t; break; }
        m = Math.floor(m * 0.85);
      }
      fitted.set(key, s);
    }
    return s;
  };

  let drawn = 0;
  const draw = () => {
    width = Math.max(300, Math.floor(el.clientWidth || 900));
    const height = (f.maxDepth + 1) * ROW;
    const dpr = window.devicePixelRatio || 1;
    if (canvas.width !== Math.round(width * dpr) || canvas.height !== Math.round(height * dpr)) {
      canvas.width = Math.round(width * dpr);
      canvas.height = Math.round(height * dpr);
      canvas.style.width = width + "px";
      canvas.style.height = height + "px";
    }
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, width, height);
    ctx.font = FONT;
    ctx.textBaseline = "middle";
    drawn = 0;
    visit((i, x, w, faded) => {
      const y = rowY(f.depth[i]);
      ctx.globalAlpha = faded ? 0.5 : 0.85;
      ctx.fillStyle = colorOf(i);
      ctx.fillRect(x, y, w > 2 ? w - 1 : w, ROW - 1);
      if (w >= LABEL_MIN) {
        const s = fit(i, w - 2 * PAD);
        if (s) {
          ctx.globalAlpha = faded ? 0.6 : 1;
          ctx.fillStyle = "#000";
          ctx.fillText(s, x + PAD, y + ROW / 2);
        }
      }
      drawn++;
    }, (d, x, w) => {
      ctx.globalAlpha = 0.85;
      ctx.fillStyle = NARROW;
      ctx.fillRect(x, rowY(d), w, ROW - 1);
    });
    ctx.globalAlpha = 1;
    canvas.setAttribute("data-frames", String(drawn));
    showHover(-1);
  };

  // the frame drawn under a point of the canvas (CSS pixels), or -1
  const frameAt = (px, py) => {
    if (!width || px < 0 || px >= width) return -1;
    const row = Math.floor(py / ROW);
    const d = inverted ? row : f.maxDepth - row;
    if (d < 0 || d > f.maxDepth) return -1;
    const i = nodeAt(f, zoomed, f.x0[zoomed] + px / scale(), d);
    if (i < 0 || (f.depth[i] >= f.depth[zoomed] && f.value[i] * scale() < MIN_W)) return -1;
    return i;
  };
  const boxOf = (i) => {
    if (f.depth[i] <= f.depth[zoomed]) return { x: 0, w: width };
    const k = scale();
    return { x: (f.x0[i] - f.x0[zoomed]) * k, w: f.value[i] * k };
  };
  const showHover = (i, px = 0, py = 0) => {
    if (i < 0) {
      hover.hidden = tip.hidden = true;
      hovered = -1;
      return;
    }
    const b = boxOf(i);
    hover.style.left = b.x + "px";
    hover.style.top = rowY(f.depth[i]) + "px";
    hover.style.width = Math.max(1, b.w - 1) + "px";
    hover.style.height = ROW - 1 + "px";
    hover.hidden = false;
    if (i !== hovered) tip.textContent = label(f, i);
    tip.hidden = false;
    const left = px + 14 + tip.offsetWidth > width ? Math.max(0, px - 14 - tip.offsetWidth) : px + 14;
    tip.style.left = left + "px";
    tip.style.top = py + 16 + "px";
    if (i !== hovered && onHover) onHover(f, i);
    hovered = i;
  };
  const point = (e) => {
    const r = canvas.getBoundingClientRect();
    return [e.clientX - r.left, e.clientY - r.top];
  };
  canvas.addEventListener("mousemove", (e) => {
    const [px, py] = point(e);
    showHover(frameAt(px, py), px, py);
  });
  canvas.addEventListener("mouseleave", () => showHover(-1));
  canvas.addEventListener("click", (e) => {
    const i = frameAt(...point(e));
    if (i < 0) return;
    zoomed = i;
    draw();
    if (onClick) onClick(f, i);
  });

  // what a test (or a script) finds the drawn frames by: name, type, depth, value, whether
  // the search highlights it, and its box on the canvas (CSS pixels)
  canvas.flameFrames = () => {
    const out = [];
    visit((i, x, w) => out.push({ name: f.names[f.name[i]], type: f.types[f.type[i]], depth: f.depth[i], value: f.value[i],
      highlighted: !!(hl && hl[i]), x, y: rowY(f.depth[i]), w, h: ROW - 1 }), () => {});
    return out;
  };

  let observed = 0;
  const ro = typeof ResizeObserver === "function" ? new ResizeObserver(() => {
    const w = Math.max(300, Math.floor(el.clientWidth || 900));
    if (w !== width && !observed) observed = requestAnimationFrame(() => { observed = 0; if (el.isConnected) draw(); else ro.disconnect(); });
  }) : null;
  draw();
  if (ro) ro.observe(el);

  return {
    flat: f,
    // match(name) → bool for every frame name, or null to clear
    search(match) {
      if (!match) hl = null;
      else {
        const byName = f.names.map((s) => (match(s) ? 1 : 0));
        hl = new Uint8Array(f.n);
        for (let i = 0; i < f.n; i++) hl[i] = byName[f.name[i]];
      }
      draw();
    },
    resetZoom() { zoomed = 0; draw(); },
    redraw: draw,
  };
}
