"""The worker's answer to the queue: one mapping from the service's verdict to HTTP.

Cloud Tasks deletes a task on any 2xx and retries anything else. 503 and 429 also make
it slow the whole queue down (and honour Retry-After), so they are kept for what holds
for every job: 429 when the provider's quota has no room, 503 while the provider refuses
the grader's configuration. A job's own transient failure
answers 500: only that task waits for its retry backoff.
"""

from __future__ import annotations

from flask import Response, jsonify

from shared.http.problems import problem_for
from shared.service_layer.worker import DeliveryResult, Verdict

#: The status each verdict answers with.
STATUS = {
    Verdict.DONE: 200,  # final and announced: the task is deleted
    Verdict.DROPPED: 200,  # can never succeed: acknowledged so the queue drops it
    Verdict.RETRY: 500,  # this job's transient failure: the task is retried after its backoff
    Verdict.LOCKED: 409,  # another attempt holds the job: the queue retries later
    Verdict.THROTTLED: 429,  # no provider quota: the queue backs off, honouring Retry-After
    Verdict.DEFERRED: 200,  # no quota, or grading suspended: a new task carries the job
    # The provider refuses the grader's configuration, which fails every job alike: the
    # whole queue backs off (Retry-After: the next probe) and no job is touched.
    Verdict.SUSPENDED: 503,
}

#: The verdicts answered with the problem that stopped the delivery, and the detail they
#: say instead of the error's own (None: its own). Like every 503, a suspension's is
#: generic: the provider's words are in the worker's log.
_PROBLEMS: dict[Verdict, str | None] = {
    Verdict.LOCKED: None,
    Verdict.SUSPENDED: "grading is suspended until the provider accepts the grader's configuration",
}
#: The verdicts whose reply passes on a Retry-After.
_RETRY_AFTER = frozenset({Verdict.RETRY, Verdict.THROTTLED, Verdict.SUSPENDED})


def reply(job_id: str | None, result: DeliveryResult) -> Response:
    """Render `result` as the HTTP answer the queue acts on."""
    status = STATUS[result.verdict]
    if result.verdict in _PROBLEMS and result.reason is not None:
        response = problem_for(result.reason, status, detail=_PROBLEMS[result.verdict])
    else:
        body: dict[str, object] = {
            "job_id": job_id,
            "status": result.job.status.value if result.job else None,
        }
        if result.verdict is Verdict.DROPPED and result.reason is not None:
            body["dropped"] = result.reason.detail
        response = jsonify(body)
        response.status_code = status
    if result.verdict in _RETRY_AFTER and result.retry_after_s is not None:
        # Passes on the provider's hint (e.g. an LLM API's 429 Retry-After).
        response.headers["Retry-After"] = str(max(1, round(result.retry_after_s)))
    return response
