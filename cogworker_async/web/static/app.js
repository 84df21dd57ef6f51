// cogworker web UI: the only script of ours. Loaded from the package (CSP: script-src 'self'),
// with uPlot (static/vendor/, MIT) for the charts.
// 1. The dashboard: poll stats.json, one poll in flight at a time; the live chart
//    (jobs/s, a range and a pace to choose, Pause), the per-day chart's today and
//    the queue table.
// 2. "Select all" on the set pages.
// 3. A confirmation before the buttons that change many things (data-confirm).
"use strict";

(function () {
  const POLL_TIMEOUT_MS = 10000;
  const COLORS = { processed: "--ok", failed: "--danger" };

  function color(name) {
    return getComputedStyle(document.documentElement).getPropertyValue(COLORS[name]).trim() || "#888";
  }

  // Time labels: one line each, 24 h clock, local time ("14:05", "14:05:30", "12-07 14:05").
  const pad = (n) => String(n).padStart(2, "0");
  function clock(t, seconds) {
    const d = new Date(t * 1000);
    return pad(d.getHours()) + ":" + pad(d.getMinutes()) + (seconds ? ":" + pad(d.getSeconds()) : "");
  }
  function stamp(t) {
    const d = new Date(t * 1000);
    return d.getFullYear() + "-" + pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " + clock(t, true);
  }
  function timeTicks(u, ticks, axis, space, incr) {
    const span = (u.scales.x.max || 0) - (u.scales.x.min || 0);
    return ticks.map((t) => {
      const d = new Date(t * 1000);
      return span > 86400 ? pad(d.getMonth() + 1) + "-" + pad(d.getDate()) + " " + clock(t, false) : clock(t, incr < 60);
    });
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
        { label: xLabel, value: (u, t) => t == null ? "-" : stamp(t) },
        { label: "processed", stroke: color("processed"), width: 2 },
        { label: "failed", stroke: color("failed"), width: 2 },
      ],
      axes: [Object.assign(axis(""), { values: timeTicks }), axis(yLabel || "jobs")],
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
      const series = [{ label: "time", value: (u, t) => t == null ? "-" : stamp(t) }].concat(given.series.map((s) =>
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

    // The queue table, redrawn from each poll's rows: text and attributes only, so
    // a queue's name is never read as HTML.
    function showQueues(rows) {
      const body = document.getElementById("queue-rows");
      if (!body || !Array.isArray(rows)) return;
      const fresh = document.createDocumentFragment();
      for (const row of rows) {
        const tr = document.createElement("tr");
        const name = document.createElement("td");
        const label = document.createElement(row.href ? "a" : "span");
        if (row.href) label.setAttribute("href", row.href); else label.className = "mono";
        label.textContent = String(row.name);
        name.appendChild(label);
        const size = document.createElement("td");
        size.className = "num";
        size.textContent = String(row.size);
        const latency = document.createElement("td");
        latency.className = "num";
        latency.textContent = String(row.latency);
        const paused = document.createElement("td");
        if (row.paused) {
          const badge = document.createElement("span");
          badge.className = "badge";
          badge.textContent = "paused";
          paused.appendChild(badge);
        }
        tr.append(name, size, latency, paused);
        fresh.appendChild(tr);
      }
      if (!rows.length) {
        const tr = document.createElement("tr");
        const td = document.createElement("td");
        td.colSpan = 4;
        td.className = "muted";
        td.textContent = "no queues yet";
        tr.appendChild(td);
        fresh.appendChild(tr);
      }
      body.replaceChildren(fresh);
      body.dataset.polled = String(Number(body.dataset.polled || 0) + 1);
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
        showQueues(now.queues);
        state.textContent = "last poll " + clock(Date.now() / 1000, true);
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
