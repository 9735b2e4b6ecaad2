// Gradeq review page: reads and writes /v1/reviews with the reviewer key typed in the page.
// No build step and no third-party code; the answer is shown as text, never as markup.
"use strict";

const API = new URL("v1/", document.baseURI.replace(/\/review\/?.*$/, "/"));
// The reviewer key stays in this variable only: never in storage, so a reload asks again.
let key = "";
// el and call come from the page kit (../page-kit/static/kit.js, loaded first); call
// reads the key from this script at every request.
const { el } = pageKit;
const call = pageKit.caller(API, () => key);
let shown = null;
// Opened from an LMS (an LTI launch): only this assignment's held grades.
let queueFilter = "";
// The object URLs of the shown answer's files (revoked when another grade is shown).
let fileUrls = [];

// One of the answer's files, fetched with the reviewer's key (never a public URL), as an
// object URL the page alone can read.
async function fileUrl(jobId, index) {
  const response = await fetch(
    new URL(`reviews/${encodeURIComponent(jobId)}/files/${index}`, API),
    { headers: { Authorization: `Bearer ${key}` } });
  if (!response.ok) throw new Error(`file ${index}: ${response.status}`);
  const url = URL.createObjectURL(await response.blob());
  fileUrls.push(url);
  return url;
}

const IMAGES = new Set(["image/png", "image/jpeg", "image/webp"]);

// Photos are shown; any other file (a PDF, source) is offered as a download.
async function showFiles(grade) {
  for (const url of fileUrls) URL.revokeObjectURL(url);
  fileUrls = [];
  const nodes = [];
  for (const file of grade.attachments) {
    const url = await fileUrl(grade.job_id, file.index);
    if (IMAGES.has(file.content_type)) {
      nodes.push(el("figure", {},
        el("img", { src: url, alt: file.name, class: "answer-file", "data-index": String(file.index) }),
        el("figcaption", {}, file.name)));
    } else {
      nodes.push(el("p", {}, el("a", { href: url, download: file.name }, `${file.name} (${file.content_type})`)));
    }
  }
  document.getElementById("files").replaceChildren(...nodes);
}

// An open regrade request is answered as such: keep (accept) or change (override).
function openRequest(grade) {
  return grade.regrade_request && grade.regrade_request.answer === null;
}

async function loadQueue() {
  const page = await call(`reviews?limit=100${queueFilter}`);
  const rows = page.reviews.map((r) => {
    const row = el("tr", { "data-job-id": r.job_id },
      el("td", {}, r.submission_id), el("td", {}, r.held_at), el("td", {}, r.reasons.join(", ")),
      el("td", {}, r.model_score === null ? "-" : `${r.model_score} / ${r.max_score}`),
      el("td", {}, r.release));
    row.addEventListener("click", () => show(r.job_id).catch(report));
    return row;
  });
  document.querySelector("#queue tbody").replaceChildren(...rows);
}

async function show(jobId) {
  const grade = await call(`reviews/${encodeURIComponent(jobId)}`);
  shown = grade;
  document.getElementById("submission").textContent = grade.submission_id;
  document.getElementById("answer").textContent = grade.answer;
  const request = document.getElementById("request");
  request.hidden = !openRequest(grade);
  request.textContent = openRequest(grade) ? `The student asks for a regrade: ${grade.regrade_request.reason}` : "";
  await showFiles(grade);
  document.getElementById("rubric").replaceChildren(...grade.rubric.map((c) => el("li", {}, c)));
  const model = grade.model_result;
  document.getElementById("model-score").textContent = `${model.score} / ${model.max_score}`;
  document.getElementById("confidence").textContent =
    model.confidence === null || model.confidence === undefined ? "-" : String(model.confidence);
  document.getElementById("criteria").replaceChildren(...model.criteria.map((c) =>
    el("li", {}, `${c.criterion || c.id}: ${c.verdict || (c.met ? "met" : "not met")}`)));
  document.getElementById("feedback").textContent = model.feedback;
  document.getElementById("score").value = String(grade.result.score);
  document.getElementById("score").max = String(grade.max_score);
  document.getElementById("new-feedback").value = "";
  document.getElementById("reason").value = "";
  document.getElementById("outcome").textContent = "";
  document.getElementById("grade").hidden = false;
}

async function decide(body) {
  let path = `reviews/${encodeURIComponent(shown.job_id)}`;
  if (openRequest(shown)) {
    const { decision, ...rest } = body;
    body = { answer: decision === "accept" ? "keep" : "change", ...rest };
    path += "/request";
  }
  const done = await call(path, { method: "POST", body: JSON.stringify(body) });
  document.getElementById("outcome").textContent =
    `Recorded: ${done.reviews.at(-1).decision}, the student sees ${done.result.score} / ${done.max_score}`;
  await loadQueue();
}

function figure(value, digits = 2) {
  return value === null || value === undefined ? "-" : value.toFixed(digits);
}

async function loadAgreement() {
  const assignment = document.getElementById("agreement-assignment").value.trim();
  const query = assignment ? `?assignment_id=${encodeURIComponent(assignment)}` : "";
  // "./": a bare "reviews:..." would read as a URL scheme.
  const report = await call(`./reviews:agreement${query}`);
  document.getElementById("agreement-figures").textContent =
    `${report.reviewed} reviewed: exact match ${figure(report.exact_match_rate)}, ` +
    `mean absolute difference ${figure(report.mean_absolute_difference)}, ` +
    `quadratic weighted kappa ${figure(report.quadratic_weighted_kappa, 3)}`;
  drawAgreement(report.pairs);
}

// Model score (x) against teacher score (y); the diagonal is perfect agreement.
function drawAgreement(pairs) {
  const size = 320, pad = 36;
  const top = Math.max(1, ...pairs.flat());
  const at = (v) => pad + (v / top) * (size - 2 * pad);
  const ns = "http://www.w3.org/2000/svg";
  const svg = document.createElementNS(ns, "svg");
  svg.setAttribute("viewBox", `0 0 ${size} ${size}`);
  svg.setAttribute("width", String(size));
  const line = (x1, y1, x2, y2, stroke) => {
    const node = document.createElementNS(ns, "line");
    for (const [k, v] of Object.entries({ x1, y1, x2, y2, stroke })) node.setAttribute(k, String(v));
    svg.append(node);
  };
  line(pad, size - pad, size - pad, size - pad, "#888");
  line(pad, size - pad, pad, pad, "#888");
  line(pad, size - pad, size - pad, pad, "#ccc");
  for (const [model, teacher] of pairs) {
    const dot = document.createElementNS(ns, "circle");
    dot.setAttribute("cx", String(at(model)));
    dot.setAttribute("cy", String(size - at(teacher)));
    dot.setAttribute("r", "5");
    dot.setAttribute("class", "pair");
    dot.setAttribute("data-model", String(model));
    dot.setAttribute("data-teacher", String(teacher));
    svg.append(dot);
  }
  const label = (text, x, y) => {
    const node = document.createElementNS(ns, "text");
    node.setAttribute("x", String(x));
    node.setAttribute("y", String(y));
    node.textContent = text;
    svg.append(node);
  };
  label("model", size / 2 - 20, size - 8);
  label("teacher", 2, pad - 10);
  document.getElementById("agreement-plot").replaceChildren(svg);
}

document.getElementById("agreement-form").addEventListener("submit", (event) => {
  event.preventDefault();
  loadAgreement().catch(report);
});

function report(error) {
  document.getElementById("message").textContent = error.message;
}

document.getElementById("login").addEventListener("submit", (event) => {
  event.preventDefault();
  key = document.getElementById("key").value;
  document.getElementById("message").textContent = "";
  loadQueue().then(() => { document.getElementById("board").hidden = false; }).catch(report);
});

document.getElementById("accept").addEventListener("click", () => {
  decide({ decision: "accept", reason: document.getElementById("reason").value }).catch(report);
});

document.getElementById("decide").addEventListener("submit", (event) => {
  event.preventDefault();
  const body = {
    decision: "override",
    score: Number(document.getElementById("score").value),
    reason: document.getElementById("reason").value,
  };
  const feedback = document.getElementById("new-feedback").value.trim();
  if (feedback) body.feedback = feedback;
  decide(body).catch(report);
});

// An LTI launch from the LMS brings a session token in the URL fragment, which no server
// sees: it is kept in this script like a typed key and leaves the address bar at once.
const launched = new URLSearchParams(location.hash.slice(1)).get("lti_session");
if (launched) {
  history.replaceState(null, "", location.pathname + location.search);
  key = launched;
  const assignment = new URLSearchParams(location.search).get("assignment_id");
  if (assignment) {
    queueFilter = `&assignment_id=${encodeURIComponent(assignment)}`;
    document.getElementById("agreement-assignment").value = assignment;
  }
  document.getElementById("login").hidden = true;
  loadQueue().then(() => { document.getElementById("board").hidden = false; }).catch(report);
}
