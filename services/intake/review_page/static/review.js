// Gradeq review page: reads and writes /v1/reviews with the reviewer key typed in the page.
// No build step and no third-party code; the answer is shown as text, never as markup.
"use strict";

const API = new URL("v1/", document.baseURI.replace(/\/review\/?.*$/, "/"));
// The reviewer key stays in this variable only: never in storage, so a reload asks again.
let key = "";
let shown = null;

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
  for (const child of children) node.append(child);
  return node;
}

async function call(path, options = {}) {
  const response = await fetch(new URL(path, API), {
    ...options,
    headers: { Authorization: `Bearer ${key}`, "Content-Type": "application/json" },
  });
  const body = await response.json();
  if (!response.ok) {
    throw new Error(`${(body.type || "").split("/").pop() || response.status}: ${body.detail || ""}`);
  }
  return body;
}

async function loadQueue() {
  const page = await call("reviews?limit=100");
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
  const done = await call(`reviews/${encodeURIComponent(shown.job_id)}`, {
    method: "POST", body: JSON.stringify(body),
  });
  document.getElementById("outcome").textContent =
    `Recorded: ${done.reviews.at(-1).decision}, the student sees ${done.result.score} / ${done.max_score}`;
  await loadQueue();
}

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
