/* djwork dashboard: select-all for bulk forms, and two small SVG charts (no library, no build step).
   Job data never reaches innerHTML: chart data comes from json_script and labels are set with textContent. */
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";

  // --- bulk selection ------------------------------------------------------------------
  function updateSelection(form) {
    var boxes = form.querySelectorAll('input[name="key"]');
    var checked = form.querySelectorAll('input[name="key"]:checked').length;
    form.querySelectorAll("[data-needs-selection]").forEach(function (button) { button.disabled = checked === 0; });
    var count = form.querySelector("[data-selected-count]");
    if (count) { count.textContent = checked ? "Selected (" + checked + "):" : "Select jobs:"; }
    var all = form.querySelector("[data-select-all]");
    if (all) { all.checked = boxes.length > 0 && checked === boxes.length; all.indeterminate = checked > 0 && checked < boxes.length; }
  }
  document.addEventListener("change", function (event) {
    var form = event.target.closest("[data-bulk]");
    if (!form) { return; }
    if (event.target.matches("[data-select-all]")) {
      form.querySelectorAll('input[name="key"]').forEach(function (box) { box.checked = event.target.checked; });
    }
    updateSelection(form);
  });
  document.querySelectorAll("[data-bulk]").forEach(updateSelection);

  // The dashboard's one clock is UTC, 24 h, as the footer's: a local 12-hour time beside it read as another.
  function utcClock(millis) { return new Date(millis).toISOString().slice(11, 19); }

  // --- self-refreshing regions (the Busy page) ---------------------------------------------------
  /* Every N seconds the page is fetched again and its [data-refresh] region and health strip are swapped for
     the new ones: nodes parsed from the server's (escaped) HTML, never a string given to innerHTML. Pausable;
     the choice is kept for the tab, so it survives the redirect after a Quiet or Stop click. */
  var live = document.querySelector("[data-refresh]");
  if (live) {
    var every = Number(live.getAttribute("data-refresh")) || 5, refreshes = 0;
    var refreshToggle = document.querySelector("[data-refresh-toggle]");
    var refreshStatus = document.querySelector("[data-refresh-status]");
    var refreshPaused = sessionStorage.getItem("djwork-refresh-paused") === "1";
    var showRefresh = function (text) {
      if (refreshToggle) { refreshToggle.textContent = refreshPaused ? "Resume" : "Pause"; }
      if (refreshStatus) { refreshStatus.textContent = text || (refreshPaused ? "auto-refresh paused" : "refreshing every " + every + "s"); }
    };
    var refresh = function () {
      if (refreshPaused || document.hidden) { return; }
      fetch(window.location.href, {credentials: "same-origin", headers: {Accept: "text/html"}})
        .then(function (response) { if (!response.ok) { throw new Error("HTTP " + response.status); } return response.text(); })
        .then(function (html) {
          if (refreshPaused) { return; }
          var fresh = new DOMParser().parseFromString(html, "text/html");
          ["#" + live.id, "#health"].forEach(function (selector) {
            var now = document.querySelector(selector), next = fresh.querySelector(selector);
            if (now && next) { now.replaceWith(document.importNode(next, true)); }
          });
          live = document.querySelector("[data-refresh]");
          refreshes += 1;
          document.body.setAttribute("data-refreshes", String(refreshes));
          showRefresh("updated " + utcClock(Date.now()) + " UTC");
        })
        .catch(function (error) { showRefresh("refresh failed (" + error.message + "), retrying"); });
    };
    if (refreshToggle) {
      refreshToggle.addEventListener("click", function () {
        refreshPaused = !refreshPaused;
        sessionStorage.setItem("djwork-refresh-paused", refreshPaused ? "1" : "0");
        showRefresh();
      });
    }
    showRefresh();
    setInterval(refresh, every * 1000);
    window.djworkRefresh = refresh;
  }

  // --- charts ------------------------------------------------------------------------------
  function el(name, attrs, parent) {
    var node = document.createElementNS(SVG, name);
    Object.keys(attrs || {}).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    if (parent) { parent.appendChild(node); }
    return node;
  }
  function fmt(n) {
    if (n >= 100 || n === 0) { return Math.round(n).toLocaleString(); }
    return n >= 10 ? n.toFixed(1) : n.toFixed(2);
  }
  function niceMax(value) {
    if (value <= 0) { return 1; }
    var power = Math.pow(10, Math.floor(Math.log10(value)));
    var steps = [1, 2, 2.5, 5, 10];
    for (var i = 0; i < steps.length; i++) { if (steps[i] * power >= value) { return steps[i] * power; } }
    return 10 * power;
  }

  /* series: [{name, cls, values: [number]}]; labels: [string] (one per point); tips: optional [string]. */
  function lineChart(container, labels, series, emptyText) {
    var width = Math.max(container.clientWidth, 200), height = Math.max(container.clientHeight, 120);
    var pad = {left: 44, right: 10, top: 8, bottom: 22};
    container.textContent = "";
    var svg = el("svg", {viewBox: "0 0 " + width + " " + height, preserveAspectRatio: "none"}, container);
    var innerW = width - pad.left - pad.right, innerH = height - pad.top - pad.bottom;
    var max = 0;
    series.forEach(function (s) { s.values.forEach(function (v) { if (v > max) { max = v; } }); });
    max = niceMax(max);
    for (var g = 0; g <= 4; g++) {
      var y = pad.top + innerH - innerH * g / 4;
      el("line", {x1: pad.left, x2: width - pad.right, y1: y, y2: y, "class": "grid"}, svg);
      var label = el("text", {x: pad.left - 6, y: y + 3, "text-anchor": "end", "class": "axis"}, svg);
      label.textContent = fmt(max * g / 4);
    }
    var n = labels.length;
    if (n === 0) {
      var note = el("text", {x: pad.left + innerW / 2, y: pad.top + innerH / 2, "text-anchor": "middle", "class": "empty-note"}, svg);
      note.textContent = emptyText || "No data yet";
      return;
    }
    function xAt(i) { return pad.left + (n === 1 ? innerW / 2 : innerW * i / (n - 1)); }
    function yAt(v) { return pad.top + innerH - innerH * v / max; }
    var every = Math.max(1, Math.ceil(n / Math.max(2, Math.floor(innerW / 70))));
    labels.forEach(function (text, i) {
      // Counted back from the newest point, so the latest one is always labelled and none collide.
      if ((n - 1 - i) % every !== 0) { return; }
      var t = el("text", {x: xAt(i), y: height - 6, "text-anchor": i === 0 ? "start" : (i === n - 1 ? "end" : "middle"), "class": "axis"}, svg);
      t.textContent = text;
    });
    series.forEach(function (s) {
      var points = s.values.map(function (v, i) { return xAt(i).toFixed(1) + "," + yAt(v).toFixed(1); });
      el("polygon", {points: xAt(0) + "," + yAt(0) + " " + points.join(" ") + " " + xAt(n - 1) + "," + yAt(0), "class": "area " + s.cls}, svg);
      el("polyline", {points: points.join(" "), "class": "line " + s.cls}, svg);
      if (n <= 60) {
        s.values.forEach(function (v, i) {
          var dot = el("circle", {cx: xAt(i), cy: yAt(v), r: 2.6, "class": "dot " + s.cls}, svg);
          el("title", {}, dot).textContent = labels[i] + ": " + fmt(v) + " " + s.name;
        });
      }
    });
  }

  var dataNode = document.getElementById("djwork-chart-data");
  if (!dataNode) { return; }
  var data = JSON.parse(dataNode.textContent);
  var historyBox = document.getElementById("history-chart");
  var liveBox = document.getElementById("live-chart");

  function drawHistory() {
    if (!historyBox) { return; }
    var days = data.history || [];
    lineChart(historyBox, days.map(function (d) { return d.date.slice(5); }), [
      {name: "processed", cls: "s-processed", values: days.map(function (d) { return d.processed; })},
      {name: "failed", cls: "s-failed", values: days.map(function (d) { return d.failed; })}
    ], "No jobs recorded in this period");
  }

  // Live: rates between consecutive polls of the stats endpoint (the server's clock, not ours).
  var samples = [], previous = {time: null, stats: data.stats}, timer = null, paused = false;
  var status = document.querySelector("[data-live-status]"), toggle = document.querySelector("[data-live-toggle]");
  function drawLive() {
    if (!liveBox) { return; }
    lineChart(liveBox, samples.map(function (s) { return s.label; }), [
      {name: "processed/s", cls: "s-processed", values: samples.map(function (s) { return s.processed; })},
      {name: "failed/s", cls: "s-failed", values: samples.map(function (s) { return s.failed; })}
    ], "Collecting… (a point every " + data.poll_seconds + "s)");
  }
  function showStats(stats) {
    Object.keys(stats).forEach(function (key) {
      document.querySelectorAll('[data-stat="' + key + '"]').forEach(function (node) {
        var value = stats[key];
        if (node.getAttribute("data-format") === "duration") {
          node.textContent = value === 0 ? "0s" : value < 1 ? Math.round(value * 1000) + "ms" : value < 60 ? value.toFixed(1) + "s" : Math.floor(value / 60) + "m " + String(Math.floor(value % 60)).padStart(2, "0") + "s";
        } else {
          node.textContent = Number(value).toLocaleString("en-US");
        }
      });
    });
  }
  function poll() {
    if (paused || document.hidden) { return; }
    fetch(data.poll_url, {credentials: "same-origin", headers: {Accept: "application/json"}})
      .then(function (response) { if (!response.ok) { throw new Error("HTTP " + response.status); } return response.json(); })
      .then(function (stats) {
        if (previous.time !== null) {
          var seconds = Math.max(stats.time - previous.time, 0.001);
          samples.push({
            label: utcClock(stats.time * 1000),
            processed: Math.max(0, (stats.processed - previous.stats.processed) / seconds),
            failed: Math.max(0, (stats.failed - previous.stats.failed) / seconds)
          });
          if (samples.length > 60) { samples.shift(); }
        }
        previous = {time: stats.time, stats: stats};
        showStats(stats);
        drawLive();
        if (status) { status.textContent = "updated " + utcClock(stats.time * 1000) + " UTC"; }
      })
      .catch(function (error) { if (status) { status.textContent = "poll failed (" + error.message + "), retrying"; } });
  }
  if (toggle) {
    toggle.addEventListener("click", function () {
      paused = !paused;
      toggle.textContent = paused ? "Resume" : "Pause";
      if (status) { status.textContent = paused ? "paused" : "polling every " + data.poll_seconds + "s"; }
    });
  }
  drawHistory();
  drawLive();
  poll();
  timer = setInterval(poll, data.poll_seconds * 1000);
  var resizeTimer = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(function () { drawHistory(); drawLive(); }, 150);
  });
  window.djworkDashboard = {poll: poll, timer: timer};
})();
