// Gradeq grade page, opened from the LMS: the LTI launch's session token arrives in the
// URL fragment, which no server sees; it stays in this script only and leaves the
// address bar at once. No build step and no third-party code; text, never markup.
"use strict";

const API = new URL("/v1/", document.baseURI);
const session = new URLSearchParams(location.hash.slice(1)).get("lti_session") || "";
history.replaceState(null, "", location.pathname + location.search);
const assignment = new URLSearchParams(location.search).get("assignment_id") || "";
const { el } = pageKit;
const call = pageKit.caller(API, () => session);

async function load() {
  if (!session) throw new Error("Open this page from your course in the LMS.");
  const jobs = [];
  let cursor = "";
  do {
    const query = cursor ? `&cursor=${encodeURIComponent(cursor)}` : "";
    const page = await call(`grading-jobs?limit=100${query}`);
    jobs.push(...page.jobs.filter((j) => j.assignment_id === assignment));
    cursor = page.next_cursor || "";
  } while (cursor);
  const rows = jobs.map((j) => el("tr", { "data-job-id": j.id },
    el("td", {}, j.submission_id), el("td", {}, j.status),
    el("td", {}, j.result ? `${j.result.score} / ${j.result.max_score}` : "-"),
    el("td", {}, j.result ? j.result.feedback : "")));
  document.querySelector("#grades tbody").replaceChildren(...rows);
  if (!rows.length) document.getElementById("message").textContent = "No grade yet.";
}

load().catch((error) => { document.getElementById("message").textContent = error.message; });
