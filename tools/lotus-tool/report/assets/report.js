// lotus — lotus-tool report: draws the charts of the page from the embedded JSON (#lotus-data)
// SPDX-License-Identifier: MIT
// With Chart.js (histograms, bars) and dygraphs (zoomable per-batch charts and timeline).
(function () {
  'use strict';
  var root = document.documentElement;
  var errBox = document.getElementById('lotus-errors');
  function fail(msg) {
    errBox.textContent += 'Chart error: ' + msg + '\n';
    errBox.style.display = 'block';
    root.setAttribute('data-lotus-errors', String(Number(root.getAttribute('data-lotus-errors') || 0) + 1));
  }
  window.addEventListener('error', function (e) { fail(e.message + ' (line ' + e.lineno + ')'); });

  var D = JSON.parse(document.getElementById('lotus-data').textContent);
  var palette = ['#1f77b4', '#ff7f0e', '#2ca02c', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f',
                 '#bcbd22', '#17becf', '#d62728'];
  var WORKER = '#1f77b4', WAIT = '#d62728', MARKER = '#2ca02c', TRIGGER = '#111111';

  // 1234.5 -> "1,234.5"; a duration in ns -> "1 ms", "100 µs", "10 s".
  function num(v, digits) {
    return v.toLocaleString('en-US', {maximumFractionDigits: digits === undefined ? 2 : digits});
  }
  function dur(ns) {
    if (ns >= 1e9) return num(ns / 1e9, 3) + ' s';
    if (ns >= 1e6) return num(ns / 1e6, 3) + ' ms';
    if (ns >= 1e3) return num(ns / 1e3, 3) + ' \u00b5s';
    return num(ns, 3) + ' ns';
  }
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  if (window.Chart) {
    Chart.defaults.animation = false;
    Chart.defaults.font.size = 12;
    Chart.defaults.color = '#333';
    Chart.defaults.maintainAspectRatio = false;
  }

  // ---- per-op duration histograms (Chart.js): bars on a log10(ns) axis, ticks at decades ----
  function histograms() {
    var box = document.getElementById('hists');
    if (!box) return;
    D.ops.forEach(function (op, k) {
      var bins = op.hist, lo = bins.length, hi = -1;
      bins.forEach(function (v, i) { if (v) { lo = Math.min(lo, i); hi = Math.max(hi, i); } });
      if (hi < 0) return;
      var per = D.per_decade, l10 = Math.log10(D.hist_min_ns);
      var dlo = Math.floor(lo / per), dhi = Math.floor(hi / per) + 1;  // whole decades
      var pts = [];
      for (var i = lo; i <= hi; i++) pts.push({x: l10 + (i + 0.5) / per, y: bins[i], i: i});
      var card = el('div', 'hist');
      var wrap = el('div', 'chart-box hist-box');
      var c = el('canvas');
      c.setAttribute('role', 'img');
      c.setAttribute('aria-label', 'duration histogram of ' + op.label);
      wrap.appendChild(c);
      card.appendChild(wrap);
      box.appendChild(card);
      new Chart(c, {
        type: 'bar',
        data: {datasets: [{data: pts, backgroundColor: palette[k % palette.length],
                           barPercentage: 1, categoryPercentage: 1, borderWidth: 0}]},
        options: {
          parsing: false,
          plugins: {
            legend: {display: false},
            title: {display: true, text: op.label + ' \u2014 ' + num(op.count, 0) + ' records',
                    font: {size: 13, weight: 'bold'}},
            tooltip: {callbacks: {
              title: function (items) {
                var i = items[0].raw.i;
                return dur(D.hist_min_ns * Math.pow(10, i / per)) + ' \u2013 ' +
                       dur(D.hist_min_ns * Math.pow(10, (i + 1) / per));
              },
              label: function (item) { return num(item.raw.y, 0) + ' records'; }}}
          },
          scales: {
            x: {type: 'linear', min: l10 + dlo, max: l10 + dhi, offset: false,
                title: {display: true, text: 'duration (log scale)'},
                ticks: {stepSize: 1, autoSkip: false, maxRotation: 0,
                        callback: function (v) {
                          return Math.abs(v - Math.round(v)) < 1e-9 ? dur(Math.pow(10, v)) : null;
                        }},
                grid: {offset: false}},
            y: {beginAtZero: true, title: {display: true, text: 'records'},
                ticks: {precision: 0, callback: function (v) { return num(v, 0); }}}
          }
        }
      });
    });
  }

  // Ticks at whole numbers (batch ids), 1, 2 or 5 times a power of ten apart, one per
  // `spacing` pixels at most.
  function integerTicks(min, max, pixels, spacing) {
    var raw = (max - min) / Math.max(1, Math.floor(pixels / spacing));
    var p = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1))));
    var step = [1, 2, 5, 10].map(function (m) { return m * p; })
                            .filter(function (v) { return v >= raw; })[0] || 10 * p;
    step = Math.max(1, step);
    var ticks = [];
    for (var v = Math.ceil(min / step) * step + 0; v <= max; v += step) ticks.push({v: v, label: num(v, 0)});  // + 0: no "-0"
    return ticks;
  }

  // ---- per-batch charts (dygraphs, zoomable): one point series per epoch ----
  function perBatch(id, points, ylabel, logscale) {
    var box = document.getElementById(id);
    if (!box || !points.length) return;
    var epochs = [];
    points.forEach(function (p) { if (epochs.indexOf(p[2]) < 0) epochs.push(p[2]); });
    epochs.sort(function (a, b) { return a - b; });
    var col = {};
    epochs.forEach(function (e, i) { col[e] = i + 1; });
    var sorted = points.slice().sort(function (a, b) { return a[0] - b[0] || a[2] - b[2]; });
    var rows = sorted.map(function (p) {
      var r = [p[0]];
      for (var i = 0; i < epochs.length; i++) r.push(null);
      r[col[p[2]]] = logscale ? Math.max(p[1], 1e-6) : p[1];
      return r;
    });
    // Epochs numbered from 0, as in stats, the findings, --epoch and the sidecars' `epoch` lines.
    var labels = ['batch id'].concat(epochs.map(function (e) { return 'epoch ' + e; }));
    var chart = box.querySelector('.dy');
    var legend = box.querySelector('.legend');
    var yaxis = {axisLabelWidth: 84,  // room for "1,000,000" beside the axis title
                 axisLabelFormatter: function (v) { return num(v, 3); },
                 valueFormatter: function (v) { return num(v, 3) + ' ms'; }};
    if (logscale) {  // whole decades, ticks at each power of ten
      var lo = Infinity, hi = 0;
      points.forEach(function (p) { var v = Math.max(p[1], 1e-6); lo = Math.min(lo, v); hi = Math.max(hi, v); });
      var d0 = Math.floor(Math.log10(lo)), d1 = Math.max(Math.ceil(Math.log10(hi)), d0 + 1);
      yaxis.valueRange = [Math.pow(10, d0) / 1.5, Math.pow(10, d1)];
      yaxis.ticker = function () {
        var t = [];
        for (var k = d0; k <= d1; k++) {
          var v = Math.pow(10, k);
          t.push({v: v, label: num(v, Math.max(0, -k))});
        }
        return t;
      };
    }
    var x0 = sorted[0][0], x1 = sorted[sorted.length - 1][0];
    new Dygraph(chart, rows, {
      labels: labels,
      dateWindow: x1 - x0 < 2 ? [x0 - 0.5, x1 + 0.5] : null,  // a window even for one batch
      colors: epochs.map(function (e, i) { return palette[i % palette.length]; }),
      drawPoints: true, strokeWidth: 0, pointSize: 2, highlightCircleSize: 4,
      xRangePad: 8, yRangePad: 10,  // points off the axes; the two "0" ticks apart
      connectSeparatedPoints: false,
      logscale: !!logscale,
      xlabel: 'batch id', ylabel: ylabel,
      labelsDiv: legend, legend: 'always', labelsSeparateLines: false,
      axes: {
        x: {axisLabelFormatter: function (v) { return num(v, 0); },
            valueFormatter: function (v) { return 'batch ' + num(v, 0); },
            ticker: function (min, max, pixels) { return integerTicks(min, max, pixels, 70); },
            pixelsPerLabel: 70},
        y: yaxis
      },
      yLabelWidth: 20, xLabelHeight: 20
    });
  }

  // ---- timeline (dygraphs): per row and bucket, the share of the bucket the thread was busy ----
  function timeline() {
    var T = D.timeline, box = document.getElementById('timeline');
    if (!box || !T || !T.rows.length || !T.buckets) return;
    var n = T.rows.length, band = 0.8;
    var labels = ['time (s)'], series = {}, data = [];
    T.rows.forEach(function (r, i) {
      var name = 'r' + i;
      labels.push(name);
      series[name] = {row: i, kind: r.kind, marker: false};
    });
    var hasMarkers = [];
    T.rows.forEach(function (r, i) {
      if (r.markers) { labels.push('m' + i); series['m' + i] = {row: i, marker: true}; hasMarkers.push(i); }
    });
    // A flight-recorder capture: its trigger, a vertical line drawn over the rows (last series).
    var trigger = typeof T.capture_s === 'number';
    if (trigger) { labels.push('trigger'); series.trigger = {trigger: true}; }
    for (var k = 0; k < T.buckets; k++) {
      var row = [T.start_s + k * T.bucket_s];
      T.rows.forEach(function (r) { row.push(r.coverage[k]); });
      hasMarkers.forEach(function (i) { row.push(T.rows[i].markers[k]); });
      if (trigger) {
        var b0 = T.start_s + k * T.bucket_s;
        row.push(T.capture_s >= b0 && T.capture_s < b0 + T.bucket_s ? 1 : null);
      }
      data.push(row);
    }
    // Row i occupies the band [n - 1 - i, n - i) of the y axis; busy coverage c fills c * band.
    function base(i) { return n - 1 - i; }
    function plotter(e) {
      var s = series[e.setName], g = e.dygraph, ctx = e.drawingContext;
      if (s.trigger) {
        var tx = g.toDomXCoord(T.capture_s), a = e.plotArea;
        if (tx < a.x || tx > a.x + a.w) return;
        ctx.save();
        ctx.strokeStyle = TRIGGER;
        ctx.lineWidth = 2;
        ctx.setLineDash([6, 3]);
        ctx.beginPath(); ctx.moveTo(tx, a.y); ctx.lineTo(tx, a.y + a.h); ctx.stroke();
        ctx.restore();
        return;
      }
      var y0 = g.toDomYCoord(base(s.row)), full = y0 - g.toDomYCoord(base(s.row) + band);
      e.points.forEach(function (p) {
        if (!p.yval || isNaN(p.yval)) return;
        var x0 = Math.floor(g.toDomXCoord(p.xval));
        var x1 = Math.max(x0 + 1, Math.ceil(g.toDomXCoord(p.xval + T.bucket_s)));
        if (x1 < e.plotArea.x || x0 > e.plotArea.x + e.plotArea.w) return;
        if (s.marker) {  // out-of-order arrivals: a green triangle at the top of the row
          var cx = (x0 + x1) / 2, top = y0 - full;
          ctx.fillStyle = MARKER;
          ctx.strokeStyle = '#fff';
          ctx.lineWidth = 1;
          ctx.beginPath();
          ctx.moveTo(cx - 5, top); ctx.lineTo(cx + 5, top); ctx.lineTo(cx, top + 8);
          ctx.closePath(); ctx.fill(); ctx.stroke();
          return;
        }
        var h = Math.max(1, full * p.yval);
        ctx.fillStyle = s.kind === 'main' ? WAIT : WORKER;
        ctx.fillRect(x0, y0 - h, x1 - x0, h);
      });
    }
    var colors = labels.slice(1).map(function (l) {
      var s = series[l];
      if (s.trigger) return TRIGGER;
      return s.marker ? MARKER : (s.kind === 'main' ? WAIT : WORKER);
    });
    var legend = box.querySelector('.legend');
    // Row labels get the room they need (up to 360 px; longer ones end in an ellipsis and
    // show in full on hover).
    var ctx = document.createElement('canvas').getContext('2d');
    ctx.font = '14px ' + getComputedStyle(document.body).fontFamily;
    var labelWidth = 100;
    T.rows.forEach(function (r) { labelWidth = Math.max(labelWidth, Math.ceil(ctx.measureText(r.label).width) + 16); });
    labelWidth = Math.min(labelWidth, 360);
    legend.style.marginLeft = labelWidth + 'px';
    var g = new Dygraph(box.querySelector('.dy'), data, {
      labels: labels, colors: colors, plotter: plotter,
      valueRange: [0, n], drawGrid: true, drawYGrid: false,
      labelsDiv: legend, legend: 'always',
      xlabel: 'time since the first batch record (s)',
      axes: {
        x: {axisLabelFormatter: function (v) { return num(v, 3); }, pixelsPerLabel: 80},
        y: {axisLabelWidth: labelWidth, drawAxis: true,
            ticker: function () {
              // dygraphs puts tick labels in with innerHTML: a row label (a thread or host name
              // from the trace) is text, so it goes in escaped.
              return T.rows.map(function (r, i) { return {v: base(i) + band / 2, label: esc(r.label)}; });
            }}
      },
      drawCallback: function () {
        Array.prototype.forEach.call(box.querySelectorAll('.dygraph-axis-label-y'), function (e) {
          e.title = e.textContent;
        });
      },
      legendFormatter: function (d) {
        if (d.x === undefined) {
          return '<span class="key" style="background:' + WORKER + '"></span> worker busy preparing a batch ' +
                 '<span class="key" style="background:' + WAIT + '"></span> main process waiting for a batch ' +
                 '<span class="tri"></span> out-of-order arrival \u00b7 bar height: busy share of each ' +
                 dur(T.bucket_s * 1e9) + ' bucket' +
                 (T.grouping !== 'thread' ? ' (rows of several threads: of their live time)' : '') +
                 (trigger ? ' \u00b7 <span class="key" style="background:' + TRIGGER +
                            '"></span> the capture\u2019s trigger' : '') +
                 ' \u00b7 drag to zoom, double-click to reset';
        }
        var parts = [];
        d.series.forEach(function (sd) {
          var s = series[sd.label];
          if (!sd.y) return;
          if (s.trigger) { parts.push('the capture\u2019s trigger'); return; }
          var r = T.rows[s.row];
          var k = Math.round((d.x - T.start_s) / T.bucket_s);
          parts.push(s.marker ? esc(r.label) + ': ' + sd.y + ' out of order'
                              : esc(r.label) + ': ' + Math.round(100 * sd.y) + '% ' +
                                (r.kind === 'main' ? 'waiting' : 'busy') +
                                (r.live ? ' (of ' + num(r.live[k], 1) + ' live threads)' : ''));
        });
        return num(d.x, 3) + '\u2013' + num(d.x + T.bucket_s, 3) + ' s: ' +
               (parts.length ? parts.join(' \u00b7 ') : 'all idle');
      }
    });
    return g;
  }
  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;'}[c];
    });
  }

  // ---- horizontal bar charts (Chart.js): attribution shares, per-rank wait shares ----
  function hbars(id, labels, datasets, xtitle) {
    var c = document.getElementById(id);
    if (!c) return;
    c.parentElement.style.height = (70 + labels.length * 18 * datasets.length + labels.length * 10) + 'px';
    new Chart(c, {
      type: 'bar',
      data: {labels: labels, datasets: datasets.map(function (d, i) {
        return {label: d.label, data: d.data, backgroundColor: palette[i % palette.length]};
      })},
      options: {
        indexAxis: 'y',
        plugins: {legend: {position: 'top', display: datasets.length > 1},
                  tooltip: {callbacks: {label: function (it) {
                    return it.dataset.label + ': ' + num(it.raw, 1) + '%';
                  }}}},
        scales: {x: {beginAtZero: true, title: {display: true, text: xtitle},
                     ticks: {callback: function (v) { return num(v, 1); }}},
                 y: {ticks: {autoSkip: false}}}
      }
    });
  }

  function run(name, fn) {
    try { fn(); } catch (e) { fail(name + ': ' + (e && e.message ? e.message : e)); }
  }
  run('histograms', histograms);
  run('preprocessing', function () { perBatch('pre', D.preprocessed, 'preprocessing time (ms)', false); });
  run('wait', function () { perBatch('wait', D.waits, 'wait time (ms, log scale)', true); });
  run('delay', function () { perBatch('delay', D.delays, 'delay time (ms)', false); });
  run('timeline', timeline);
  if (D.attribution) {
    run('attribution', function () {
      hbars('attr', D.attribution.map(function (a) { return a[0]; }), [
        {label: 'CPU share (profile)', data: D.attribution.map(function (a) { return 100 * a[1]; })},
        {label: 'traced time share', data: D.attribution.map(function (a) { return a[2] < 0 ? null : 100 * a[2]; })}
      ], 'share (%)');
    });
  }
  if (D.causes && D.causes.length) {
    // Per batch: stacked bars of its time on a CPU, waiting for a CPU, and blocked (ms).
    run('causes', function () {
      var c = document.getElementById('causes-chart');
      if (!c) return;
      var names = ['on CPU', 'waiting for a CPU', 'blocked'];
      new Chart(c, {
        type: 'bar',
        data: {labels: D.causes.map(function (b) { return b[0]; }),
               datasets: names.map(function (n, i) {
                 return {label: n, data: D.causes.map(function (b) { return b[i + 1]; }),
                         backgroundColor: palette[i % palette.length]};
               })},
        options: {
          animation: false,
          plugins: {legend: {position: 'top'},
                    tooltip: {callbacks: {label: function (it) {
                      return it.dataset.label + ': ' + num(it.raw, 2) + ' ms';
                    }}}},
          scales: {x: {stacked: true, title: {display: true, text: 'batch (worker thread)'}},
                   y: {stacked: true, beginAtZero: true, title: {display: true, text: 'ms'}}}
        }
      });
    });
  }
  if (D.ranks && D.ranks.length > 1) {
    run('ranks', function () {
      hbars('ranks-chart', D.ranks.map(function (r) { return r.label; }), [
        {label: 'main-process wait share', data: D.ranks.map(function (r) { return 100 * r.wait_share; })}
      ], 'share of the main process\u2019s time spent waiting for a batch (%)');
    });
  }
  root.setAttribute('data-lotus-rendered', '1');
})();
