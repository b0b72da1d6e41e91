// The timeline: the selection's value over time as an area chart (d3-scale, d3-shape,
// d3-axis) with a brush (d3-brush) to pick a range, and markers for captures and trigger
// profiles. Times on the axis in the browser's locale, like every other time on the console.
import { select } from "d3-selection";
import { scaleLinear, scaleTime } from "d3-scale";
import { area, curveStepAfter } from "d3-shape";
import { axisBottom, axisLeft } from "d3-axis";
import { brushX } from "d3-brush";
import { h } from "./dom.js";
import { fmtValue } from "./query.js";
import { fmtTime, fmtTick } from "./dom.js";

const HEIGHT = 120, M = { top: 8, right: 12, bottom: 22, left: 64 };

// points [[t, v]], range [from, to], sel [f, t] or null, marks [{t, kind, label, href}] (or a
// promise of them).
// onBrush([f, t] | null) after a brush ends (null: cleared). kind: "sel" or "base" (colors).
export function timeline({ points, range, sel, unit, marks = [], onBrush, kind = "sel", label = "" }) {
  const el = h("div", { class: "timeline " + kind, "data-testid": kind === "base" ? "timeline-base" : "timeline" });
  const info = h("div", { class: "timeline-info muted", "data-testid": kind === "base" ? "timeline-base-info" : "timeline-info" });
  const wrap = h("div", { class: "timeline-wrap" }, label ? h("div", { class: "timeline-label", text: label }) : null, el, info);
  const total = points.reduce((a, [, v]) => a + v, 0);
  const say = (s) => {
    info.textContent = s
      ? `${label ? label + ": " : ""}${fmtTime(s[0])} → ${fmtTime(s[1])} (drag to change, click outside to clear)`
      : `${fmtValue(total, unit)} in the range · drag across the chart to select`;
  };
  say(sel);
  requestAnimationFrame(() => {
    const width = Math.max(320, el.clientWidth || 900);
    const x = scaleTime().domain(range).range([M.left, width - M.right]);
    const max = points.reduce((a, [, v]) => Math.max(a, v), 0) || 1;
    const y = scaleLinear().domain([0, max]).nice(4).range([HEIGHT - M.bottom, M.top]);
    const svg = select(el).append("svg").attr("width", width).attr("height", HEIGHT).attr("class", "timeline-svg");
    const step = points.length > 1 ? points[1][0] - points[0][0] : 0;
    // the last step drawn to its end, within the range
    const inRange = points.filter(([t]) => t < range[1]);
    const last = inRange[inRange.length - 1];
    const data = last ? [...inRange, [Math.min(last[0] + step, range[1]), last[1]]] : [];
    svg.append("path").datum(data).attr("class", "timeline-area")
      .attr("d", area().curve(curveStepAfter).x((d) => x(d[0])).y0(y(0)).y1((d) => y(d[1])));
    svg.append("g").attr("class", "axis").attr("transform", `translate(0,${HEIGHT - M.bottom})`)
      .call(axisBottom(x).ticks(Math.max(2, Math.floor(width / 110))).tickFormat((d) => fmtTick(d, range)));
    svg.append("g").attr("class", "axis").attr("transform", `translate(${M.left},0)`)
      .call(axisLeft(y).ticks(3).tickFormat((v) => fmtValue(v, unit === "samples" ? "count" : unit)));
    // under the brush, drawn when they arrive
    const mk = svg.append("g").attr("class", "marks");
    Promise.resolve(marks).then((list) => {
      for (const m of list) {
        if (m.t < range[0] || m.t > range[1]) continue;
        const g = mk.append("g").attr("class", "mark " + m.kind).attr("transform", `translate(${x(m.t)},0)`);
        g.append("line").attr("y1", M.top).attr("y2", HEIGHT - M.bottom);
        g.append("path").attr("d", "M-5,0L5,0L0,7Z");
        g.append("title").text(`${m.label} · ${fmtTime(m.t)}`);
      }
    }, () => {});
    const brush = brushX().extent([[M.left, M.top], [width - M.right, HEIGHT - M.bottom]])
      .on("end", (ev) => {
        if (!ev.sourceEvent) return; // moved by code
        const s = ev.selection ? ev.selection.map((px) => x.invert(px).getTime()) : null;
        say(s);
        onBrush && onBrush(s && s[1] - s[0] >= 1000 ? s : null);
      });
    const bg = svg.append("g").attr("class", "brush").call(brush);
    if (sel) bg.call(brush.move, [Math.max(x(sel[0]), M.left), Math.min(x(sel[1]), width - M.right)]);
  });
  return wrap;
}
