// The console page: polls GET /api/snapshot every second and GET /api/hosts every two (and at once when the
// table's sort, search or page changes) while it is visible, and posts the forms' actions to POST /api/actions/{name}.
// The token travels only as an Authorization header: from <meta name="frontier-token"> (the server embeds it for a
// loopback visitor) or from the token field (kept in sessionStorage, so a reload keeps it and no other tab reads it).
"use strict";

(function () {
  const SNAPSHOT_EVERY = 1000;  // ms between snapshot polls
  const HOSTS_EVERY = 2000;  // ms between hosts-table polls
  const TOKEN_KEY = "frontier-console-token";

  const $ = (id) => document.getElementById(id);
  let token = readToken();
  const hostsView = {sort: "fetched", desc: true, q: "", offset: 0, limit: 50, total: 0};

  function readToken() {
    const meta = document.querySelector('meta[name="frontier-token"]');
    if (meta && meta.content) return meta.content;
    return sessionStorage.getItem(TOKEN_KEY) || "";
  }

  // --- formatting ---------------------------------------------------------------------------------------

  const intFmt = new Intl.NumberFormat("en-US");
  function fmtInt(n) { return n == null ? "–" : intFmt.format(Math.round(n)); }
  function fmtNum(n, digits) {
    if (n == null || !isFinite(n)) return "–";
    return n.toLocaleString("en-US", {maximumFractionDigits: digits === undefined ? 1 : digits});
  }
  function fmtBytes(n) {
    if (n == null || !isFinite(n)) return "–";
    const units = ["B", "KB", "MB", "GB", "TB"];
    let i = 0;
    while (Math.abs(n) >= 1000 && i < units.length - 1) { n /= 1000; i++; }
    return fmtNum(n, i ? 1 : 0) + " " + units[i];
  }
  function fmtDuration(s) {
    if (s == null || !isFinite(s)) return "–";
    s = Math.floor(s);
    const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60), sec = s % 60;
    return (h ? h + "h " : "") + (h || m ? m + "m " : "") + sec + "s";
  }
  function fmtRatio(x) {
    if (x == null || !isFinite(x)) return "–";
    if (x === 0) return "0 %";
    return x < 1e-4 ? x.toExponential(1) : (100 * x).toFixed(x < 0.01 ? 3 : 1) + " %";
  }
  function fmtTime(t) { return new Date(t * 1000).toLocaleTimeString("en-GB", {hour12: false}); }
  function fmtValue(key, v) {
    if (typeof v === "number") {
      if (/(^|_)(until|time|at)$/.test(key)) return new Date(v * 1000).toLocaleString("en-GB", {hour12: false});
      if (/(^|_)(bytes|rss)$/.test(key)) return fmtBytes(v);
      if (/(^|_)(rate|fill|ratio)$/.test(key)) return fmtRatio(v);
      return Number.isInteger(v) ? fmtInt(v) : fmtNum(v, 3);
    }
    if (v === null || v === undefined) return "–";
    return typeof v === "object" ? JSON.stringify(v) : String(v);
  }

  function setText(id, text) {
    const el = $(id);
    if (el.textContent !== text) el.textContent = text;
  }

  // Replace a tbody's rows; `cells(row)` returns the cell contents (strings or nodes), `numeric` the indices to right-align.
  function fillRows(tbody, rows, cells, numeric) {
    const frag = document.createDocumentFragment();
    for (const row of rows) {
      const tr = document.createElement("tr");
      cells(row).forEach((c, i) => {
        const td = document.createElement("td");
        if (numeric && numeric.includes(i)) td.className = "num";
        if (c instanceof Node) td.appendChild(c); else td.textContent = c;
        tr.appendChild(td);
      });
      frag.appendChild(tr);
    }
    tbody.replaceChildren(frag);
  }

  // Key-value rows: `order`'s keys first, in that order, then (without `order`) the rest, largest first.
  function fillPairs(tbody, obj, empty, order) {
    obj = obj || {};
    let keys = Object.keys(obj);
    if (order) keys = order.filter((k) => k in obj);
    else keys.sort((a, b) => (typeof obj[b] === "number" && typeof obj[a] === "number") ? obj[b] - obj[a] : a.localeCompare(b));
    if (!keys.length) { fillRows(tbody, [empty], (e) => [e, ""]); return; }
    fillRows(tbody, keys, (k) => [k.replace(/_/g, " "), fmtValue(k, obj[k])], [1]);
  }

  // The seen-test's figures an operator reads first; the rest are under "all figures".
  const SEEN_FIRST = ["urls", "checked", "new", "lru_hit_rate", "bloom_fill", "fp_rate", "confirms",
    "false_positives_caught", "bloom_bytes", "bloom_generations", "mode"];

  // A crawl-log line (a JSON record) as one short line: time, HTTP status or outcome, bytes, URL.
  function logLine(line) {
    let r;
    try { r = JSON.parse(line); } catch (e) { return line; }
    if (!r || typeof r !== "object" || !r.url) return line;
    const when = r.fetched_at ? fmtTime(r.fetched_at) : "        ";
    const code = String(r.http_status == null ? "-" : r.http_status).padStart(3);
    const what = (r.reason || r.status || "").padEnd(18);
    const size = (r.bytes == null ? "" : fmtBytes(r.bytes)).padStart(9);
    return when + " " + code + " " + what + " " + size + "  " + r.url;
  }

  // --- talking to the server -----------------------------------------------------------------------------

  function headers(extra) {
    const h = Object.assign({}, extra);
    if (token) h["Authorization"] = "Bearer " + token;
    return h;
  }

  // GET a JSON endpoint; a 401 shows the token field.
  async function getJSON(path) {
    const resp = await fetch(path, {headers: headers(), cache: "no-store", credentials: "omit"});
    if (resp.status === 401) { askToken(); throw new Error("the console needs a token"); }
    if (!resp.ok) throw new Error(path + ": HTTP " + resp.status);
    return resp.json();
  }

  // POST an action; resolves to the effect, rejects with the server's one-line error.
  async function act(name, params) {
    const resp = await fetch("api/actions/" + encodeURIComponent(name), {
      method: "POST", credentials: "omit", cache: "no-store",
      headers: headers({"Content-Type": "application/json"}), body: JSON.stringify(params || {}),
    });
    let body = null;
    try { body = await resp.json(); } catch (e) { body = null; }
    if (resp.status === 401) askToken();
    if (!resp.ok || !body || body.ok === false) {
      const message = (body && body.error) || ("HTTP " + resp.status + " " + resp.statusText);
      throw new Error(message.startsWith(name + ": ") ? message.slice(name.length + 2) : message);
    }
    return body.effect || {};
  }

  function askToken() {
    $("token-form").hidden = false;
    setText("problem", "the console needs a token");
  }

  function describeEffect(effect) {
    const parts = Object.keys(effect).map((k) => k.replace(/_/g, " ") + ": " + fmtValue(k, effect[k]));
    return parts.length ? parts.join(", ") : "done";
  }

  // Run an action from a control, showing "…", then its effect or its error in `out`.
  async function run(out, name, params, button) {
    out.classList.remove("error", "ok");
    out.textContent = name + "…";
    if (button) button.disabled = true;
    try {
      const effect = await act(name, params);
      out.classList.add("ok");
      out.textContent = name + ": " + describeEffect(effect);
      pollSoon();
    } catch (e) {
      out.classList.add("error");
      out.textContent = name + " failed: " + e.message;
    } finally {
      if (button) button.disabled = false;
    }
  }

  // --- the snapshot ----------------------------------------------------------------------------------------

  function showSnapshot(s) {
    const c = s.crawl || {};
    const state = $("state");
    setText("state", c.state || "unknown");
    state.dataset.state = c.state || "unknown";
    setText("fetched", fmtInt(c.fetched));
    setText("queued", fmtInt(c.queued));
    setText("in-flight", fmtInt(c.in_flight));
    setText("pages-now", fmtNum(c.pages_per_s));
    setText("pages-avg", fmtNum(c.pages_per_s_avg));
    setText("bytes-now", fmtBytes(c.bytes_per_s));
    setText("bytes-avg", fmtBytes(c.bytes_per_s_avg));
    setText("elapsed", fmtDuration(c.elapsed));
    $("pause").disabled = c.state !== "running";
    $("resume").disabled = c.state !== "paused";
    showRate(s.rate || []);

    fillPairs($("outcomes"), s.outcomes, "no outcome yet");
    fillPairs($("waiting"), s.waiting, "nothing waits");
    fillPairs($("seen"), s.seen, "no figures", SEEN_FIRST);
    if ($("seen-all").closest("details").open) fillPairs($("seen-all"), s.seen, "no figures");
    fillRows($("workers"), s.workers || [], (w) => [w.name || "", String(w.pid),
      w.cpu == null ? "–" : fmtNum(100 * w.cpu) + " %", fmtBytes(w.rss), fmtInt(w.in_flight)], [2, 3, 4]);
    showTraps(s.traps || []);
    showLog(s.log_tail || []);
    const audit = (s.audit || []).slice().reverse();
    if (!audit.length) fillRows($("audit"), ["no action yet"], (t) => [t]);
    else fillRows($("audit"), audit, (a) => [
      a.time ? fmtTime(a.time) : "", a.caller || "", a.action || "",
      a.params ? JSON.stringify(a.params) : "", a.effect ? describeEffect(a.effect) : ""]);
    setText("updated", "updated " + new Date().toLocaleTimeString("en-GB", {hour12: false}));
  }

  function showTraps(traps) {
    if (!traps.length) { fillRows($("traps"), ["none suspected"], (t) => [t]); return; }
    fillRows($("traps"), traps, (t) => {
      const cell = document.createDocumentFragment();
      if (t.state === "suspected" || t.state === "parked") {
        const b = document.createElement("button");
        b.type = "button";
        b.textContent = "Release";
        b.title = "Stop suspecting " + t.pattern + ": its new URLs are fetched now, those it holds by the next run";
        b.addEventListener("click", () => run($("traps-result"), "release", {host: t.host, pattern: t.pattern}, b));
        cell.appendChild(b);
      }
      return [t.host, t.pattern, fmtInt(t.fetched), fmtNum(t.new_per_page, 2), fmtInt(t.queued),
        t.growing ? "yes" : "no", t.state, cell];
    }, [2, 3, 4]);
  }

  function showLog(lines) {
    const pre = $("log-tail");
    const text = lines.map(logLine).join("\n");
    if (pre.textContent === text) return;
    const atEnd = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
    pre.textContent = text;
    if (atEnd) pre.scrollTop = pre.scrollHeight;
  }

  // --- the rate chart --------------------------------------------------------------------------------------

  // pages/s (filled, left axis) and bytes/s (dashed, right axis) over the crawl's clock, drawn by uPlot
  // (static/vendor/uplot): made once, given each snapshot's "rate" series with setData, as wide as its box.
  const CHART_HEIGHT = 200;  // px, the plot and its axes
  let chart = null;

  function makeChart(box) {
    const style = getComputedStyle(document.body);
    const colour = (name, fallback) => style.getPropertyValue(name).trim() || fallback;
    const ink = colour("--muted", "#666"), line = colour("--line", "#ddd");
    const pages = colour("--pages", "#2b6cb0"), bytes = colour("--bytes", "#c05621");
    const fromZero = (u, min, max) => uPlot.rangeNum(0, max > 0 ? max : 1, 0.1, true);
    const axis = (more) => Object.assign({stroke: ink, grid: {stroke: line, width: 1}, ticks: {stroke: line, width: 1}}, more);
    return new uPlot({
      width: box.clientWidth, height: CHART_HEIGHT,
      cursor: {drag: {x: false, y: false}},  // no zoom: the next poll's setData would undo it
      scales: {pages: {range: fromZero}, bytes: {range: fromZero}},
      series: [
        {label: "time", value: (u, t) => t == null ? "–" : fmtTime(t)},
        {label: "pages/s", scale: "pages", stroke: pages, fill: pages + "33", width: 2, points: {show: false},
         value: (u, v) => fmtNum(v)},
        {label: "bytes/s", scale: "bytes", stroke: bytes, width: 1.5, dash: [4, 3], points: {show: false},
         value: (u, v) => v == null ? "–" : fmtBytes(v) + "/s"},
      ],
      axes: [
        axis({space: 80, values: (u, ticks) => ticks.map(fmtTime)}),  // 24-hour clock, as the crawl log's lines
        axis({scale: "pages", label: "pages/s", values: (u, ticks) => ticks.map((v) => fmtNum(v))}),
        axis({scale: "bytes", label: "bytes/s", side: 1, size: 70, grid: {show: false},
              values: (u, ticks) => ticks.map(fmtBytes)}),
      ],
    }, [[], [], []], box);
  }

  // The snapshot's [time, pages/s, bytes/s] points into the chart, and their span and peaks into its caption.
  function showRate(points) {
    chart.setData([points.map((p) => p[0]), points.map((p) => p[1]), points.map((p) => p[2])]);
    if (points.length < 2) { setText("rate-summary", "the chart starts after two seconds of crawling"); return; }
    const span = points[points.length - 1][0] - points[0][0];
    setText("rate-summary", "the last " + fmtDuration(span) + "; peak " + fmtNum(Math.max(...points.map((p) => p[1]))) +
      " pages/s, " + fmtBytes(Math.max(...points.map((p) => p[2]))) + "/s");
  }

  // The chart follows its box's width (the window's, or the grid's when it reflows).
  function followWidth(box) {
    new ResizeObserver(() => {
      if (box.clientWidth && box.clientWidth !== chart.width) chart.setSize({width: box.clientWidth, height: CHART_HEIGHT});
    }).observe(box);
  }

  // --- the hosts table --------------------------------------------------------------------------------------

  function hostsQuery() {
    const p = new URLSearchParams({sort: hostsView.sort, desc: hostsView.desc ? "1" : "0", q: hostsView.q,
      offset: String(hostsView.offset), limit: String(hostsView.limit)});
    return "api/hosts?" + p.toString();
  }

  let hostsSeq = 0;  // answers to an older query than the newest are dropped
  async function loadHosts() {
    const seq = ++hostsSeq;
    const data = await getJSON(hostsQuery());
    if (seq !== hostsSeq) return;
    hostsView.total = data.total || 0;
    const rows = data.rows || [];
    fillRows($("hosts"), rows, (r) => {
      const link = document.createElement("button");
      link.type = "button";
      link.className = "link";
      link.textContent = r.host;
      link.title = "Put " + r.host + " in the host form";
      link.addEventListener("click", () => { $("host-name").value = r.host; $("host-name").focus(); });
      const state = document.createElement("span");
      state.className = "pill";
      state.dataset.state = r.state;
      state.textContent = (r.state || "").replace(/_/g, " ");
      return [link, r.group || "", state, fmtInt(r.fetched), fmtBytes(r.bytes), fmtInt(r.queued),
        fmtInt(r.robots_refused), fmtInt(r.not_modified), fmtInt(r.errors), r.delay == null ? "–" : fmtNum(r.delay, 2) + " s"];
    }, [3, 4, 5, 6, 7, 8, 9]);
    const first = rows.length ? hostsView.offset + 1 : 0;
    setText("hosts-range", fmtInt(first) + "–" + fmtInt(hostsView.offset + rows.length) + " of " + fmtInt(hostsView.total));
    $("hosts-prev").disabled = hostsView.offset === 0;
    $("hosts-next").disabled = hostsView.offset + rows.length >= hostsView.total;
  }

  function setupHosts() {
    for (const th of document.querySelectorAll("#hosts-table th[data-key]")) {
      const b = document.createElement("button");
      b.type = "button";
      b.className = "sort";
      b.textContent = th.textContent;
      th.replaceChildren(b);
      b.addEventListener("click", () => {
        const key = th.dataset.key;
        hostsView.desc = hostsView.sort === key ? !hostsView.desc : !["host", "group", "state"].includes(key);
        hostsView.sort = key;
        hostsView.offset = 0;
        markSort();
        refreshHosts();
      });
    }
    markSort();
    let typing = null;
    $("hosts-q").addEventListener("input", () => {
      clearTimeout(typing);
      typing = setTimeout(() => { hostsView.q = $("hosts-q").value.trim(); hostsView.offset = 0; refreshHosts(); }, 250);
    });
    $("hosts-limit").addEventListener("change", () => {
      hostsView.limit = Number($("hosts-limit").value); hostsView.offset = 0; refreshHosts();
    });
    $("hosts-prev").addEventListener("click", () => {
      hostsView.offset = Math.max(0, hostsView.offset - hostsView.limit); refreshHosts();
    });
    $("hosts-next").addEventListener("click", () => { hostsView.offset += hostsView.limit; refreshHosts(); });
    hostsView.limit = Number($("hosts-limit").value);
  }

  function markSort() {
    for (const th of document.querySelectorAll("#hosts-table th[data-key]")) {
      th.setAttribute("aria-sort", th.dataset.key === hostsView.sort ? (hostsView.desc ? "descending" : "ascending") : "none");
    }
  }

  function refreshHosts() { loadHosts().catch(showProblem); }

  // --- the forms ---------------------------------------------------------------------------------------------

  // The button that submitted a form (its data-action names the action); Enter in a field submits the first one.
  function submitter(event, form) {
    return event.submitter || form.querySelector("button[type=submit]");
  }

  function setupControls() {
    for (const id of ["pause", "resume", "stop"]) {
      const b = $(id);
      b.addEventListener("click", () => {
        if (id === "stop" && !window.confirm("Stop the crawl? In-flight fetches finish, the state is saved, and the crawl exits.")) return;
        run($("crawl-result"), b.dataset.action, {}, b);
      });
    }
    $("checkpoint").addEventListener("click", () => {
      const dir = $("checkpoint-dir").value.trim();
      if (!dir) { showResult("crawl-result", "checkpoint needs a directory", true); $("checkpoint-dir").focus(); return; }
      run($("crawl-result"), "checkpoint", {dir: dir}, $("checkpoint"));
    });

    $("seeds-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const urls = $("seed-urls").value.split(/\s+/).filter(Boolean);
      if (!urls.length) { showResult("seeds-result", "no URL given", true); return; }
      run($("seeds-result"), "seeds", {urls: urls, force: $("seed-force").checked}, submitter(e, e.target));
    });

    $("exclude-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const button = submitter(e, e.target);
      const params = {};
      params[$("exclude-kind").value] = $("exclude-value").value.trim();
      run($("exclude-result"), button.dataset.action, params, button);
    });

    $("host-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const button = submitter(e, e.target);
      const name = button.dataset.action;
      const params = {host: $("host-name").value.trim()};
      if (name === "block" || name === "delay") {
        const seconds = Number($("host-seconds").value);
        if (!isFinite(seconds) || seconds < 0) { showResult("host-result", "seconds must be a number at or above 0", true); return; }
        params.seconds = seconds;
      }
      run($("host-result"), name, params, button);
    });

    $("token-form").addEventListener("submit", (e) => {
      e.preventDefault();
      token = $("token").value.trim();
      sessionStorage.setItem(TOKEN_KEY, token);
      setText("problem", "");
      pollSoon();
      refreshHosts();
    });
  }

  function showResult(id, text, isError) {
    const out = $(id);
    out.classList.toggle("error", !!isError);
    out.classList.toggle("ok", !isError);
    out.textContent = text;
  }

  function showProblem(e) {
    setText("problem", e.message === "Failed to fetch" ? "the crawl does not answer (finished or stopped?)" : e.message);
    $("state").dataset.state = "unknown";
  }

  // --- polling -------------------------------------------------------------------------------------------------

  // A tab in the background asks nothing (the crawl's loop answers every request); it catches up when shown.
  // One chain of polls each: a call while one is under way leaves it to that one.
  let snapshotTimer = null, snapshotBusy = false;
  async function pollSnapshot() {
    clearTimeout(snapshotTimer);
    if (snapshotBusy || document.hidden) return;
    snapshotBusy = true;
    try {
      showSnapshot(await getJSON("api/snapshot"));
      if ($("problem").textContent && $("token-form").hidden) setText("problem", "");
    } catch (e) {
      showProblem(e);
    } finally {
      snapshotBusy = false;
    }
    snapshotTimer = setTimeout(pollSnapshot, SNAPSHOT_EVERY);
  }
  function pollSoon() { clearTimeout(snapshotTimer); snapshotTimer = setTimeout(pollSnapshot, 50); }

  let hostsTimer = null, hostsBusy = false;
  async function pollHosts() {
    clearTimeout(hostsTimer);
    if (hostsBusy || document.hidden) return;
    hostsBusy = true;
    try { await loadHosts(); } catch (e) { showProblem(e); } finally { hostsBusy = false; }
    hostsTimer = setTimeout(pollHosts, HOSTS_EVERY);
  }

  document.addEventListener("visibilitychange", () => { if (!document.hidden) { pollSnapshot(); pollHosts(); } });

  document.addEventListener("DOMContentLoaded", () => {
    if (!token) askToken();
    chart = makeChart($("rate-chart"));
    followWidth($("rate-chart"));
    setupControls();
    setupHosts();
    pollSnapshot();
    pollHosts();
  });
})();
