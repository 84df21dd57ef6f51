// cogworker web UI: the only script. Loaded from the package (CSP: script-src 'self').
// 1. The dashboard's live chart: poll stats.json, plot jobs per poll; a Pause button.
// 2. "Select all" on the set pages.
// 3. A confirmation before the buttons that change many things (data-confirm).
"use strict";

(function () {
  const W = 600, H = 160, PAD = 4, KEEP = 60;

  // The newest poll at the right edge; KEEP polls span the width (two minutes).
  function points(values, top) {
    const step = (W - 2 * PAD) / (KEEP - 1);
    const scale = (H - 2 * PAD) / Math.max(1, top);
    const last = values.length - 1;
    return values.map((v, i) =>
      (W - PAD - (last - i) * step).toFixed(1) + "," +
      (H - PAD - Math.max(0, v) * scale).toFixed(1)).join(" ");
  }

  function live() {
    const totals = document.getElementById("totals");
    const chart = document.getElementById("live");
    if (!totals || !chart) return;
    const feed = totals.dataset.feed;
    const toggle = document.getElementById("live-toggle");
    const state = document.getElementById("live-state");
    const lines = { processed: chart.querySelector(".processed"), failed: chart.querySelector(".failed") };
    const series = { processed: [], failed: [] };
    let last = null, paused = false, timer = null;

    async function poll() {
      try {
        const answer = await fetch(feed, { headers: { accept: "application/json" }, cache: "no-store" });
        if (!answer.ok) throw new Error("HTTP " + answer.status);
        const now = await answer.json();
        for (const el of totals.querySelectorAll("[data-stat]")) {
          const value = now[el.dataset.stat];
          if (value !== undefined) el.textContent = String(value);
        }
        if (last) {
          for (const name of ["processed", "failed"]) {
            series[name].push(Math.max(0, now[name] - last[name]));
            if (series[name].length > KEEP) series[name].shift();
          }
          const top = Math.max(1, ...series.processed, ...series.failed);
          for (const name of ["processed", "failed"]) lines[name].setAttribute("points", points(series[name], top));
          state.textContent = "last poll " + new Date().toLocaleTimeString() + ", top " + top;
        }
        last = now;
      } catch (err) {
        state.textContent = "poll failed: " + err.message;
      }
    }

    function start() { poll(); timer = setInterval(poll, 2000); }
    toggle.addEventListener("click", () => {
      paused = !paused;
      toggle.textContent = paused ? "Resume" : "Pause";
      if (paused) { clearInterval(timer); state.textContent = "paused"; } else { last = null; start(); }
    });
    start();
  }

  function checkAll() {
    for (const box of document.querySelectorAll("input.check-all")) {
      box.addEventListener("change", () => {
        for (const row of box.form ? box.form.querySelectorAll("input[name=ref]") :
          document.querySelectorAll("#rows input[name=ref]")) row.checked = box.checked;
      });
    }
  }

  document.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-confirm]");
    if (button && !window.confirm(button.dataset.confirm)) event.preventDefault();
  });

  document.addEventListener("DOMContentLoaded", () => { live(); checkAll(); });
})();
