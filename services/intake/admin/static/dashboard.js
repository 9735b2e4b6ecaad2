// Gradeq operator dashboard: reads /admin/v1 with the operator key typed in the page.
// No build step and no third-party code: the chart is drawn as plain SVG.
"use strict";

const API = new URL("v1/", document.baseURI.replace(/\/admin\/?.*$/, "/admin/"));
const STATUSES = ["PENDING", "RUNNING", "RETRYING", "SUCCEEDED", "FAILED", "CANCELLED"];
const REFRESH_MS = 5000;
// The operator key stays in this variable only: never in storage, so a reload asks again.
let key = "";
// el and call come from the page kit (../page-kit/static/kit.js, loaded first); call
// reads the key from this script at every request.
const { el } = pageKit;
const call = pageKit.caller(API, () => key);
let timer = null;
let shownJob = null;
let shownAssignment = null;

function seconds(ms) {
  return ms === null || ms === undefined ? "-" : `${(ms / 1000).toFixed(1)} s`;
}

function showCounts(health) {
  const tiles = STATUSES.map((status) =>
    el("div", { class: "tile", "data-status": status },
      el("span", { class: "label" }, status),
      el("span", { "data-count": "" }, String(health.counts[status]))));
  document.getElementById("counts").replaceChildren(...tiles);
  const age = health.oldest_waiting_age_s.PENDING;
  document.getElementById("oldest-pending").textContent = age === null ? "none" : `${Math.round(age)} s`;
  document.getElementById("failure-rate").textContent = `${(health.failure_rate * 100).toFixed(1)} %`;
  document.getElementById("throughput").textContent = `${health.throughput_per_minute.toFixed(2)} /min`;
}

function drawChart(series) {
  const width = 900, height = 240, pad = 40;
  const lines = [
    ["queue_wait_ms", "p50", "#c2410c", ""], ["queue_wait_ms", "p95", "#c2410c", "6 4"],
    ["processing_ms", "p50", "#1f5fbf", ""], ["processing_ms", "p95", "#1f5fbf", "6 4"],
  ];
  const values = series.flatMap((b) => lines.map(([t, p]) => b[t][p]).filter((v) => v !== null));
  const top = Math.max(1000, ...values);
  const x = (i) => pad + (i * (width - 2 * pad)) / Math.max(1, series.length - 1);
  const y = (v) => height - pad - (v / top) * (height - 2 * pad);
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const add = (tag, attrs, text) => {
    const node = document.createElementNS(ns, tag);
    for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
    if (text !== undefined) node.textContent = text;
    svg.append(node);
  };
  add("line", { x1: pad, y1: height - pad, x2: width - pad, y2: height - pad, stroke: "#999" });
  add("line", { x1: pad, y1: pad, x2: pad, y2: height - pad, stroke: "#999" });
  add("text", { x: 4, y: pad, "font-size": 11 }, seconds(top));
  add("text", { x: 4, y: height - pad, "font-size": 11 }, "0 s");
  series.forEach((bucket, i) => {
    if (i % 3 === 0) {
      const label = new Date(bucket.start).toISOString().slice(11, 16);
      add("text", { x: x(i) - 14, y: height - pad + 16, "font-size": 11 }, label);
    }
  });
  for (const [timing, p, colour, dash] of lines) {
    const points = series.map((b, i) => [i, b[timing][p]]).filter(([, v]) => v !== null);
    if (points.length === 0) continue;
    const d = points.map(([i, v], n) => `${n ? "L" : "M"}${x(i).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    add("path", { d, fill: "none", stroke: colour, "stroke-width": 2, "stroke-dasharray": dash,
      "data-series": `${timing}-${p}` });
    for (const [i, v] of points) add("circle", { cx: x(i), cy: y(v), r: 3, fill: colour });
  }
  document.getElementById("chart").replaceChildren(svg);
}

const SPEND_COLOURS = ["#1f5fbf", "#c2410c", "#15803d", "#7e22ce", "#b45309", "#0e7490"];

function dollars(micros) {
  return micros === null || micros === undefined ? "-" : `$${(micros / 1e6).toFixed(2)}`;
}

// Each client's spend of the month as a cumulative line over its days.
function drawSpend(spend) {
  const width = 900, height = 240, pad = 48;
  const [year, month] = spend.month.split("-").map(Number);
  const days = new Date(Date.UTC(year, month, 0)).getUTCDate();
  const clients = Object.keys(spend.by_client).sort();
  const top = Math.max(1, ...clients.map((c) => spend.by_client[c].total_micro_usd));
  const x = (day) => pad + ((day - 1) * (width - 2 * pad)) / Math.max(1, days - 1);
  const y = (v) => height - pad - (v / top) * (height - 2 * pad);
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const add = (tag, attrs, text) => {
    const node = document.createElementNS(ns, tag);
    for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
    if (text !== undefined) node.textContent = text;
    svg.append(node);
  };
  add("line", { x1: pad, y1: height - pad, x2: width - pad, y2: height - pad, stroke: "#999" });
  add("line", { x1: pad, y1: pad, x2: pad, y2: height - pad, stroke: "#999" });
  add("text", { x: 4, y: pad, "font-size": 11 }, dollars(top));
  add("text", { x: 4, y: height - pad, "font-size": 11 }, "$0");
  for (const day of [1, 8, 15, 22, days]) {
    add("text", { x: x(day) - 8, y: height - pad + 16, "font-size": 11 }, String(day));
  }
  const legend = [];
  clients.forEach((client, n) => {
    const shade = n % SPEND_COLOURS.length;
    const colour = SPEND_COLOURS[shade];
    let total = 0;
    const points = Object.entries(spend.by_client[client].days).sort().map(([day, micros]) => {
      total += micros;
      return [Number(day.slice(8, 10)), total];
    });
    // Each line starts from nothing at the month's start.
    const d = [[1, 0], ...points].map(([day, v], i) => `${i ? "L" : "M"}${x(day).toFixed(1)},${y(v).toFixed(1)}`).join(" ");
    add("path", { d, fill: "none", stroke: colour, "stroke-width": 2, "data-client": client });
    for (const [day, v] of points) add("circle", { cx: x(day), cy: y(v), r: 3, fill: colour });
    // A class per shade: the page's policy allows no inline style.
    legend.push(el("span", { class: `key shade-${shade}` }), ` ${client} ${dollars(total)}`);
  });
  document.getElementById("spend-chart").replaceChildren(svg);
  document.getElementById("spend-legend").replaceChildren(...legend);
}

function showBudgets(budgets) {
  const rows = budgets.budgets.map((b) =>
    el("tr", { class: b.exhausted ? "exhausted" : b.past_soft ? "past-soft" : "" },
      el("td", {}, `${b.scope} ${b.key}`),
      el("td", {}, dollars(b.spent_micro_usd)),
      el("td", {}, dollars(b.soft_micro_usd)),
      el("td", {}, dollars(b.hard_micro_usd)),
      el("td", {}, b.exhausted ? "spent: work held" : b.past_soft ? "past soft limit" : "ok")));
  document.querySelector("#budgets tbody").replaceChildren(...rows);
}

function showFailed(page) {
  const rows = page.jobs.map((job) => {
    const open = el("button", { class: "link", type: "button" }, job.id);
    open.addEventListener("click", () => showJob(job.id));
    const replay = el("button", { class: "replay", type: "button" }, "Replay");
    replay.addEventListener("click", () => replayJob(job, replay));
    const error = job.last_error ? `${job.last_error.type}: ${job.last_error.message}` : "";
    return el("tr", { "data-job-id": job.id },
      el("td", { class: "id" }, open), el("td", {}, job.client_id),
      el("td", {}, String(job.attempts)), el("td", { class: "error" }, error),
      el("td", {}, job.completed_at || ""), el("td", {}, replay));
  });
  document.querySelector("#failed tbody").replaceChildren(...rows);
  document.getElementById("no-failed").hidden = rows.length > 0;
}

function showDetail(job) {
  shownJob = job.id;
  document.getElementById("detail").hidden = false;
  document.getElementById("detail-id").textContent = job.id;
  document.getElementById("detail-status").textContent = job.status;
  document.getElementById("detail-generation").textContent = String(job.generation);
  document.getElementById("detail-attempts").textContent = String(job.attempts);
  document.getElementById("detail-lane").textContent = job.lane || "default";
  const rows = job.history.map((a) => el("tr", {},
    el("td", {}, String(a.attempt)), el("td", {}, String(a.generation)),
    el("td", {}, a.started_at), el("td", {}, a.ended_at || "running"),
    el("td", { class: "outcome" }, a.outcome),
    el("td", {}, a.error ? `${a.error.type}: ${a.error.message}` : "")));
  document.querySelector("#history tbody").replaceChildren(...rows);
  const replays = job.replays.map((r) =>
    el("li", {}, `${r.at} by ${r.by}: generation ${r.generation}`));
  document.getElementById("replays").replaceChildren(...replays);
}

async function showJob(id) {
  showDetail(await call(`jobs/${encodeURIComponent(id)}`));
}

async function replayJob(job, button) {
  button.disabled = true;
  try {
    const answer = await call(`jobs/${encodeURIComponent(job.id)}/replay`, {
      method: "POST", body: JSON.stringify({ generation: job.generation }),
    });
    showDetail(answer.job);
    await refresh();
  } catch (error) {
    say(String(error.message || error));
    button.disabled = false;
  }
}

function showLanes(lanes) {
  const rows = lanes.map((lane) => {
    const toggle = el("button", { type: "button", class: "lane-toggle" },
      lane.paused ? "Resume" : "Pause");
    toggle.addEventListener("click", () =>
      laneAction(lane.lane, lane.paused ? "resume" : "pause", toggle));
    const purge = el("button", { type: "button", class: "lane-purge" }, "Purge");
    purge.addEventListener("click", () => {
      if (window.confirm(`Cancel every job of lane ${lane.lane} not yet final?`)) {
        laneAction(lane.lane, "purge", purge);
      }
    });
    const age = lane.oldest_age_s === null ? "-" : `${Math.round(lane.oldest_age_s)} s`;
    const objective = lane.oldest_age_objective_s === null ? "-" : `${lane.oldest_age_objective_s} s`;
    return el("tr", { "data-lane": lane.lane, class: lane.objective_breached ? "breached" : "" },
      el("td", {}, lane.lane), el("td", {}, lane.paused ? "paused" : "running"),
      el("td", {}, String(lane.backlog)), el("td", {}, age), el("td", {}, objective),
      el("td", {}, seconds(lane.queue_wait_ms.p50)), el("td", {}, seconds(lane.queue_wait_ms.p99)),
      el("td", {}, toggle, purge));
  });
  document.querySelector("#lanes tbody").replaceChildren(...rows);
}

function pairs(counts) {
  return Object.entries(counts).sort().map(([name, n]) => `${name} ${n}`).join(", ") || "-";
}

function showQuota(pools) {
  const rows = pools.map((pool) => {
    if (pool.mode === "instance") {
      return el("tr", {}, el("td", {}, pool.model), el("td", {}, "instance"),
        el("td", {}, `${pool.share_rpm}/min per instance (x${pool.max_instances})`),
        el("td", {}, "-"), el("td", {}, "-"), el("td", {}, "-"), el("td", {}, "-"));
    }
    const tokens = pool.limit_tpm ? `, ${pool.limit_tpm} tok` : "";
    const epoch = pool.adaptive && pool.adaptive.last_epoch && pool.adaptive.last_epoch.decision
      ? `${pool.adaptive.last_epoch.decision}: ${pool.adaptive.last_epoch.throttled}/`
        + `${pool.adaptive.last_epoch.answered} 429` : "-";
    return el("tr", { "data-model": pool.model }, el("td", {}, pool.model),
      el("td", {}, pool.mode), el("td", {}, `${pool.limit_rpm} req${tokens} / ${pool.window_s} s`),
      el("td", {}, `${pool.requests_in_window} req, ${pool.tokens_in_window} tok`),
      el("td", {}, pairs(pool.requests_by_lane)), el("td", {}, pairs(pool.waiting_by_lane)),
      el("td", {}, epoch));
  });
  document.querySelector("#quota tbody").replaceChildren(...rows);
}

function showGradebooks(body) {
  const rows = body.gradebooks.map((school) => el("tr",
    { "data-school": school.school, class: school.state === "outage" ? "outage" : "" },
    el("td", {}, school.school), el("td", {}, school.state), el("td", {}, school.since || ""),
    el("td", {}, String(school.failures)), el("td", { class: "error" }, school.last_error || "")));
  document.querySelector("#gradebooks tbody").replaceChildren(...rows);
  document.getElementById("no-gradebooks").hidden = rows.length > 0;
  const refused = body.rejected.map((mark) => el("tr", {},
    el("td", {}, mark.school), el("td", {}, mark.assignment_id), el("td", {}, mark.student_id),
    el("td", {}, String(mark.version)), el("td", { class: "error" }, mark.detail || "")));
  document.querySelector("#gradebook-rejected tbody").replaceChildren(...refused);
  document.getElementById("gradebook-rejected").hidden = refused.length === 0;
}

async function laneAction(lane, action, button) {
  button.disabled = true;
  try {
    await call(`lanes/${encodeURIComponent(lane)}/${action}`, { method: "POST" });
    await refresh();
  } catch (error) {
    say(String(error.message || error));
    button.disabled = false;
  }
}

// The score histogram of an assignment's round: ten bars, one per tenth of the maximum.
function drawHistogram(histogram) {
  const width = 600, height = 200, pad = 24;
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const highest = Math.max(1, ...histogram);
  const step = (width - 2 * pad) / histogram.length;
  histogram.forEach((count, tenth) => {
    const barHeight = ((height - 2 * pad) * count) / highest;
    const bar = document.createElementNS(ns, "rect");
    const attrs = {
      x: pad + tenth * step + 2, y: height - pad - barHeight, width: step - 4, height: barHeight,
      fill: "#1f5fbf", "data-tenth": tenth, "data-count": count,
    };
    for (const [name, value] of Object.entries(attrs)) bar.setAttribute(name, String(value));
    const label = document.createElementNS(ns, "text");
    label.setAttribute("x", String(pad + tenth * step + step / 2));
    label.setAttribute("y", String(height - 6));
    label.setAttribute("text-anchor", "middle");
    label.textContent = `${tenth * 10}%`;
    const title = document.createElementNS(ns, "title");
    title.textContent = `${count} scored ${tenth * 10}% or more`;
    bar.append(title);
    svg.append(bar, label);
  });
  document.getElementById("histogram").replaceChildren(svg);
}

async function showAssignment(id) {
  const assignment = await call(`assignments/${encodeURIComponent(id)}`);
  const progress = assignment.progress || { round: 0, final: 0, submissions: 0, mean_score: null, histogram: [] };
  const text = {
    "assignment-title": assignment.title, "assignment-client": assignment.client_id,
    "assignment-round": String(progress.round ?? 0), "assignment-final": String(progress.final),
    "assignment-submissions": String(progress.submissions),
    "assignment-mean": progress.mean_score === null ? "-" : progress.mean_score.toFixed(2),
    "assignment-max": String(assignment.max_score),
  };
  for (const [id, value] of Object.entries(text)) document.getElementById(id).textContent = value;
  drawHistogram(progress.histogram);
  document.getElementById("assignment").hidden = false;
}

function say(text) {
  document.getElementById("message").textContent = text;
}

async function refresh() {
  const [health, failed, lanes, quota, gradebooks] = await Promise.all([
    call("queue-health"), call("dead-letters?limit=50"), call("lanes"), call("quota"),
    call("gradebooks")]);
  showCounts(health);
  showLanes(lanes.lanes);
  showQuota(quota.pools);
  showGradebooks(gradebooks);
  drawChart(health.series);
  showFailed(failed);
  // Budgets may not be served (no budget store): the rest of the board still refreshes.
  const [spend, budgets] = await Promise.all(
    [call("spend").catch(() => null), call("budgets").catch(() => null)]);
  if (spend) drawSpend(spend);
  if (budgets) showBudgets(budgets);
  if (shownJob) await showJob(shownJob);
  if (shownAssignment) await showAssignment(shownAssignment);
}

async function connect() {
  try {
    await refresh();
    document.getElementById("key").value = "";
    say("");
    document.getElementById("board").hidden = false;
    clearInterval(timer);
    timer = setInterval(() => refresh().catch((e) => say(String(e.message || e))), REFRESH_MS);
  } catch (error) {
    say(String(error.message || error));
  }
}

document.getElementById("login").addEventListener("submit", (event) => {
  event.preventDefault();
  key = document.getElementById("key").value;
  connect();
});

document.getElementById("assignment-form").addEventListener("submit", (event) => {
  event.preventDefault();
  shownAssignment = document.getElementById("assignment-id").value.trim();
  showAssignment(shownAssignment).catch((error) => say(String(error.message || error)));
});
