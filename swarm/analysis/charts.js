// The pages' charts (swarm/analysis/interactive.py writes the data; uPlot is inlined before this).
// Sets window.swarmCharts: per chart, what it drew, read back from the uPlot instance.
(function () {
  "use strict";
  const spec = JSON.parse(document.getElementById("swarm-chart-data").textContent);
  const PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"];
  const PHASES = ["#ff7f0e", "#1f77b4", "#2ca02c", "#9467bd"];
  const dpr = window.devicePixelRatio || 1;
  const groups = {}; // sync key -> the uPlot instances that share cursor and zoom
  const all = new Set(); // every chart drawn (resized with the window)
  const byId = {}; // chart id -> its uPlot (window.swarmPlot, for a look from outside: tests, the console)
  let syncing = false;
  window.swarmCharts = [];

  function width(el) {
    return Math.max(480, Math.min(1200, (el.clientWidth || 1000) - 10));
  }

  function fmt(v) {
    if (v == null) return "-";
    const a = Math.abs(v);
    return a >= 100 ? v.toFixed(0) : a >= 1 ? v.toFixed(2) : v.toPrecision(3);
  }

  function join(key, u, entry) {
    all.add(u);
    byId[entry.id] = u;
    if (!key) return;
    (groups[key] = groups[key] || []).push(u);
    entry.group = key;
  }

  function leave(key, u) {
    all.delete(u);
    if (key && groups[key]) groups[key] = groups[key].filter((o) => o !== u);
  }

  // a zoom (or its reset) on one chart of a group: the same x range on the others
  function zoomOthers(key) {
    return (u, scale) => {
      if (scale !== "x" || syncing || !key || !u._swarmReady) return;
      syncing = true;
      try {
        for (const o of groups[key] || []) {
          if (o !== u && o._swarmReady) o.setScale("x", { min: u.scales.x.min, max: u.scales.x.max });
        }
      } finally {
        syncing = false;
      }
    };
  }

  // vertical lines (stage starts, a ceiling), labels skipped where they would overlap
  function drawMarks(marks) {
    return (u) => {
      if (!marks.length) return;
      const { left, top, width, height } = u.bbox;
      const ctx = u.ctx;
      ctx.save();
      ctx.strokeStyle = "#888";
      ctx.fillStyle = "#555";
      ctx.lineWidth = dpr;
      ctx.setLineDash([2 * dpr, 3 * dpr]);
      ctx.font = `${11 * dpr}px sans-serif`;
      let right = -Infinity;
      for (const m of marks) {
        const x = u.valToPos(m.x, "x", true);
        if (x < left - 1 || x > left + width + 1) continue;
        ctx.beginPath();
        ctx.moveTo(x, top);
        ctx.lineTo(x, top + height);
        ctx.stroke();
        if (x + 2 * dpr > right) {
          ctx.fillText(m.label, x + 2 * dpr, top + 11 * dpr);
          right = x + 2 * dpr + ctx.measureText(m.label).width + 6 * dpr;
        }
      }
      ctx.restore();
    };
  }

  // x ticks at the data's own x values (the stages' loads), thinned so that labels never collide
  function dataTicks(xs) {
    return {
      splits: (u) => xs.filter((x) => x >= u.scales.x.min && x <= u.scales.x.max),
      values: (u, splits) => {
        let right = -Infinity;
        return splits.map((x) => {
          const label = String(x);
          const pos = u.valToPos(x, "x");
          const half = (label.length * 7) / 2 + 4;
          if (pos - half < right) return "";
          right = pos + half;
          return label;
        });
      },
    };
  }

  function readBack(u, c, entry) {
    entry.series = u.series.slice(1).map((s, i) => {
      const ys = u.data[i + 1];
      let n = 0, first = null, last = null;
      for (let j = 0; j < ys.length; j++) {
        if (ys[j] == null) continue;
        n++;
        if (first === null) first = [u.data[0][j], ys[j]];
        last = [u.data[0][j], ys[j]];
      }
      return { label: s.label, points: n, first: first, last: last, shown: s.show };
    });
    entry.x = u.data[0].length;
    entry.drawn = (entry.drawn || 0) + 1;
  }

  function xyChart(el, c, entry) {
    const series = [{ label: c.x_label, value: (u, v) => fmt(v) }];
    c.series.forEach((s, i) => {
      const color = s.color || PALETTE[i % PALETTE.length];
      series.push({
        label: s.label,
        stroke: color,
        width: 1.5,
        dash: s.dash ? [6, 4] : undefined,
        scale: s.axis,
        spanGaps: !s.points,
        value: (u, v) => fmt(v),
        paths: s.points ? () => null : undefined,
        points: s.points
          ? { show: true, space: 0, size: c.x.length > 500 ? 3 : 8, fill: color, width: 0 }
          : { show: true, size: 5 },
      });
    });
    const axes = [
      Object.assign({ label: c.x_label }, c.x_at_data ? dataTicks(c.x) : {}),
      { label: c.y_label },
    ];
    const scales = { x: { time: false } };
    if (c.y_min != null || c.y_max != null) {
      scales.y = { range: (u, lo, hi) => [c.y_min != null ? c.y_min : lo, c.y_max != null ? c.y_max : hi] };
    }
    if (c.series.some((s) => s.axis === "y2")) {
      axes.push({ scale: "y2", side: 1, label: c.y2_label, grid: { show: false } });
    }
    const opts = {
      width: width(el),
      height: 300,
      scales: scales,
      axes: axes,
      series: series,
      bands: c.band ? [{ series: [c.band[1] + 1, c.band[0] + 1], fill: "rgba(214,39,40,0.12)" }] : [],
      cursor: { drag: { x: true, y: false }, sync: c.sync ? { key: c.sync } : undefined },
      hooks: {
        draw: [drawMarks(c.marks), (u) => readBack(u, c, entry)],
        setScale: [zoomOthers(c.sync)],
        ready: [(u) => { u._swarmReady = true; }],
      },
    };
    const data = [c.x].concat(c.series.map((s) => s.values));
    const u = new uPlot(opts, data, el);
    join(c.sync, u, entry);
    return u;
  }

  // one bar per request (rows top-down by send time), its phases in colour, for one window at a time
  function timelineChart(el, c, entry) {
    const pick = document.createElement("div");
    pick.className = "timeline-pick";
    const select = document.createElement("select");
    c.windows.forEach((w, i) => {
      const o = document.createElement("option");
      o.value = String(i);
      o.textContent = `${w.label} (${w.bars.length} requests)`;
      select.appendChild(o);
    });
    select.value = String(c.selected);
    pick.append("window: ", select, "  ", legend(c.phases));
    const info = document.createElement("div");
    info.className = "timeline-info";
    el.append(pick);
    const holder = document.createElement("div");
    el.append(holder, info);
    let u = null;

    function build(wi) {
      if (u) { leave(c.sync, u); u.destroy(); }
      const bars = c.windows[wi].bars;
      const n = Math.max(bars.length, 1);
      let lo = Infinity, hi = -Infinity;
      for (const b of bars) {
        lo = Math.min(lo, b.start, ...b.bounds.filter((t) => t != null));
        hi = Math.max(hi, b.end, ...b.bounds.filter((t) => t != null));
      }
      if (!isFinite(lo)) { lo = 0; hi = 1; }
      entry.window = c.windows[wi].label;
      const opts = {
        width: width(el),
        height: Math.min(600, 120 + 4 * n),
        legend: { show: false },
        scales: { x: { time: false }, y: { range: [0, n] } },
        axes: [{ label: "seconds since start" }, { label: "request", values: (u, s) => s.map((v) => n - v) }],
        series: [{}, { label: "requests", paths: () => null, points: { show: false } }],
        cursor: { drag: { x: true, y: false }, sync: c.sync ? { key: c.sync } : undefined, points: { show: false } },
        hooks: {
          draw: [(u) => drawBars(u, bars, n, c, entry), drawMarks(c.marks || [])],
          setCursor: [(u) => describe(u, bars, n, c, info)],
          setScale: [zoomOthers(c.sync)],
          ready: [(u) => { u._swarmReady = true; }],
        },
      };
      u = new uPlot(opts, [[lo, hi], [null, null]], holder);
      join(c.sync, u, entry);
    }
    select.addEventListener("change", () => build(Number(select.value)));
    build(c.selected);
  }

  function legend(phases) {
    const span = document.createElement("span");
    phases.forEach((p, i) => {
      const sw = document.createElement("span");
      sw.style.cssText = `display:inline-block;width:12px;height:10px;margin:0 4px 0 10px;background:${PHASES[i % PHASES.length]}`;
      span.append(sw, p);
    });
    const sw = document.createElement("span");
    sw.style.cssText = "display:inline-block;width:12px;height:10px;margin:0 4px 0 10px;border:1px solid #d62728";
    span.append(sw, "not ok");
    return span;
  }

  function drawBars(u, bars, n, c, entry) {
    const ctx = u.ctx;
    const { left, top, width, height } = u.bbox;
    ctx.save();
    ctx.beginPath();
    ctx.rect(left, top, width, height);
    ctx.clip();
    let drawn = 0, phases = 0;
    bars.forEach((b, i) => {
      const y0 = u.valToPos(n - i, "y", true);
      const y1 = u.valToPos(n - i - 1, "y", true);
      const h = Math.max(dpr, (y1 - y0) * 0.8);
      const x0 = u.valToPos(b.start, "x", true), x1 = u.valToPos(b.end, "x", true);
      ctx.fillStyle = "#e4e4e4";
      ctx.fillRect(x0, y0, Math.max(dpr, x1 - x0), h);
      for (let k = 0; k + 1 < b.bounds.length; k++) {
        const a = b.bounds[k], z = b.bounds[k + 1];
        if (a == null || z == null) continue;
        const xa = u.valToPos(a, "x", true), xz = u.valToPos(z, "x", true);
        ctx.fillStyle = PHASES[k % PHASES.length];
        ctx.fillRect(xa, y0, Math.max(dpr, xz - xa), h);
        phases++;
      }
      if (b.outcome !== "ok") {
        ctx.strokeStyle = "#d62728";
        ctx.lineWidth = dpr;
        ctx.strokeRect(x0, y0, Math.max(dpr, x1 - x0), h);
      }
      drawn++;
    });
    ctx.restore();
    entry.bars = drawn;
    entry.phases = phases;
    entry.first = bars.length ? [bars[0].start, bars[0].end] : null;
    entry.drawn = (entry.drawn || 0) + 1;
  }

  function describe(u, bars, n, c, info) {
    const top = u.cursor.top;
    if (top == null || top < 0) return;
    const i = n - 1 - Math.floor(u.posToVal(top, "y"));
    const b = bars[i];
    if (!b) { info.textContent = ""; return; }
    const parts = c.phases.map((p, k) => {
      const a = b.bounds[k], z = b.bounds[k + 1];
      return `${p} ${a == null || z == null ? "-" : ((z - a) * 1000).toFixed(0) + " ms"}`;
    });
    info.textContent = `${b.id} (${b.outcome}): sent at ${b.start.toFixed(3)} s, ${parts.join(", ")}, ` +
      `whole ${((b.end - b.start) * 1000).toFixed(0)} ms`;
  }

  for (const c of spec.charts) {
    const el = document.getElementById(c.id);
    const entry = { id: c.id, kind: c.kind, title: c.title };
    window.swarmCharts.push(entry);
    try {
      if (c.kind === "timeline") timelineChart(el, c, entry);
      else xyChart(el, c, entry);
    } catch (e) {
      entry.error = String(e);
      console.error(`chart ${c.id}: ${e}`);
    }
  }
  window.swarmPlot = (id) => byId[id];
  window.swarmZoom = (id, min, max) => byId[id].setScale("x", { min: min, max: max });
  window.swarmRange = (id) => [byId[id].scales.x.min, byId[id].scales.x.max];
  window.addEventListener("resize", () => {
    for (const u of all) u.setSize({ width: width(u.root.parentNode), height: u.height });
  });
})();
