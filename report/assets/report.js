// locktest report page: draws the run embedded in #data. Everything is
// drawn from that JSON; the page loads nothing, except a live page
// (meta.live), which asks live.json for the history recorded so far and
// draws it again as it grows, then turns into the run's report.html.
(function () {
  "use strict";
  let D = JSON.parse(document.getElementById("data").textContent);
  let M = D.meta;
  const $ = (id) => document.getElementById(id);
  const el = (tag, attrs, ...kids) => {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
    }
    for (const k of kids) e.append(k);
    return e;
  };
  const sec = (ms) => (ms / 1000).toFixed(ms < 10000 ? 3 : 2) + " s";
  // span says when something from..to (ms) happened: an overlap of a few
  // milliseconds is said as such, not as "5.44 s–5.44 s" (as the stories
  // say it, checker/story.go).
  const span = (from, to) => (Math.round(to - from) <= 0 ? `at ${sec(from)}` : to - from < 100 ? `${(from / 1000).toFixed(3)} s, for ${Math.round(to - from)} ms` : `${sec(from)}–${sec(to)}`);
  // One colour, one meaning: each mark the timeline draws has its own
  // colour and a legend entry (MARKS); the legend lists the marks the run
  // has. Shapes: bar (waits, holds, bands), tick (the resource's answers,
  // a lost reply's cut), tri (the server's truth, ▼).
  const COLORS = {
    wait: "#b8c4d6", waitFail: "#e59a3a", unknown: "#555", hold: "#3b6fd4", holdText: "#fff",
    overlap: "#e0112b", race: "#f5a3a3", undecided: "#00bcd4", violation: "#7a0019", write: "#17803d", read: "#8fd19e", rejected: "#d4008f",
    expiry: "#8a2be2", revoke: "#c38df0", other: "#00897b", deleted: "#a1887f", lost: "#000",
    fault: "rgba(255,204,0,0.30)", heal: "#9e9d24", lostReply: "#5d4037",
    faultText: "#6b5500", chosen: "rgba(224,17,43,0.16)",
  };
  const MARKS = [
    ["wait", "bar", () => "waiting in acquire, then granted"], ["waitFail", "bar", () => "acquire failed"],
    ["unknown", "bar", () => "outcome unknown (or still waiting at the end)"], ["hold", "bar", () => "holding (token)"],
    ["overlap", "bar", () => "two holders at once: the lock's bug (the earlier holder's key still on the server), or not judged"],
    ["race", "bar", () => "two holders at once: " + (M.legend.race || "lease race")], ["undecided", "bar", () => "two holders at once: not told apart"], ["violation", "bar", () => "a check's violation (on the time axis)"],
    ["write", "tick", () => "write accepted"], ["read", "tick", () => "read"],
    ["rejected", "tick", () => "write or read rejected (stale token)"],
    ["expiry", "tri", () => M.legend.expiry || "key expired"], ["revoke", "tri", () => "key deleted: its lease revoked"],
    ["other", "tri", () => "key deleted by another's release"], ["deleted", "tri", () => "key deleted (other cause)"],
    ["lost", "tri", () => M.legend.lost || "the client noticed its claim was lost"],
    ["fault", "bar", () => "fault"], ["heal", "bar", () => "final heal"], ["lostReply", "tick", () => "reply lost (the cut)"],
  ];
  // The mark of each code: a wait's outcome, the resource's answers, the
  // server's truth (lane in model.go; a release, truth 0, is not drawn).
  const WAIT = ["wait", "waitFail", "unknown", "unknown"];
  const ANSWER = ["write", "rejected", "unknown", "read", "rejected", "unknown"];
  const TRUTH = [null, "expiry", "revoke", "other", "deleted", "lost"];
  const LANE = 34, AXIS = 22, LABEL = 11; // px; LABEL: a fault label's line
  const canvas = $("canvas"), ctx = canvas.getContext("2d");
  let lanes = [], laneIndex = {}, full = [0, 1], view = null, chosen = null, width = 0, height = 0, plots = [];
  // drawn: the marks and fault labels the last draw made, for a reader (a
  // test) to hold against the legend and to find overlapping labels.
  window.drawn = { marks: [], labels: [] };

  // overlapMark is an overlap's mark by the contract's class (o[5]): the
  // lease race, not told apart, or else the lock's bug (or not judged).
  const overlapMark = (o) => ({ "lease-race": "race", "undecided": "undecided" })[o[5]] || "overlap";

  // marksOf lists the marks the run has, whether in view or not.
  function marksOf() {
    const has = new Set(["wait", "hold"]);
    for (const c of D.clients) {
      const l = D.lanes[c];
      if (!l) continue;
      for (let i = 2; i < l.w.length; i += 5) has.add(WAIT[l.w[i]]);
      for (let i = 1; i < l.r.length; i += 4) has.add(ANSWER[l.r[i]]);
      for (let i = 1; i < l.k.length; i += 2) if (TRUTH[l.k[i]]) has.add(TRUTH[l.k[i]]);
    }
    for (const o of D.overlaps) has.add(overlapMark(o));
    for (const f of D.faults) {
      has.add(f.fault === "heal" ? "heal" : "fault");
      if ((f.outcome || {}).reply === "lost") has.add("lostReply");
    }
    if (D.checks.some((c) => (c.violations || []).some((v) => v.clients.length))) has.add("violation");
    return MARKS.filter(([k]) => has.has(k));
  }

  function header() {
    const faultKinds = [...new Set(D.faults.filter((f) => f.fault !== "heal").map((f) => f.fault))];
    const verdict = M.live ? el("span", { class: "running", id: "verdict" }, "running") : el("span", { class: M.verdict, id: "verdict" }, M.verdict);
    $("head").replaceChildren(
      el("h1", {}, "locktest: ", verdict, M.live ? ` (live: ${sec(D.end - D.start)} recorded; the report replaces this page when the run ends)` : ` (exit ${M.exit})`,
        !M.live && M.scenario && M.scenario.exit != null && M.scenario.exit !== M.exit ? el("span", { id: "scenario-exit" }, ` · as a scenario, exit ${M.scenario.exit}: a scenario exits on its expectations`) : ""),
      el("div", { class: "meta" },
        [M.seed != null ? "seed " + M.seed : "", M.setup.recipe ? "recipe " + M.setup.recipe : "",
          M.setup.workload ? M.setup.workload + " workload" : "", M.setup.resource ? "resource " + M.setup.resource : "",
          D.clients.length + " clients", "faults: " + (faultKinds.join(", ") || "none"),
          "run " + sec(D.end - D.start), M.live ? "" : "required: " + (M.required || []).join(", ")].filter(Boolean).join(" · ")),
    );
    if (!M.live) $("head").append(el("div", { class: "meta" }, "versions: " + Object.entries(M.versions || {}).map(([k, v]) => k + " " + v).join(", ")));
    if ((M.cells || []).length) {
      $("head").append(el("div", { class: "meta", id: "cells" }, "cells struck (lock state × fault): " +
        M.cells.map((c) => `${c.state}×${c.fault}` + (c.count > 1 ? ` (${c.count})` : "")).join(", ")));
    }
    if (M.cut_short) $("head").append(el("div", { class: "unknown", id: "cut" }, M.cut_short));
    if (M.scenario) {
      const sc = M.scenario, expect = Object.keys(sc.expect || {}).sort().map((k) => k + " " + sc.expect[k]).join(", ");
      $("head").append(el("div", { id: "lesson" }, el("b", {}, "scenario " + sc.name + ": "), sc.lesson),
        el("div", { class: sc.met ? "valid" : "invalid", id: "expected" },
          "expected: " + expect + (sc.met ? " (as expected)" : " (NOT as expected: " + (sc.missed || []).map((m) => m.got ? `${m.check} is ${m.got}, expected ${m.want}` : `${m.check} was not checked, expected ${m.want}`).join("; ") + ")")));
      for (const b of sc.bugs || []) {
        $("head").append(el("div", { class: "bug" }, "upstream bug: ", el("a", { href: b.url }, b.ref),
          ` (${b.fixed ? "fixed" : "not fixed"} upstream: ${b.status}), seen in ${b.seen}` +
          (b.recipes && b.recipes.length ? ", with --recipe " + b.recipes.join(" or ") : "")));
      }
    }
    if (M.shrunk) {
      // A replay of a shrunk schedule: what it came from and what was removed.
      const s = M.shrunk, lines = [el("b", {}, "shrunk: "), `${s.summary} (the failure kept: ${s.failure}; from ${s.from})`];
      if ((s.removed || []).length) lines.push(el("div", { id: "removed" }, "removed: " + s.removed.join("; ")));
      if ((s.changed || []).length) lines.push(el("div", { id: "changed" }, "changed: " + s.changed.join("; ")));
      $("head").append(el("div", { id: "shrunk" }, ...lines));
    }
    if (D.reads && D.reads.length) {
      $("head").append(el("div", { class: "meta", id: "reads" }, "read when the clients stopped (no client's process): " +
        D.reads.map((r) => `${r.key || '""'} = ${r.value} at ${sec(r.at)} (process ${r.process})`).join(", ")));
    }
    if (M.reproduce) $("head").append(el("div", {}, "reproduce: ", el("code", { id: "reproduce" }, M.reproduce)));
    for (const w of M.warnings || []) $("head").append(el("div", { class: "unknown" }, "warning: " + w));
    if (M.error) $("head").append(el("div", { class: "invalid" }, "run error: " + M.error));
    const table = el("table", { class: "checks" });
    for (const c of D.checks) {
      table.append(el("tr", { "data-check": c.name }, el("td", {}, c.name), el("td", { class: c.verdict }, c.verdict),
        el("td", {}, c.required ? "required" : ""), el("td", {}, (c.explanation || "").split("\n")[0])));
    }
    $("checks").replaceChildren(el("h2", {}, "Checks"), M.live ? el("p", { class: "meta" }, "the history is checked when the run ends") : table);
    $("links").replaceChildren(el("h2", {}, "Files"), ...D.links.map((l) => el("a", { href: l.href }, l.name)));
  }

  // --- lanes: a faults row, the members struck, then the clients ---
  function layout() {
    const members = [...new Set(D.faults.flatMap((f) => (f.targets || []).filter((t) => /^m\d+$/.test(t))))].sort();
    lanes = [{ name: "faults", kind: "faults" }, ...members.map((m) => ({ name: m, kind: "member" })),
      ...D.clients.map((c) => ({ name: c, kind: "client", data: D.lanes[c] || { w: [], h: [], r: [], k: [] } }))];
    $("lanes").replaceChildren(el("div", { style: `height:${AXIS}px` }, ""),
      ...lanes.map((l) => el("div", { "data-lane": l.name, class: "lane-" + l.kind, style: `height:${LANE}px;line-height:${LANE}px` }, l.name)));
    for (const l of lanes) {
      if (!l.data) continue;
      for (const [key, n] of [["w", 5], ["h", 5]]) {
        let longest = 0;
        for (let i = 0; i < l.data[key].length; i += n) longest = Math.max(longest, l.data[key][i + 1] - l.data[key][i]);
        l["max" + key] = longest;
      }
    }
    laneIndex = Object.fromEntries(lanes.map((l, i) => [l.name, i]));
    // The legend: a glyph of each mark's shape in its colour.
    $("legend").replaceChildren(...marksOf().map(([k, shape, label]) => el("span", { "data-mark": k, "data-color": COLORS[k] },
      shape === "tri" ? el("b", { class: "tri", style: "color:" + COLORS[k] }, "\u25BC") : el("i", { class: shape, style: "background:" + COLORS[k] }), label())));
    const pad = Math.max(1, (D.end - D.start) * 0.01);
    const following = !view || (view[0] === full[0] && view[1] === full[1]);
    full = [D.start - pad, D.end + pad];
    if (following) view = full.slice(); // a live page follows the run unless zoomed
    height = AXIS + lanes.length * LANE;
  }

  // --- the timeline ---
  function resize() {
    width = canvas.parentElement.clientWidth - $("lanes").offsetWidth - 2;
    const r = window.devicePixelRatio || 1;
    canvas.width = width * r; canvas.height = height * r;
    canvas.style.width = width + "px"; canvas.style.height = height + "px";
    ctx.setTransform(r, 0, 0, r, 0, 0);
  }
  const X = (t) => ((t - view[0]) / (view[1] - view[0])) * width;
  const T = (x) => view[0] + (x / width) * (view[1] - view[0]);
  // first index (record of n numbers) whose start may reach t0
  function firstFrom(arr, n, t0) {
    let lo = 0, hi = arr.length / n;
    while (lo < hi) { const mid = (lo + hi) >> 1; if (arr[mid * n] < t0) lo = mid + 1; else hi = mid; }
    return lo * n;
  }
  let marks = new Set();
  function paint(mark) { marks.add(mark); ctx.fillStyle = COLORS[mark]; }
  function rects(arr, n, maxDur, y, h, mark, text) {
    // Draws records [from, to, ...] as bars; at overview scale, bars that
    // fall in one pixel column are drawn once.
    let last = -1;
    for (let i = firstFrom(arr, n, view[0] - maxDur); i < arr.length && arr[i] <= view[1]; i += n) {
      const x0 = X(arr[i]), x1 = X(arr[i + 1]);
      if (x1 < 0) continue;
      if (x1 - x0 < 1 && Math.floor(x0) === last) continue;
      last = Math.floor(x0);
      paint(mark(arr, i));
      ctx.fillRect(x0, y, Math.max(1, x1 - x0), h);
      if (text && x1 - x0 > 36) {
        ctx.fillStyle = COLORS.holdText;
        ctx.fillText(String(arr[i + 2]), Math.max(x0, 0) + 3, y + (h - LABEL) / 2);
      }
    }
  }
  function faultLanes(f) {
    const hit = (f.targets || []).filter((t) => t in laneIndex);
    return [0, ...hit.map((t) => laneIndex[t])];
  }
  // faultLabels places each fault's label in the faults row: on the first
  // of its lines where it clears the label before it, shortened to the room
  // left, or not at all; labels never overlap.
  function faultLabels() {
    const lines = Math.floor((LANE - 2) / LABEL), ends = new Array(lines).fill(-Infinity), out = [];
    for (const f of D.faults) {
      const x = Math.max(0, X(f.from)) + 2;
      if (X(f.to) < 0 || x > width) continue;
      let text = f.fault === "heal" ? "heal" : f.fault + " " + (f.targets || []).join(",");
      let line = ends.findIndex((e) => e + 6 <= x);
      if (line < 0) continue; // no room: the band and the fault list say it
      const room = width - x;
      while (text.length > 1 && ctx.measureText(text).width > room) text = text.slice(0, -2) + "\u2026";
      const w = ctx.measureText(text).width, y = AXIS + 2 + line * LABEL;
      ends[line] = x + w;
      out.push({ x, y, w, h: LABEL, text });
    }
    return out;
  }
  function draw() {
    marks = new Set();
    ctx.clearRect(0, 0, width, height);
    ctx.font = "11px monospace";
    ctx.textBaseline = "top";
    // axis: seconds of the run
    const span = view[1] - view[0];
    const step = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000, 120000, 300000, 600000, 1800000]
      .find((s) => span / s < width / 90) || 3600000;
    ctx.fillStyle = "#555"; ctx.strokeStyle = "#eee";
    for (let t = Math.ceil(view[0] / step) * step; t <= view[1]; t += step) {
      const x = X(t);
      ctx.beginPath(); ctx.moveTo(x, AXIS - 4); ctx.lineTo(x, height); ctx.stroke();
      ctx.fillStyle = "#555";
      ctx.fillText((t / 1000).toFixed(step < 1000 ? 3 : step < 10000 ? 1 : 0) + " s", x + 2, 2);
    }
    // faults: bands over the faults row and the lanes they struck
    const lost = [];
    for (const f of D.faults) {
      const x0 = X(f.from), x1 = X(f.to);
      if (x1 < 0 || x0 > width) continue;
      for (const li of faultLanes(f)) {
        paint(f.fault === "heal" ? "heal" : "fault");
        ctx.fillRect(x0, AXIS + li * LANE, Math.max(2, x1 - x0), LANE);
      }
      // A lost reply: the cut, on the lane of the client whose reply it
      // was (the legend and the fault list say what; a text here would
      // lie over the lane's marks).
      if ((f.outcome || {}).reply === "lost") {
        for (const li of faultLanes(f).slice(1)) {
          paint("lostReply");
          ctx.fillRect(x1 - 1, AXIS + li * LANE, 2, LANE);
        }
        lost.push(...(f.targets || []).filter((t) => t in laneIndex));
      }
    }
    const labels = faultLabels();
    ctx.fillStyle = COLORS.faultText;
    for (const b of labels) ctx.fillText(b.text, b.x, b.y);
    // overlaps, by the contract's class
    for (const o of D.overlaps) {
      const x0 = X(o[0]), x1 = X(o[1]);
      if (x1 < 0 || x0 > width) continue;
      for (const c of [o[2], o[3]]) {
        if (!(c in laneIndex)) continue;
        paint(overlapMark(o));
        ctx.fillRect(x0, AXIS + laneIndex[c] * LANE + 2, Math.max(2, x1 - x0), LANE - 4);
      }
    }
    if (chosen) {
      ctx.fillStyle = COLORS.chosen;
      ctx.fillRect(X(chosen.from), AXIS, Math.max(3, X(chosen.to) - X(chosen.from)), height - AXIS);
    }
    for (const [i, l] of lanes.entries()) {
      if (!l.data) continue;
      const y = AXIS + i * LANE;
      rects(l.data.w, 5, l.maxw, y + LANE / 2 - 3, 6, (a, j) => WAIT[a[j + 2]]);
      rects(l.data.h, 5, l.maxh, y + 6, LANE - 12, () => "hold", true);
      const r = l.data.r;
      // At overview scale every hold has its write: only the rejected and
      // unknown answers are drawn there, all of them once zoomed in.
      const detail = span / width < 20;
      for (let j = firstFrom(r, 4, view[0]); j < r.length && r[j] <= view[1]; j += 4) {
        const code = r[j + 1];
        if (!detail && (code === 0 || code === 3)) continue;
        paint(ANSWER[code]);
        const x = X(r[j]);
        ctx.fillRect(x - (code === 1 ? 1.5 : 0.5), y + (code < 3 ? 2 : LANE - 8), code === 1 ? 3 : 1.5, code < 3 ? LANE - 4 : 6);
      }
      const k = l.data.k;
      for (let j = 0; j < k.length; j += 2) {
        if (k[j] < view[0] || k[j] > view[1] || !TRUTH[k[j + 1]]) continue;
        const x = X(k[j]);
        paint(TRUTH[k[j + 1]]);
        ctx.beginPath(); ctx.moveTo(x - 5, y + 1); ctx.lineTo(x + 5, y + 1); ctx.lineTo(x, y + 9); ctx.fill();
      }
    }
    // violation markers on the axis (a row that only counts more
    // violations has no time of its own)
    for (const c of D.checks) {
      for (const v of c.violations || []) {
        if (!v.clients.length) continue;
        paint("violation");
        ctx.fillRect(X(v.from), AXIS - 6, Math.max(2, X(v.to) - X(v.from)), 5);
      }
    }
    $("window").textContent = `showing ${sec(Math.max(view[0], D.start))} to ${sec(Math.min(view[1], D.end))} of ${sec(D.end)}`;
    canvas.dataset.from = view[0].toFixed(1); canvas.dataset.to = view[1].toFixed(1);
    canvas.dataset.lost = lost.join(" "); // the lanes where a lost reply is drawn
    canvas.dataset.overlaps = D.overlaps.map((o) => o[5] || "-").join(" "); // each overlap's class, in order
    window.drawn = { marks: [...marks], labels: labels.map((b) => ({ x: b.x, y: b.y, w: b.w, h: b.h, text: b.text })) };
  }
  function setView(a, b) {
    const minSpan = 1;
    if (b - a < minSpan) { const m = (a + b) / 2; a = m - minSpan / 2; b = m + minSpan / 2; }
    view = [a, b]; draw();
  }
  function zoom(f, at) {
    const t = at === undefined ? (view[0] + view[1]) / 2 : at;
    setView(t - (t - view[0]) * f, t + (view[1] - t) * f);
  }
  const pan = (f) => { const d = (view[1] - view[0]) * f; setView(view[0] + d, view[1] + d); };
  canvas.addEventListener("wheel", (e) => { e.preventDefault(); zoom(e.deltaY > 0 ? 1.25 : 0.8, T(e.offsetX)); }, { passive: false });
  let drag = null;
  canvas.addEventListener("mousedown", (e) => { drag = { x: e.clientX, v: view.slice() }; canvas.style.cursor = "grabbing"; });
  window.addEventListener("mouseup", () => { drag = null; canvas.style.cursor = "grab"; });
  window.addEventListener("mousemove", (e) => {
    if (!drag) return;
    const d = ((e.clientX - drag.x) / width) * (drag.v[1] - drag.v[0]);
    view = [drag.v[0] - d, drag.v[1] - d]; draw();
  });
  canvas.addEventListener("keydown", (e) => {
    const keys = { "+": () => zoom(0.8), "=": () => zoom(0.8), "-": () => zoom(1.25), ArrowLeft: () => pan(-0.2), ArrowRight: () => pan(0.2), 0: () => setView(...full) };
    if (keys[e.key]) { keys[e.key](); e.preventDefault(); }
  });
  $("fit").addEventListener("click", () => { chosen = null; highlight([]); setView(...full); });

  // hover: the history line behind what is under the pointer
  const tip = $("tip");
  function near(arr, n, maxDur, t, slack) {
    for (let i = firstFrom(arr, n, t - maxDur - slack); i < arr.length && arr[i] <= t + slack; i += n) {
      if (arr[i] - slack <= t && t <= arr[i + (n === 5 ? 1 : 0)] + slack) return i;
    }
    return -1;
  }
  canvas.addEventListener("mousemove", (e) => {
    const li = Math.floor((e.offsetY - AXIS) / LANE), l = lanes[li], t = T(e.offsetX), slack = (3 / width) * (view[1] - view[0]);
    let text = "";
    if (l && l.data) {
      const d = l.data;
      let i;
      if ((i = near(d.r, 4, 0, t, slack)) >= 0) {
        const what = ["write accepted", "write rejected (stale token)", "write, outcome unknown", "read", "read rejected", "read, outcome unknown"][d.r[i + 1]];
        text = `${l.name}: ${what}, value ${d.r[i + 3]}\nhistory line ${d.r[i + 2]} at ${sec(d.r[i])}`;
      } else if ((i = near(d.h, 5, l.maxh, t, 0)) >= 0) {
        text = `${l.name} (process ${d.h[i + 4]}) held token ${d.h[i + 2]}\nfrom ${sec(d.h[i])} (acquire ok, history line ${d.h[i + 3]}) to ${sec(d.h[i + 1])}`;
      } else if ((i = near(d.w, 5, l.maxw, t, 0)) >= 0) {
        const how = ["granted", "failed", "outcome unknown", "still waiting at the end"][d.w[i + 2]];
        text = `${l.name} (process ${d.w[i + 4]}) waited in acquire\nfrom ${sec(d.w[i])} (history line ${d.w[i + 3]}) to ${sec(d.w[i + 1])}: ${how}`;
      }
    } else if (l) {
      const f = D.faults.find((f) => faultLanes(f).includes(li) && f.from - slack <= t && t <= f.to + slack);
      if (f) text = `${f.fault} ${(f.targets || []).join(",")} ${sec(f.from)}-${sec(f.to)}\n` + Object.entries(f.params || {}).map(([k, v]) => k + "=" + v).join(" ");
    }
    tip.hidden = !text;
    if (text) { tip.textContent = text; tip.style.left = e.offsetX + $("lanes").offsetWidth + 12 + "px"; tip.style.top = e.offsetY + 12 + "px"; }
  });
  canvas.addEventListener("mouseleave", () => { tip.hidden = true; });

  // --- violations and faults, in lists that drive the timeline ---
  function highlight(clients) {
    for (const d of $("lanes").children) d.classList.toggle("hl", clients.includes(d.dataset.lane));
  }
  function choose(li, v) {
    for (const x of $("vlist").children) x.classList.toggle("chosen", x === li);
    chosen = v; highlight(v.clients);
    const p = Math.max(200, (v.to - v.from) * 0.6);
    setView(v.from - p, v.to + p);
    canvas.scrollIntoView({ block: "nearest" });
  }
  function lists() {
    const items = [];
    let vi = 0;
    for (const c of D.checks) {
      for (const v of c.violations || []) {
        if (!v.clients.length) {
          // Not a violation: how many more the check found ("and 6 more
          // overlaps"), in results.json.
          items.push(el("li", { class: "more", "data-more": c.name }, v.story));
          continue;
        }
        const li = el("li", { "data-check": c.name, "data-index": vi, value: ++vi, "data-from": v.from, "data-to": v.to },
          el("span", { class: "kind" }, `${c.name}: ${v.kind}`), ` ${v.clients.join(", ")} ${span(v.from, v.to)}: `, v.story);
        li.addEventListener("click", () => choose(li, v));
        items.push(li);
      }
    }
    if (M.live) {
      // While the run goes, the checks have not run: the overlaps so far.
      for (const o of D.overlaps) {
        const v = { from: o[0], to: o[1], clients: [o[2], o[3]] };
        const li = el("li", { "data-overlap": "" }, el("span", { class: "kind" }, "overlap"), ` ${o[2]} and ${o[3]} both held ${JSON.stringify(o[4])} at ${span(o[0], o[1])}`);
        li.addEventListener("click", () => choose(li, v));
        items.push(li);
      }
    }
    $("vlist").replaceChildren(...(items.length ? items : [el("li", {}, M.live ? "none so far" : "none")]));
    const faults = D.faults.map((f) => {
      const out = f.outcome || {};
      const li = el("li", { "data-fault": f.fault }, `${span(f.from, f.to)} ${f.fault} ${(f.targets || []).join(", ")} `,
        out.reply === "lost" ? el("b", { class: "lost-reply" }, `its ${(f.params || {}).op || ""} reply was lost${(out.server_answered || "").startsWith("no") ? " before the server answered it: whether it took effect is unknown" : ""} (the client saw ${out.client_saw || "nothing"}) `) : "",
        el("span", { class: "meta" }, Object.entries({ ...(f.params || {}), ...out }).map(([k, v]) => k + "=" + v).join(" ")));
      li.addEventListener("click", () => { const p = Math.max(500, (f.to - f.from) * 0.3); setView(f.from - p, f.to + p); });
      return li;
    });
    $("flist").replaceChildren(...(faults.length ? faults : [el("li", {}, "none")]));
  }

  // --- plots, with the fault bands; time in seconds of the run ---
  function bands(u) {
    const c = u.ctx;
    c.save(); c.fillStyle = COLORS.fault;
    for (const f of D.faults) {
      if (f.fault === "heal") continue;
      const x0 = u.valToPos(f.from / 1000, "x", true), x1 = u.valToPos(f.to / 1000, "x", true);
      c.fillRect(x0, u.bbox.top, Math.max(2, x1 - x0), u.bbox.height);
    }
    c.restore();
  }
  function drawPlots() {
    for (const p of plots) p.destroy();
    const plotWidth = Math.max(400, $("plots").clientWidth - 20);
    const P = D.plot;
    const per = P.bucket > 1 ? ` (over ${P.bucket} s buckets)` : "";
    // Not clock times: x is seconds since the run started.
    const opts = (title, series) => ({
      title: title + per, width: plotWidth, height: 180, hooks: { drawClear: [bands] }, scales: { x: { time: false } },
      axes: [{ label: "seconds of the run", values: (u, vals) => vals.map((v) => v + " s") }, {}],
      series: [{ label: "time", value: (u, v) => (v == null ? "" : v.toFixed(1) + " s") }, ...series],
    });
    window.plots = plots = [
      new uPlot(opts("grants per second", [{ label: "grants/s", stroke: COLORS.hold, fill: "rgba(59,111,212,0.15)" }]), [P.t, P.grants], $("plot-grants")),
      // Grey, solid and dashed: no colour of the timeline's, each of which
      // has a meaning of its own there.
      new uPlot(opts("acquire latency (ms)", [{ label: "p50", stroke: "#444" }, { label: "p99", stroke: "#444", dash: [6, 4] }]), [P.t, P.p50, P.p99], $("plot-latency")),
    ];
  }

  function render() {
    M = D.meta;
    document.body.dataset.end = D.end; // how far the history drawn goes
    header();
    layout();
    lists();
    drawPlots();
    resize(); draw();
  }
  render();
  window.addEventListener("resize", () => { resize(); draw(); });
  document.body.dataset.rendered = "true";
  window.renderMs = performance.now();

  // A live page asks for the history recorded so far every second (or
  // less often, when reading it takes longer), draws it again, and turns
  // into the report once the run has written it.
  if (M.live) {
    const poll = async () => {
      const began = performance.now();
      try {
        const r = await fetch(M.live, { cache: "no-store" });
        const next = await r.json();
        if (next.done) { location.replace(next.done); return; }
        D = next.data; render();
        document.body.dataset.updates = String(Number(document.body.dataset.updates || 0) + 1);
      } catch (e) {
        $("window").textContent += " (the run's server is not answering)";
      }
      setTimeout(poll, Math.max(1000, 4 * (performance.now() - began)));
    };
    setTimeout(poll, 1000);
  }
})();
