// A class's progress, polled at the server's Retry-After until every submission is final:
// a progress bar, the mean score so far and the histogram of scores in tenths of the
// maximum, all read from the assignment's counters (one request, whatever the class size).
"use strict";

const $ = (id) => document.getElementById(id);
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

function draw(assignment) {
  const progress = assignment.progress;
  $("title").textContent = assignment.title;
  $("final").textContent = progress.final;
  $("submissions").textContent = progress.submissions;
  $("bar").max = Math.max(1, progress.submissions);
  $("bar").value = progress.final;
  $("mean").textContent = progress.mean_score === null ? "-" : progress.mean_score.toFixed(2);
  $("state").textContent = progress.done ? "graded" : "grading";
  const highest = Math.max(1, ...progress.histogram);
  const bars = progress.histogram.map((count, tenth) => {
    const bar = document.createElement("li");
    bar.dataset.count = String(count);
    bar.style.height = `${(100 * count) / highest}%`;
    bar.title = `${count} scored ${tenth * 10}% or more of ${assignment.max_score}`;
    bar.textContent = count ? String(count) : "";
    return bar;
  });
  $("histogram").replaceChildren(...bars);
  $("labels").replaceChildren(
    ...progress.histogram.map((_, tenth) => {
      const label = document.createElement("span");
      label.textContent = `${tenth * 10}%`;
      return label;
    }),
  );
}

async function follow(assignmentId) {
  for (;;) {
    let response = null;
    try {
      response = await fetch(`api/assignments/${encodeURIComponent(assignmentId)}`);
    } catch (networkError) {
      await sleep(1000);
      continue;
    }
    const seconds = Number(response.headers.get("Retry-After"));
    const wait = Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : 1000;
    if (!response.ok) {
      const problem = await response.json().catch(() => ({}));
      $("error").textContent = problem.detail || "the assignment could not be read";
      // A busy or briefly unavailable service (429, 5xx) is asked again; anything else
      // (not found, not allowed) will not change by asking again.
      if (response.status !== 429 && response.status < 500) return;
      await sleep(wait);
      continue;
    }
    $("error").textContent = "";
    const assignment = await response.json();
    draw(assignment);
    if (assignment.progress.done) return;
    await sleep(wait);
  }
}

const assignmentId = new URLSearchParams(location.search).get("assignment");
if (assignmentId) follow(assignmentId);
else $("error").textContent = "open this page with ?assignment=<id>";
