// locktest index: one row per run, failures first; click a header to sort.
(function () {
  "use strict";
  const rows = JSON.parse(document.getElementById("data").textContent);
  const checks = [...new Set(rows.flatMap((r) => Object.keys(r.verdicts)))];
  const cols = [
    ["failed", (r) => (r.problem ? 2 : r.exit)], ["time", (r) => r.time], ["run", (r) => r.dir], ["seed", (r) => r.seed ?? ""],
    ["recipe", (r) => r.recipe], ["resource", (r) => r.resource], ["faults", (r) => r.faults],
    ...checks.map((c) => [c, (r) => r.verdicts[c] || ""]), ["exit", (r) => r.exit], ["first story", (r) => r.problem || r.story || r.cut_short || ""],
  ];
  let sortBy = 0, desc = true;
  const thead = document.querySelector("#runs thead"), tbody = document.querySelector("#runs tbody");
  const tr = document.createElement("tr");
  cols.forEach(([name], i) => {
    const th = document.createElement("th");
    th.textContent = name;
    th.addEventListener("click", () => { desc = sortBy === i ? !desc : true; sortBy = i; render(); });
    tr.append(th);
  });
  thead.append(tr);
  function render() {
    const get = cols[sortBy][1];
    const sorted = rows.slice().sort((a, b) => {
      const x = get(a), y = get(b);
      const c = x < y ? -1 : x > y ? 1 : 0;
      return (desc ? -c : c) || (b.time < a.time ? -1 : 1);
    });
    tbody.replaceChildren(...sorted.map((r) => {
      const row = document.createElement("tr");
      row.className = r.problem ? "problem" : r.exit !== 0 ? "failed" : "";
      row.dataset.run = r.dir;
      for (const [name, get] of cols) {
        const td = document.createElement("td");
        if (name === "run" && r.report) {
          const a = document.createElement("a"); a.href = r.report; a.textContent = r.dir; td.append(a);
        } else if (name === "failed") {
          td.textContent = [r.problem ? "problem" : r.exit === 0 ? "" : r.exit === 1 ? "FAILED" : "unknown",
            r.cut_short ? "cut short" : ""].filter(Boolean).join(", ");
        } else {
          td.textContent = name === "time" ? new Date(r.time).toLocaleString() : String(get(r));
        }
        if (checks.includes(name)) td.className = get(r);
        row.append(td);
      }
      return row;
    }));
  }
  const failed = rows.filter((r) => r.exit !== 0 || r.problem).length;
  document.getElementById("summary").textContent = `${rows.length} runs, ${failed} failed or unknown`;
  render();
  document.body.dataset.rendered = "true";
})();
