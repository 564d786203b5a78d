// otelcol-nemo run pages. No dependencies, no external assets; the data is
// the page's inline JSON (#nemo-data), refreshed from /api/runs[/<key>].
"use strict";
(function () {
  const body = document.body;
  const refresh = Number(body.dataset.refresh) || 2000;
  const live = body.dataset.static !== "true";

  // Sequential palette (viridis), readable with every common colour vision
  // deficiency: dark = slow, bright = fast.
  const VIRIDIS = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  function viridis(t) {
    t = Math.max(0, Math.min(1, t)) * (VIRIDIS.length - 1);
    const i = Math.min(Math.floor(t), VIRIDIS.length - 2), f = t - i, a = VIRIDIS[i], b = VIRIDIS[i + 1];
    return [0, 1, 2].map((k) => Math.round(a[k] + (b[k] - a[k]) * f));
  }
  // Okabe-Ito colours, and a grey, for the goodput categories.
  const CATEGORY_COLOURS = {
    productive: "#0072b2", straggler: "#e69f00", startup: "#56b4e9", checkpoint_load: "#cc79a7",
    checkpoint_save: "#f0e442", evaluation: "#009e73", stalled: "#d55e00", lost_progress: "#000000",
    restart: "#882255", other: "#cccccc", not_settled_yet: "repeating-linear-gradient(45deg, #ddd 0 4px, #fff 4px 8px)",
  };

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function row(cells) {
    const tr = document.createElement("tr");
    for (const c of cells) tr.appendChild(c instanceof Node ? wrapCell(c) : el("td", c));
    return tr;
  }
  function wrapCell(node) { const td = document.createElement("td"); td.appendChild(node); return td; }
  function pct(x) { return (x * 100).toFixed(1) + "%"; }
  function secs(x) {
    if (x >= 3600) return (x / 3600).toFixed(2) + " h";
    if (x >= 60) return (x / 60).toFixed(1) + " min";
    return x.toFixed(x < 10 ? 3 : 1) + " s";
  }
  function human(name) { return name.replace(/_/g, " "); }
  function fill(tbody, rows, empty, cols) {
    tbody.replaceChildren();
    if (!rows.length) { const tr = row([empty]); tr.className = "empty"; tr.firstChild.colSpan = cols; tbody.appendChild(tr); return; }
    for (const r of rows) tbody.appendChild(r);
  }
  function poll(url, render) {
    if (!live) return;
    setInterval(() => {
      fetch(url, { cache: "no-store" }).then((r) => (r.ok ? r.json() : null)).then((d) => { if (d) render(d); }).catch(() => {});
    }, refresh);
  }
  const initial = JSON.parse(document.getElementById("nemo-data").textContent || "null");

  // ---- the list of runs ------------------------------------------------
  function renderIndex(runs) {
    const rows = runs.map((r) => {
      const a = el("a", r.key);
      a.href = "/runs/" + encodeURIComponent(r.key);
      const tr = row([a, r.state + (r.stall_kind ? " (" + r.stall_kind + ")" : ""), r.ranks, r.steps,
        r.last_iteration ?? "", r.last_step_seconds != null ? r.last_step_seconds.toFixed(3) + " s" : "",
        r.goodput != null ? pct(r.goodput) : "", r.updated]);
      tr.dataset.key = r.key;
      tr.children[1].className = "state-" + r.state;
      return tr;
    });
    fill(document.querySelector("#runs tbody"), rows,
      "No run yet: point a training job at this collector (OTEL_EXPORTER_OTLP_ENDPOINT) and its steps appear here.", 8);
  }

  // ---- one run ---------------------------------------------------------
  let run = null;
  const cursor = { row: 0, col: 0, set: false };

  function renderRun(d) {
    run = d;
    const state = document.getElementById("state");
    state.textContent = d.state + (d.stall_kind ? " (" + d.stall_kind + ")" : "");
    state.className = "state state-" + d.state;
    const parts = [d.ranks + " ranks", d.steps + " steps held"];
    if (d.last_iteration != null) parts.push("last iteration " + d.last_iteration);
    if (d.last_step_seconds != null) parts.push("last step " + secs(d.last_step_seconds));
    if (d.ranks_not_shown) parts.push(d.ranks_not_shown + " more ranks not shown (max_ranks)");
    if (d.service) parts.push("service " + d.service);
    document.getElementById("summary").textContent = parts.join(" · ");
    renderBanner(d);
    renderGoodput(d.goodput_detail);
    renderStepTimes(d.step_times || []);
    renderHeatmap(d);
    renderStragglers(d);
    renderStalls(d.stalls || []);
    renderDeadLetters(d.dead_letters || []);
  }

  // The run's dead-letter files: what a network destination refused, rejected
  // or kept failing, kept on disk (nemo_otlp, the agents' spool).
  function renderDeadLetters(files) {
    const p = document.getElementById("dead-letters");
    if (!files.length) { p.hidden = true; p.textContent = ""; return; }
    const bytes = files.reduce((n, f) => n + f.bytes, 0);
    const last = files.map((f) => f.modified).sort().pop();
    const byDest = {};
    for (const f of files) (byDest[f.destination] = byDest[f.destination] || []).push(f.signal);
    const dests = Object.keys(byDest).sort().map((k) => k + " (" + byDest[k].join(", ") + ")");
    const size = bytes < 1e3 ? bytes + " bytes" : bytes < 1e6 ? (bytes / 1e3).toFixed(1) + " kB" : (bytes / 1e6).toFixed(1) + " MB";
    p.textContent = "Dead letters: " + size + " in " + files.length +
      " file" + (files.length > 1 ? "s" : "") + " for " + dests.join(", ") + ", last written " + last.replace("T", " ").replace(/\.\d+/, "") +
      ": items a destination refused, rejected or kept failing, kept in " + files[0].path.replace(/\/[^/]+\/[^/]+$/, "/") +
      ". Fix the cause, then send them again with configs/replay.yaml (NEMO_REPLAY_FROM=" + Object.keys(byDest).sort()[0] + ").";
    p.hidden = false;
  }

  function renderBanner(d) {
    const banner = document.getElementById("banner");
    const stall = (d.stalls || []).filter((s) => s.ongoing).pop();
    if (!stall || (d.state !== "stalled" && d.state !== "paused")) { banner.hidden = true; banner.textContent = ""; return; }
    let text = (d.state === "paused" ? "Paused" : "Stalled (" + stall.kind + ")") + " at iteration " + stall.iteration;
    if (stall.culprit_ranks.length) text += ": rank" + (stall.culprit_ranks.length > 1 ? "s " : " ") + stall.culprit_ranks.join(", ");
    if (stall.culprit_hosts.length) text += " on " + stall.culprit_hosts.join(", ");
    text += ". " + stall.message;
    banner.textContent = text;
    banner.hidden = false;
  }

  function renderGoodput(g) {
    const bar = document.getElementById("goodput-bar"), list = document.getElementById("goodput-list"), text = document.getElementById("goodput-text");
    bar.replaceChildren(); list.replaceChildren();
    if (!g) { text.textContent = "No goodput yet: nemo_steps sends it from the run's first decided step on."; bar.hidden = true; return; }
    bar.hidden = false;
    // Live figures: the time settled by category, and the rest of the wall
    // time, not settled yet (the steps since the last checkpoint save).
    const categories = g.live && g.unsettled_seconds > 0 ? g.categories.concat([{ name: "not_settled_yet", seconds: g.unsettled_seconds }]) : g.categories;
    const total = categories.reduce((a, c) => a + c.seconds, 0) || 1;
    text.textContent = "Goodput " + pct(g.goodput) + " of " + secs(g.wall_seconds) + (g.final ? " (final)" : " so far") +
      (g.live ? " (live, every tick)" : "") + (g.attempts > 1 ? ", " + g.attempts + " attempts" : "") + ". " +
      (g.live && g.message ? "Last record: " + g.message : g.message);
    text.dataset.goodput = String(g.goodput);
    text.dataset.live = String(Boolean(g.live));
    for (const c of categories.slice().sort((a, b) => b.seconds - a.seconds)) {
      const share = c.seconds / total;
      if (share > 0) {
        const s = el("span");
        s.style.width = (share * 100) + "%";
        s.style.background = CATEGORY_COLOURS[c.name] || "#888";
        s.title = human(c.name) + " " + pct(share);
        bar.appendChild(s);
      }
      const li = el("li");
      const sw = el("span", null, "swatch");
      sw.style.background = CATEGORY_COLOURS[c.name] || "#888";
      li.appendChild(sw);
      li.appendChild(document.createTextNode(human(c.name) + ": " + pct(share) + " (" + secs(c.seconds) + ")"));
      li.dataset.category = c.name;
      list.appendChild(li);
    }
  }

  function renderStepTimes(times) {
    const cv = document.getElementById("steps"), ctx = cv.getContext("2d");
    const w = cv.width, h = cv.height, pad = 40;
    ctx.clearRect(0, 0, w, h);
    if (!times.length) return;
    const ymax = Math.max(...times.map((t) => Math.max(t.slowest_busy_seconds, t.median_duration_seconds))) * 1.1 || 1;
    const x = (i) => pad + (times.length === 1 ? 0 : (i / (times.length - 1)) * (w - pad - 10));
    const y = (v) => h - 20 - (v / ymax) * (h - 30);
    ctx.strokeStyle = "#999"; ctx.fillStyle = "#555"; ctx.font = "12px system-ui, sans-serif";
    ctx.beginPath(); ctx.moveTo(pad, 5); ctx.lineTo(pad, h - 20); ctx.lineTo(w - 5, h - 20); ctx.stroke();
    ctx.fillText(ymax.toFixed(2) + " s", 2, 14);
    ctx.fillText("iteration " + times[0].iteration, pad, h - 5);
    const last = "iteration " + times[times.length - 1].iteration;
    ctx.fillText(last, w - 10 - ctx.measureText(last).width, h - 5);
    const series = [["median_duration_seconds", "#999", [4, 3]], ["median_busy_seconds", "#0072b2", []], ["slowest_busy_seconds", "#d55e00", []]];
    for (const [key, colour, dash] of series) {
      ctx.strokeStyle = colour; ctx.lineWidth = 2; ctx.setLineDash(dash); ctx.beginPath();
      times.forEach((t, i) => (i ? ctx.lineTo(x(i), y(t[key])) : ctx.moveTo(x(i), y(t[key]))));
      ctx.stroke();
    }
    ctx.setLineDash([]);
    const t = times[times.length - 1];
    document.getElementById("steps-readout").textContent = "Iteration " + t.iteration + ": median rank busy " + secs(t.median_busy_seconds) +
      ", slowest rank " + t.slowest_rank + " busy " + secs(t.slowest_busy_seconds) + ", step " + secs(t.median_duration_seconds) + ".";
  }

  // The heatmap: one pixel per cell drawn into an offscreen canvas, scaled
  // up without smoothing (a 1,000 x 500 map is 500,000 pixels, no DOM nodes),
  // as wide as the page, the ranks labelled on the left. Past MAX_ROWS
  // ranks, a row stands for a group of consecutive ranks, coloured by the
  // slowest of them in each step (a straggler still shows); clicking such a
  // row zooms in to its ranks.
  const MAX_ROWS = 600, GUTTER = 180;
  const geom = { cw: 1, ch: 1, rows: 0, cols: 0, left: GUTTER, group: 1, from: 0, to: 0 };
  const zoom = { from: 0, to: Infinity };
  function renderHeatmap(d) {
    const cv = document.getElementById("heatmap"), ranks = d.rank_list || [], its = d.iterations || [];
    const from = Math.min(zoom.from, ranks.length), to = Math.min(zoom.to, ranks.length), n = to - from, cols = its.length;
    const group = Math.max(1, Math.ceil(n / MAX_ROWS)), rows = Math.ceil(n / group);
    const avail = Math.max(300, (cv.parentElement.clientWidth || 1100) - GUTTER - 4);
    const cw = Math.max(2, Math.min(200, Math.floor(avail / Math.max(cols, 1))));
    const ch = Math.max(1, Math.min(20, Math.floor(640 / Math.max(rows, 1))));
    Object.assign(geom, { cw, ch, rows, cols, group, from, to });
    cv.width = GUTTER + Math.max(cols * cw, 1); cv.height = Math.max(rows * ch, 1);
    cv.dataset.rows = String(rows); cv.dataset.cols = String(cols); cv.dataset.group = String(group);
    document.getElementById("heatmap-all").hidden = from === 0 && to === ranks.length;
    document.getElementById("heatmap-axes").textContent = rows && cols
      ? "Rows: ranks " + ranks[from].rank + " (top) to " + ranks[to - 1].rank + " (bottom)" +
        (group > 1 ? ", " + group + " ranks a row (the slowest of them in each step; click a row to zoom in)" : "") +
        "; columns: iterations " + its[0] + " (left) to " + its[cols - 1] + " (right)."
      : "No step yet.";
    const ctx = cv.getContext("2d");
    ctx.clearRect(0, 0, cv.width, cv.height);
    if (!rows || !cols) { cv.dataset.marked = ""; return; }
    const img = new ImageData(cols, rows), px = img.data;
    for (let c = 0; c < cols; c++) {
      const bytes = atob(d.heatmap[c]);
      for (let r = 0; r < rows; r++) {
        let q = 0;
        for (let k = from + r * group; k < Math.min(to, from + (r + 1) * group); k++) {
          const v = bytes.charCodeAt(k);
          if (v && (!q || v < q)) q = v;
        }
        const o = (r * cols + c) * 4, rgb = q === 0 ? [221, 221, 221] : viridis((q - 1) / 254);
        px[o] = rgb[0]; px[o + 1] = rgb[1]; px[o + 2] = rgb[2]; px[o + 3] = 255;
      }
    }
    const off = document.createElement("canvas");
    off.width = cols; off.height = rows;
    off.getContext("2d").putImageData(img, 0, 0);
    ctx.imageSmoothingEnabled = false;
    ctx.drawImage(off, GUTTER, 0, cols * cw, rows * ch);
    // The labels: every row when it is tall enough, else every few.
    ctx.fillStyle = "#333"; ctx.font = Math.min(12, Math.max(9, ch)) + "px system-ui, sans-serif"; ctx.textBaseline = "middle";
    const every = Math.max(1, Math.ceil(16 / ch)); // labels at least 16 px apart
    for (let r = 0; r < rows; r += every) {
      const a = ranks[from + r * group], b = ranks[Math.min(to, from + (r + 1) * group) - 1];
      const text = group === 1 ? "rank " + a.rank + (a.host ? " · " + a.host : "") : "ranks " + a.rank + "–" + b.rank;
      ctx.fillText(text, 2, Math.max(6, r * ch + ch / 2), GUTTER - 16);
    }
    // Straggler steps, outlined (black and white: visible on every colour).
    const rowOf = new Map(ranks.map((r, i) => [r.rank, i])), colOf = new Map(its.map((it, i) => [it, i]));
    const marked = [];
    for (const s of d.stragglers || []) {
      const i = rowOf.get(s.rank), c = colOf.get(s.iteration);
      if (i === undefined || c === undefined || i < from || i >= to) continue;
      const r = Math.floor((i - from) / group), x = GUTTER + c * cw;
      marked.push(s.rank + "@" + s.iteration);
      ctx.lineWidth = 2; ctx.strokeStyle = "#000";
      ctx.strokeRect(x - 2, r * ch - 2, cw + 4, ch + 4);
      ctx.lineWidth = 1; ctx.strokeStyle = "#fff";
      ctx.strokeRect(x - 0.5, r * ch - 0.5, cw + 1, ch + 1);
      // And a marker in the gutter: at 1 px a row, the row is found at a glance.
      const y = r * ch + ch / 2;
      ctx.fillStyle = "#d55e00";
      ctx.beginPath(); ctx.moveTo(GUTTER - 12, y - 6); ctx.lineTo(GUTTER - 2, y); ctx.lineTo(GUTTER - 12, y + 6); ctx.closePath(); ctx.fill();
    }
    cv.dataset.marked = marked.join(" ");
    if (cursor.set) readCell();
  }
  // cellAt is display row r and column c: its rank (the slowest of the row's
  // ranks in that step when a row holds several) and score.
  function cellAt(r, c) {
    const ranks = run.rank_list, its = run.iterations, bytes = atob(run.heatmap[c]);
    const first = geom.from + r * geom.group, last = Math.min(geom.to, first + geom.group) - 1;
    let k = first;
    for (let i = first; i <= last; i++) {
      const v = bytes.charCodeAt(i);
      if (v && (!bytes.charCodeAt(k) || v < bytes.charCodeAt(k))) k = i;
    }
    const q = bytes.charCodeAt(k);
    const st = (run.stragglers || []).find((s) => s.rank === ranks[k].rank && s.iteration === its[c]);
    return { rank: ranks[k].rank, host: ranks[k].host, iteration: its[c], relative: q ? (q - 1) / 254 : null, straggler: st,
      group: last > first ? ranks[first].rank + "–" + ranks[last].rank : "" };
  }
  function readCell() {
    if (!run || !geom.rows || !geom.cols) return;
    cursor.row = Math.max(0, Math.min(geom.rows - 1, cursor.row));
    cursor.col = Math.max(0, Math.min(geom.cols - 1, cursor.col));
    const c = cellAt(cursor.row, cursor.col);
    let text = (c.group ? "Ranks " + c.group + ", the slowest: rank " : "Rank ") + c.rank + (c.host ? " on " + c.host : "") + ", iteration " + c.iteration + ": ";
    text += c.relative === null ? "no step" : "relative score " + c.relative.toFixed(2);
    if (c.straggler) text += ", straggler (busy " + secs(c.straggler.busy_seconds) + ", individual score " + c.straggler.individual_score.toFixed(2) + ")";
    document.getElementById("heatmap-readout").textContent = text;
  }
  function wireHeatmap() {
    const cv = document.getElementById("heatmap");
    cv.addEventListener("keydown", (e) => {
      const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1], PageUp: [-10, 0], PageDown: [10, 0], Home: [0, -1e9], End: [0, 1e9] };
      if (e.key === "Enter" && cursor.set && live) { e.preventDefault(); const c = cellAt(cursor.row, cursor.col); if (c) openTimeline(c.iteration); return; }
      const m = moves[e.key];
      if (!m) return;
      e.preventDefault();
      cursor.row += m[0]; cursor.col += m[1]; cursor.set = true;
      readCell();
    });
    cv.addEventListener("mousemove", (e) => {
      const b = cv.getBoundingClientRect();
      if (e.clientX - b.left < GUTTER) return;
      cursor.row = Math.floor((e.clientY - b.top) / geom.ch); cursor.col = Math.floor((e.clientX - b.left - GUTTER) / geom.cw); cursor.set = true;
      readCell();
    });
    cv.addEventListener("click", () => {
      if (!cursor.set) return;
      if (geom.group > 1) { // zoom in to this row's ranks and those around them
        const first = geom.from + cursor.row * geom.group;
        zoom.from = Math.max(0, Math.min(first - MAX_ROWS / 2, run.rank_list.length - MAX_ROWS)); zoom.to = zoom.from + MAX_ROWS;
        cursor.row = first - zoom.from;
        renderHeatmap(run);
        return;
      }
      const c = cellAt(cursor.row, cursor.col);
      if (c && live) openTimeline(c.iteration);
    });
    document.getElementById("heatmap-all").addEventListener("click", () => { zoom.from = 0; zoom.to = Infinity; renderHeatmap(run); });
  }

  // ---- one iteration as a timeline -------------------------------------
  // Rows: the straggler, the export rank, the other ranks whose spans were
  // kept (bars = their spans, nested by depth), and a median rank from its
  // step metrics (busy, then waiting).
  function openTimeline(iteration) {
    const url = "/api/runs/" + encodeURIComponent(body.dataset.key) + "/steps/" + iteration;
    fetch(url, { cache: "no-store" }).then((r) => (r.ok ? r.json() : null)).then((tl) => { if (tl) renderTimeline(tl, url); }).catch(() => {});
  }
  function renderTimeline(tl, url) {
    const section = document.getElementById("timeline-section"), box = document.getElementById("timeline");
    section.hidden = false;
    document.getElementById("timeline-iteration").textContent = String(tl.iteration);
    document.getElementById("timeline-download").href = url + "/trace.json";
    const total = Math.max(1e-9, ...tl.rows.map((r) => Math.max(r.step_ms, ...r.spans.map((s) => s.end_ms))));
    document.getElementById("timeline-text").textContent = "From " + tl.start + ", " + total.toFixed(1) + " ms; " +
      (tl.rows.some((r) => !r.from_step_metrics) ? "the bars are the spans the collector kept; " : "no span of this iteration was kept (only the export rank's and straggler steps are); ") +
      "hatched rows are from the step metrics (busy, then waiting).";
    box.replaceChildren();
    const pct = (ms) => (100 * ms / total) + "%";
    for (const r of tl.rows) {
      const rowEl = el("div", null, "tl-row"), label = el("div", "rank " + r.rank + (r.host ? " on " + r.host : "") + (r.role ? " (" + r.role + ")" : ""), "tl-label");
      const lane = el("div", null, "tl-lane");
      rowEl.dataset.rank = String(r.rank); rowEl.dataset.role = r.role || "";
      const bar = (name, from, to, depth, cls) => {
        const b = el("div", null, "tl-bar " + cls);
        b.style.left = pct(from); b.style.width = pct(Math.max(0, to - from)); b.style.top = (depth * 16) + "px";
        b.title = name + ": " + (to - from).toFixed(2) + " ms";
        b.dataset.name = name; b.dataset.ms = String(to - from);
        if ((to - from) / total > 0.08) b.textContent = name;
        lane.appendChild(b);
      };
      let depth = 0;
      if (r.from_step_metrics) {
        bar("busy", 0, r.busy_ms, 0, "tl-busy");
        bar("waiting", r.busy_ms, r.step_ms, 0, "tl-wait");
      } else {
        for (const s of r.spans) { bar(s.name, s.start_ms, s.end_ms, s.depth, s.error ? "tl-error" : /grad_sync|recv/.test(s.name) ? "tl-wait" : "tl-span"); depth = Math.max(depth, s.depth); }
      }
      lane.style.height = ((depth + 1) * 16) + "px";
      rowEl.appendChild(label); rowEl.appendChild(lane);
      box.appendChild(rowEl);
    }
    section.scrollIntoView({ block: "nearest" });
  }

  // The ranks with straggler steps, most steps first: at 1,000 ranks a
  // heatmap row is a pixel high, so the page names them in words too.
  function slowRanks(d) {
    const byRank = new Map();
    for (const s of d.stragglers || []) {
      const r = byRank.get(s.rank) || { rank: s.rank, host: s.host, steps: 0 };
      r.steps++;
      byRank.set(s.rank, r);
    }
    const ranks = [...byRank.values()].sort((a, b) => b.steps - a.steps || a.rank - b.rank);
    if (!ranks.length) return "No straggler step among the steps held.";
    const named = ranks.slice(0, 5).map((r) => "rank " + r.rank + (r.host ? " on " + r.host : "") + " (" + r.steps + " step" + (r.steps > 1 ? "s" : "") + ")");
    return "Slow ranks: " + named.join(", ") + (ranks.length > 5 ? ", and " + (ranks.length - 5) + " more" : "") + ".";
  }

  // A host links to its row on /hosts (plain text on a saved page).
  function hostLink(name) {
    if (!name) return "";
    if (body.dataset.static === "true") return name;
    const a = el("a", name);
    a.href = "/hosts#host-" + encodeURIComponent(name);
    a.className = "host";
    return a;
  }
  function hostLinks(names) {
    const span = el("span");
    names.forEach((n, i) => { if (i) span.appendChild(document.createTextNode(", ")); const l = hostLink(n); span.appendChild(l instanceof Node ? l : document.createTextNode(l)); });
    return span;
  }

  function renderStragglers(d) {
    const all = d.stragglers || [];
    document.getElementById("slow-ranks").textContent = slowRanks(d);
    document.getElementById("straggler-ranks").textContent = all.length > 20 ? "The newest 20 of " + all.length + " straggler steps held; all of them in the JSON." : "";
    const rows = all.slice().reverse().slice(0, 20).map((s) => {
      const open = el("button", "timeline", "open-timeline");
      open.type = "button";
      open.addEventListener("click", () => openTimeline(s.iteration));
      const tr = row([s.rank, hostLink(s.host), s.iteration, s.relative_score.toFixed(3), s.individual_score.toFixed(3), s.busy_seconds.toFixed(3), live ? open : ""]);
      tr.dataset.rank = String(s.rank); tr.dataset.iteration = String(s.iteration);
      return tr;
    });
    fill(document.querySelector("#stragglers tbody"), rows, "No straggler step (below a score threshold of " + d.thresholds.relative + " relative or " + d.thresholds.individual + " individual).", 7);
    const top = (d.goodput_detail && d.goodput_detail.top_ranks) || [];
    fill(document.querySelector("#top-ranks tbody"), top.map((t) => row([t.rank, hostLink(t.host), t.seconds.toFixed(3)])), "None yet.", 3);
  }

  function renderStalls(stalls) {
    const rows = stalls.slice().reverse().map((s) => {
      const tr = row([s.kind, s.iteration, s.culprit_ranks.join(", ") || "none named", hostLinks(s.culprit_hosts),
        s.first_stage != null ? s.first_stage : "", s.start, s.ongoing ? "ongoing (" + secs(s.seconds) + " so far)" : secs(s.seconds), s.message]);
      tr.dataset.kind = s.kind;
      return tr;
    });
    fill(document.querySelector("#stalls tbody"), rows, "No stall.", 8);
  }

  // For scripts and tests: where a cell of the heatmap is drawn.
  window.nemoView = {
    cellCenter(rank, iteration) {
      const i = run.rank_list.findIndex((x) => x.rank === rank), c = run.iterations.indexOf(iteration);
      if (i < geom.from || i >= geom.to || c < 0) return null;
      const r = Math.floor((i - geom.from) / geom.group);
      return { x: Math.floor(GUTTER + c * geom.cw + geom.cw / 2), y: Math.floor(r * geom.ch + geom.ch / 2) };
    },
  };

  // ---- the fleet's hosts -----------------------------------------------
  function span(seconds) { return seconds >= 2 * 86400 ? (seconds / 86400).toFixed(0) + " days" : seconds >= 7200 ? (seconds / 3600).toFixed(0) + " hours" : secs(seconds); }
  function renderHosts(d) {
    document.getElementById("drain-rule").textContent = "Hosts that cost at least " + d.drain_thresholds.costly_runs +
      " runs in the last " + span(d.window_seconds) + " (a straggler in " + d.drain_thresholds.straggler_steps_per_run +
      " or more of a run's steps, the culprit of a stall, or lost in one). JSON for a scheduler: /api/hosts, .drain.";
    document.getElementById("hosts-summary").textContent = d.hosts.length + " hosts in the last " + span(d.window_seconds) + ", the costliest first" +
      (d.hosts_not_tracked ? "; " + d.hosts_not_tracked + " more not tracked (max_hosts)." : ".");
    fill(document.querySelector("#drain tbody"), d.drain.map((h) => {
      const tr = row([h.host, h.reasons.join("; "), secs(h.cost_seconds)]);
      tr.dataset.host = h.host;
      return tr;
    }), "No host to drain.", 3);
    // The costliest MAX_HOST_ROWS: a table of 10,000 rows takes seconds to
    // draw, and the hosts worth a look are at its top (all in the JSON).
    const MAX_HOST_ROWS = 500;
    document.getElementById("hosts-more").textContent = d.hosts.length > MAX_HOST_ROWS
      ? "The " + MAX_HOST_ROWS + " costliest of " + d.hosts.length + " hosts; all of them in /api/hosts." : "";
    fill(document.querySelector("#hosts tbody"), d.hosts.slice(0, MAX_HOST_ROWS).map((h) => {
      const tr = row([h.host, h.runs, h.costly_runs, h.rank_steps, h.straggler_steps + " (" + pct(h.straggler_share) + ")",
        secs(h.straggler_seconds), h.culprit_stalls, secs(h.stalled_seconds), h.lost, h.last_seen]);
      tr.id = "host-" + encodeURIComponent(h.host);
      tr.dataset.host = h.host;
      if (h.drain) tr.className = "drain";
      return tr;
    }), "No host yet: the hosts come from the ranks' host.name.", 10);
  }

  if (body.dataset.page === "hosts") {
    renderHosts(initial);
    poll("/api/hosts", renderHosts);
  } else if (body.dataset.page === "index") {
    renderIndex(initial || []);
    poll("/api/runs", renderIndex);
  } else if (body.dataset.page === "run") {
    wireHeatmap();
    renderRun(initial);
    poll("/api/runs/" + encodeURIComponent(body.dataset.key), renderRun);
  }
  body.dataset.rendered = "true";
})();
