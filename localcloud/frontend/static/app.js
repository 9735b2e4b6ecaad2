// Reference client of the Gradeq API (through this page's own backend, which holds the
// API key). One Idempotency-Key per submission, made once and sent again on every retry,
// so a lost answer never creates a second job; then poll at Retry-After until final.
"use strict";

const FINAL = ["SUCCEEDED", "FAILED", "CANCELLED"];
const MAX_TRIES = 6;
const $ = (id) => document.getElementById(id);
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

// The submission in flight survives a reload: the same answer (and file) keeps the same
// key, and a file already uploaded for it is not uploaded again.
function submissionFor(answer, file) {
  const fileId = file ? `${file.name}:${file.size}:${file.lastModified}` : "";
  const saved = JSON.parse(sessionStorage.getItem("gradeq.submission") || "null");
  if (saved && saved.answer === answer && saved.fileId === fileId) return saved;
  const fresh = {
    answer, fileId, files: null, key: crypto.randomUUID(), id: `web-${crypto.randomUUID().slice(0, 8)}`,
  };
  sessionStorage.setItem("gradeq.submission", JSON.stringify(fresh));
  return fresh;
}

// A photo or PDF goes straight to storage: this page's server asks for a signed URL bound
// to the file's type and size, and the browser PUTs the bytes to it.
async function upload(submission, file) {
  if (!file || submission.files) return;
  const granted = await fetch("api/uploads", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ content_type: file.type, size: file.size }),
  });
  const grant = await granted.json().catch(() => ({}));
  if (granted.status !== 201) throw new Error(grant.detail || "the file cannot be uploaded");
  const put = await fetch(grant.upload_url, { method: grant.method, headers: grant.headers, body: file });
  if (!put.ok) throw new Error("the file upload was refused; try again");
  submission.files = [{ upload_id: grant.upload_id, name: file.name }];
  sessionStorage.setItem("gradeq.submission", JSON.stringify(submission));
}

function retryAfterMs(response, fallbackMs) {
  const seconds = Number(response.headers.get("Retry-After"));
  return Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : fallbackMs;
}

async function submit(submission) {
  // The server adds the assignment, its rubric and maximum score: the page sends only
  // what a student decides.
  const body = JSON.stringify({
    submission_id: submission.id, answer: submission.answer, files: submission.files || [],
  });
  for (let attempt = 1; ; attempt++) {
    let response = null;
    try {
      response = await fetch("api/submissions", {
        method: "POST",
        headers: { "Content-Type": "application/json", "Idempotency-Key": submission.key },
        body,
      });
    } catch (networkError) {
      response = null; // lost on the way: the job may exist; the same key finds it
    }
    if (response && response.status === 202) return response.json();
    const retryable = !response || response.status === 429 || response.status >= 500;
    if (!retryable || attempt >= MAX_TRIES) {
      const problem = response ? await response.json().catch(() => ({})) : {};
      throw new Error(problem.detail || "the submission could not be sent; try again");
    }
    $("state").textContent = "sending again...";
    await sleep(response ? retryAfterMs(response, 500 * attempt) : 500 * attempt);
  }
}

async function follow(job) {
  while (!FINAL.includes(job.status)) {
    show(job);
    let response = null;
    try {
      response = await fetch(`api/submissions/${encodeURIComponent(job.id)}`);
    } catch (networkError) {
      await sleep(1000);
      continue;
    }
    await sleep(retryAfterMs(response, 1000));
    if (response.ok) job = await response.json();
  }
  return job;
}

function show(job) {
  $("progress").hidden = false;
  $("state").textContent = job.status;
  $("attempt").textContent = job.attempts > 1 ? `(attempt ${job.attempts})` : "";
}

function showResult(job) {
  show(job);
  if (job.status !== "SUCCEEDED") {
    $("error").textContent = job.error ? job.error.message : `the job was ${job.status.toLowerCase()}`;
    return;
  }
  $("result").hidden = false;
  $("score").textContent = `${job.result.score} / ${job.result.max_score}`;
  $("feedback").textContent = job.result.feedback;
  $("criteria").replaceChildren(...job.result.criteria.map((c) => {
    const item = document.createElement("li");
    item.className = c.met ? "met" : "unmet";
    const why = c.comment || (c.matched && c.matched.length ? `found: ${c.matched.join(", ")}` : "");
    item.textContent = `${c.met ? "✓" : "✗"} ${c.criterion}${why ? ` (${why})` : ""}`;
    return item;
  }));
  sessionStorage.removeItem("gradeq.submission"); // done: a new answer is a new submission
}

$("form").addEventListener("submit", async (event) => {
  event.preventDefault();
  $("submit").disabled = true;
  $("error").textContent = "";
  $("result").hidden = true;
  $("progress").hidden = false;
  $("state").textContent = "sending...";
  try {
    const file = $("file").files[0] || null;
    const submission = submissionFor($("answer").value, file);
    if (file) $("state").textContent = "uploading...";
    await upload(submission, file);
    const job = await submit(submission);
    showResult(await follow(job));
  } catch (error) {
    $("error").textContent = String(error.message || error);
  } finally {
    $("submit").disabled = false;
  }
});
