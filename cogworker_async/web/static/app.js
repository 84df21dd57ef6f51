// cogworker web UI: the only script of ours. Loaded from the package (CSP: script-src 'self'),
// with uPlot (static/vendor/, MIT) for the charts.
// 1. The dashboard: poll stats.json, one poll in flight at a time; the live chart
//    (jobs/s, a range and a pace to choose, Pause) and the per-day chart's today.
// 2. "Select all" on the set pages.
// 3. A confirmation before the buttons that change many things (data-confirm).
"use strict";

(function () {
  const POLL_TIMEOUT_MS = 10000;
  const COLORS = { processed: "--ok", failed: "--danger" };

  function color(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(COLORS[name]).trim() || "#888";
  }

  function widthOf(el) { return Math.max(280, Math.min(el.clientWidth || 600, 900)); }

  // A uPlot chart of processed and failed over time (x in unix seconds); the legend
  // under it shows the values under the cursor (the tooltip).
  function plot(el, xLabel, data, opts, yLabel) {
    const axisColor = getComputedStyle(document.body).color;
    const axis = (label) => ({ label, stroke: axisColor, grid: { stroke: "rgba(128,128,128,.2)" } });
    const chart = new uPlot(Object.assign({
      width: widthOf(el),
      height: 200,
      series: [
        { label: xLabel },
        { label: "processed", stroke: color("processed"), width: 2 },
        { label: "failed", stroke: color("failed"), width: 2 },
      ],
      axes: [axis(""), axis(yLabel || "jobs")],
      scales: { y: { range: (u, min, max) => [0, Math.max(1, max)] } },
    }, opts || {}), data, el);
    window.addEventListener("resize", () => chart.setSize({ width: widthOf(el), height: 200 }));
    return chart;
  }

  function perDay() {
    const el = document.getElementById("per-day");
    if (!el || typeof uPlot === "undefined") return null;
    const given = JSON.parse(el.dataset.chart);
    const x = given.days.map((day) => Date.parse(day + "T00:00:00Z") / 1000);
    const data = [x, given.processed.slice(), given.failed.slice()];
    const chart = plot(el, "day (UTC)", data, {
      axes: [
        { stroke: getComputedStyle(document.body).color, values: (u, ticks) =>
          ticks.map((t) => new Date(t * 1000).toISOString().slice(5, 10)) },
        { label: "jobs", stroke: getComputedStyle(document.body).color },
      ],
      series: [
        { label: "day (UTC)", value: (u, t) => t == null ? "-" : new Date(t * 1000).toISOString().slice(0, 10) },
        { label: "processed", stroke: color("processed"), width: 2 },
        { label: "failed", stroke: color("failed"), width: 2 },
      ],
    });
    return { chart, data, days: given.days };
  }

  // A chart drawn once from the page's data-series: {x: [epoch s], series: [{label, css, values}]}.
  function staticCharts() {
    if (typeof uPlot === "undefined") return;
    for (const el of document.querySelectorAll(".plot[data-series]")) {
      const given = JSON.parse(el.dataset.series);
      const series = [{ label: "time" }].concat(given.series.map((s) =>
        ({ label: s.label, stroke: color(s.css), width: 2 })));
      plot(el, "time", [given.x].concat(given.series.map((s) => s.values)), { series }, el.dataset.unit || "jobs");
    }
  }

  function live() {
    const totals = document.getElementById("totals");
    const el = document.getElementById("live");
    if (!totals || !el || typeof uPlot === "undefined") return;
    const feed = totals.dataset.feed;
    const toggle = document.getElementById("live-toggle");
    const state = document.getElementById("live-state");
    const range = document.getElementById("live-range");
    const every = document.getElementById("live-every");
    const days = perDay();
    const data = [[], [], []];
    const chart = plot(el, "time", data, null, "jobs/s");
    let last = null, paused = false, timer = null, inFlight = false;

    function keepWithin() {
      const since = Date.now() / 1000 - Number(range.value);
      while (data[0].length && data[0][0] < since) for (const column of data) column.shift();
    }

    function showToday(today) {
      if (!days || !today) return;
      for (const el of document.querySelectorAll("[data-today]")) el.textContent = String(today[el.dataset.today]);
      const end = days.days.length - 1;
      if (days.days[end] !== today.day) {  // midnight UTC passed: a new day at the right edge
        days.days.push(today.day); days.days.shift();
        for (const column of days.data) column.shift();
        days.data[0].push(Date.parse(today.day + "T00:00:00Z") / 1000);
        days.data[1].push(0); days.data[2].push(0);
      }
      days.data[1][end] = today.processed;
      days.data[2][end] = today.failed;
      days.chart.setData(days.data);
    }

    // One poll at a time: the next is scheduled only when this one has answered,
    // failed or timed out, so a slow Redis never piles polls up.
    async function poll() {
      timer = null;
      if (paused || inFlight) return;
      inFlight = true;
      const abort = new AbortController();
      const giveUp = setTimeout(() => abort.abort(), POLL_TIMEOUT_MS);
      try {
        const answer = await fetch(feed, { headers: { accept: "application/json" }, cache: "no-store", signal: abort.signal });
        if (!answer.ok) throw new Error("HTTP " + answer.status);
        const now = await answer.json();
        for (const stat of totals.querySelectorAll("[data-stat]")) {
          const value = now[stat.dataset.stat];
          if (value !== undefined) stat.textContent = String(value);
        }
        if (last && now.time > last.time) {
          const seconds = now.time - last.time;
          data[0].push(now.time);
          data[1].push(Math.max(0, now.processed - last.processed) / seconds);
          data[2].push(Math.max(0, now.failed - last.failed) / seconds);
          keepWithin();
          chart.setData(data);
          chart.setScale("x", { min: now.time - Number(range.value), max: now.time });
          el.dataset.points = String(data[0].length);
          el.dataset.span = String(Math.round(chart.scales.x.max - chart.scales.x.min));
        }
        showToday(now.today);
        state.textContent = "last poll " + new Date().toLocaleTimeString();
        last = now;
      } catch (err) {
        state.textContent = "poll failed: " + (err.name === "AbortError" ? "no answer in 10 s" : err.message);
      } finally {
        clearTimeout(giveUp);
        inFlight = false;
        if (!paused) timer = setTimeout(poll, Number(every.value));
      }
    }

    toggle.addEventListener("click", () => {
      paused = !paused;
      toggle.textContent = paused ? "Resume" : "Pause";
      if (paused) {
        if (timer) clearTimeout(timer);
        timer = null;
        state.textContent = "paused";
      } else {
        last = null;
        if (!inFlight) poll();
      }
    });
    range.addEventListener("change", () => {
      keepWithin();
      chart.setData(data);
    });
    el.dataset.points = "0";
    poll();
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

  document.addEventListener("DOMContentLoaded", () => { live(); staticCharts(); checkAll(); });
})();
