// locktest report page: draws the run embedded in #data. Everything is
// drawn from that JSON; the page loads nothing.
(function () {
  "use strict";
  const D = JSON.parse(document.getElementById("data").textContent);
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
  const COLORS = {
    wait: "#b8c4d6", waitFail: "#e59a3a", waitUnknown: "#999", hold: "#3b6fd4", holdText: "#fff",
    overlap: "#e0112b", race: "#f28e2b", undecided: "#b07aa1", write: "#17803d", rejected: "#e0112b", unknown: "#777", read: "#7fb58f",
    expiry: "#8a2be2", revoke: "#8a2be2", other: "#e0112b", release: "#9aa", lost: "#000", fault: "rgba(255,170,0,0.18)",
    faultEdge: "rgba(200,120,0,0.8)", chosen: "rgba(224,17,43,0.16)",
  };

  // --- header, checks, links ---
  const M = D.meta;
  const faultKinds = [...new Set(D.faults.filter((f) => f.fault !== "heal").map((f) => f.fault))];
  $("head").append(
    el("h1", {}, "locktest: ", el("span", { class: M.verdict, id: "verdict" }, M.verdict), ` (exit ${M.exit})`),
    el("div", { class: "meta" },
      [M.seed != null ? "seed " + M.seed : "", M.setup.recipe ? "recipe " + M.setup.recipe : "",
        M.setup.workload ? M.setup.workload + " workload" : "", M.setup.resource ? "resource " + M.setup.resource : "",
        D.clients.length + " clients", "faults: " + (faultKinds.join(", ") || "none"),
        "run " + sec(D.end - D.start), "required: " + (M.required || []).join(", ")].filter(Boolean).join(" · ")),
    el("div", { class: "meta" }, "versions: " + Object.entries(M.versions || {}).map(([k, v]) => k + " " + v).join(", ")),
  );
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
  $("checks").append(el("h2", {}, "Checks"), table);
  $("links").append(el("h2", {}, "Files"), ...D.links.map((l) => el("a", { href: l.href }, l.name)));

  // --- lanes: a faults row, the members struck, then the clients ---
  const members = [...new Set(D.faults.flatMap((f) => (f.targets || []).filter((t) => /^m\d+$/.test(t))))].sort();
  const lanes = [{ name: "faults", kind: "faults" }, ...members.map((m) => ({ name: m, kind: "member" })),
    ...D.clients.map((c) => ({ name: c, kind: "client", data: D.lanes[c] || { w: [], h: [], r: [], k: [] } }))];
  const LANE = 34, AXIS = 22;
  for (const l of lanes) {
    $("lanes").append(el("div", { "data-lane": l.name, class: "lane-" + l.kind, style: `height:${LANE}px;line-height:${LANE}px` }, l.name));
  }
  $("lanes").prepend(el("div", { style: `height:${AXIS}px` }, ""));
  for (const l of lanes) {
    if (!l.data) continue;
    for (const [key, n] of [["w", 5], ["h", 5]]) {
      let longest = 0;
      for (let i = 0; i < l.data[key].length; i += n) longest = Math.max(longest, l.data[key][i + 1] - l.data[key][i]);
      l["max" + key] = longest;
    }
  }
  const laneIndex = Object.fromEntries(lanes.map((l, i) => [l.name, i]));

  // The backend's words: a lease, or a key's TTL kept by a watchdog.
  $("legend").append(...[["wait", "waiting in acquire"], ["hold", "holding (token)"],
    ["overlap", "two holders at once: the lock's bug (the earlier holder's key still on the server)"],
    ["race", "two holders at once: " + M.legend.race], ["undecided", "two holders at once: not told apart"],
    ["write", "write accepted"], ["rejected", "write rejected (stale token)"],
    ["expiry", M.legend.expiry], ["other", "key deleted by another's release"],
    ["lost", M.legend.lost], ["fault", "fault"]]
    .map(([k, label]) => el("span", {}, el("i", { style: "background:" + COLORS[k] }), label)));

  // --- the timeline ---
  const canvas = $("canvas"), ctx = canvas.getContext("2d");
  const pad = Math.max(1, (D.end - D.start) * 0.01);
  const full = [D.start - pad, D.end + pad];
  let view = full.slice(), chosen = null, width = 0;
  const height = AXIS + lanes.length * LANE;
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
  function rects(arr, n, maxDur, y, h, color) {
    // Draws records [from, to, ...] as bars; at overview scale, bars that
    // fall in one pixel column are drawn once.
    let last = -1;
    for (let i = firstFrom(arr, n, view[0] - maxDur); i < arr.length && arr[i] <= view[1]; i += n) {
      const x0 = X(arr[i]), x1 = X(arr[i + 1]);
      if (x1 < 0) continue;
      if (x1 - x0 < 1 && Math.floor(x0) === last) continue;
      last = Math.floor(x0);
      ctx.fillStyle = typeof color === "function" ? color(arr, i) : color;
      ctx.fillRect(x0, y, Math.max(1, x1 - x0), h);
      if (n === 5 && arr === current.h && x1 - x0 > 36) {
        ctx.fillStyle = COLORS.holdText;
        ctx.fillText(String(arr[i + 2]), Math.max(x0, 0) + 3, y + h - 4);
      }
    }
  }
  let current = null;
  function faultLanes(f) {
    const hit = (f.targets || []).filter((t) => t in laneIndex);
    return [0, ...hit.map((t) => laneIndex[t])];
  }
  function draw() {
    ctx.clearRect(0, 0, width, height);
    ctx.font = "11px monospace";
    // axis
    const span = view[1] - view[0];
    const step = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000, 120000, 300000, 600000, 1800000]
      .find((s) => span / s < width / 90) || 3600000;
    ctx.fillStyle = "#555"; ctx.strokeStyle = "#eee";
    for (let t = Math.ceil(view[0] / step) * step; t <= view[1]; t += step) {
      const x = X(t);
      ctx.beginPath(); ctx.moveTo(x, AXIS - 4); ctx.lineTo(x, height); ctx.stroke();
      ctx.fillText(step < 1000 ? (t / 1000).toFixed(3) : (t / 1000).toFixed(step < 10000 ? 1 : 0) + " s", x + 2, 12);
    }
    // faults: bands over the faults row and the lanes they struck
    const lost = [];
    for (const f of D.faults) {
      const x0 = X(f.from), x1 = X(f.to);
      if (x1 < 0 || x0 > width) continue;
      for (const li of faultLanes(f)) {
        const y = AXIS + li * LANE;
        ctx.fillStyle = f.fault === "heal" ? "#17803d" : COLORS.fault;
        ctx.fillRect(x0, y, Math.max(2, x1 - x0), LANE);
      }
      ctx.fillStyle = COLORS.faultEdge;
      ctx.fillText(f.fault + " " + (f.targets || []).join(","), Math.max(0, x0) + 2, AXIS + LANE - 8);
      // A lost reply: the cut, on the lane of the client whose reply it was.
      if ((f.outcome || {}).reply === "lost") {
        for (const li of faultLanes(f).slice(1)) {
          const y = AXIS + li * LANE;
          ctx.fillStyle = COLORS.lost;
          ctx.fillRect(x1 - 1, y, 2, LANE);
          ctx.fillText("\u2715 " + ((f.params || {}).op || "") + " reply lost", x1 + 3, y + 11);
        }
        lost.push(...(f.targets || []).filter((t) => t in laneIndex));
      }
    }
    // overlaps, by the contract's class: the lock's bug (or not judged)
    // red, the lease race orange, not told apart purple
    const classColor = { "lease-race": COLORS.race, "undecided": COLORS.undecided };
    for (const o of D.overlaps) {
      const x0 = X(o[0]), x1 = X(o[1]);
      if (x1 < 0 || x0 > width) continue;
      for (const c of [o[2], o[3]]) {
        if (!(c in laneIndex)) continue;
        ctx.fillStyle = classColor[o[5]] || COLORS.overlap;
        ctx.fillRect(x0, AXIS + laneIndex[c] * LANE + 2, Math.max(2, x1 - x0), LANE - 4);
      }
    }
    canvas.dataset.overlaps = D.overlaps.map((o) => o[5] || "-").join(" ");
    if (chosen) {
      ctx.fillStyle = COLORS.chosen;
      ctx.fillRect(X(chosen.from), AXIS, Math.max(3, X(chosen.to) - X(chosen.from)), height - AXIS);
    }
    for (const [i, l] of lanes.entries()) {
      if (!l.data) continue;
      current = l.data;
      const y = AXIS + i * LANE;
      rects(l.data.w, 5, l.maxw, y + LANE / 2 - 3, 6, (a, j) => [COLORS.wait, COLORS.waitFail, COLORS.waitUnknown, COLORS.waitUnknown][a[j + 2]]);
      rects(l.data.h, 5, l.maxh, y + 6, LANE - 12, COLORS.hold);
      const r = l.data.r;
      // At overview scale every hold has its write: only the rejected and
      // unknown answers are drawn there, all of them once zoomed in.
      const detail = span / width < 20;
      for (let j = firstFrom(r, 4, view[0]); j < r.length && r[j] <= view[1]; j += 4) {
        const code = r[j + 1];
        if (!detail && (code === 0 || code === 3)) continue;
        ctx.fillStyle = [COLORS.write, COLORS.rejected, COLORS.unknown, COLORS.read, COLORS.rejected, COLORS.unknown][code];
        const x = X(r[j]);
        ctx.fillRect(x - (code === 1 ? 1.5 : 0.5), y + (code < 3 ? 2 : LANE - 8), code === 1 ? 3 : 1.5, code < 3 ? LANE - 4 : 6);
      }
      const k = l.data.k;
      for (let j = 0; j < k.length; j += 2) {
        if (k[j] < view[0] || k[j] > view[1] || k[j + 1] === 0) continue;
        const x = X(k[j]);
        ctx.fillStyle = [COLORS.release, COLORS.expiry, COLORS.revoke, COLORS.other, "#555", COLORS.lost][k[j + 1]];
        ctx.beginPath(); ctx.moveTo(x - 5, y + 1); ctx.lineTo(x + 5, y + 1); ctx.lineTo(x, y + 9); ctx.fill();
      }
    }
    // violation markers on the axis
    ctx.fillStyle = COLORS.overlap;
    for (const c of D.checks) for (const v of c.violations || []) ctx.fillRect(X(v.from), AXIS - 6, Math.max(2, X(v.to) - X(v.from)), 5);
    $("window").textContent = `showing ${sec(Math.max(view[0], D.start))} to ${sec(Math.min(view[1], D.end))} of ${sec(D.end)}`;
    canvas.dataset.from = view[0].toFixed(1); canvas.dataset.to = view[1].toFixed(1);
    canvas.dataset.lost = lost.join(" "); // the lanes where a lost reply is drawn
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
  let vi = 0;
  for (const c of D.checks) {
    for (const v of c.violations || []) {
      const li = el("li", { "data-check": c.name, "data-index": vi++, "data-from": v.from, "data-to": v.to },
        el("span", { class: "kind" }, `${c.name}: ${v.kind}`), ` ${v.clients.join(", ")} ${sec(v.from)}–${sec(v.to)}: `, v.story);
      li.addEventListener("click", () => {
        for (const x of $("vlist").children) x.classList.toggle("chosen", x === li);
        chosen = v; highlight(v.clients);
        const p = Math.max(200, (v.to - v.from) * 0.6);
        setView(v.from - p, v.to + p);
        canvas.scrollIntoView({ block: "nearest" });
      });
      $("vlist").append(li);
    }
  }
  if (vi === 0) $("vlist").append(el("li", {}, "none"));
  for (const f of D.faults) {
    const out = f.outcome || {};
    const li = el("li", { "data-fault": f.fault }, `${sec(f.from)}–${sec(f.to)} ${f.fault} ${(f.targets || []).join(", ")} `,
      out.reply === "lost" ? el("b", { class: "lost-reply" }, `its ${(f.params || {}).op || ""} reply was lost (the client saw ${out.client_saw || "nothing"}) `) : "",
      el("span", { class: "meta" }, Object.entries({ ...(f.params || {}), ...out }).map(([k, v]) => k + "=" + v).join(" ")));
    li.addEventListener("click", () => { const p = Math.max(500, (f.to - f.from) * 0.3); setView(f.from - p, f.to + p); });
    $("flist").append(li);
  }
  if (!D.faults.length) $("flist").append(el("li", {}, "none"));

  // --- plots, with the fault bands ---
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
  const plotWidth = Math.max(400, $("plots").clientWidth - 20);
  const P = D.plot;
  const per = P.bucket > 1 ? ` (over ${P.bucket} s buckets)` : "";
  new uPlot({ title: "grants per second" + per, width: plotWidth, height: 180, hooks: { drawClear: [bands] },
    series: [{ label: "s" }, { label: "grants/s", stroke: COLORS.hold, fill: "rgba(59,111,212,0.15)" }] }, [P.t, P.grants], $("plot-grants"));
  new uPlot({ title: "acquire latency (ms)" + per, width: plotWidth, height: 180, hooks: { drawClear: [bands] },
    series: [{ label: "s" }, { label: "p50", stroke: "#17803d" }, { label: "p99", stroke: "#c0142b" }] }, [P.t, P.p50, P.p99], $("plot-latency"));

  resize(); draw();
  window.addEventListener("resize", () => { resize(); draw(); });
  document.body.dataset.rendered = "true";
  window.renderMs = performance.now();
})();
