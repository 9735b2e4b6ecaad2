"""What a job's stored record keeps and what an old record reads as: the request's
schedule, lane, prompt version and posting survive the round trip; a record from before
provider batches and manual posting reads as "not returned by a batch" and "its post
announced"."""

from __future__ import annotations

from shared.domain.job import GradingRequest, Job
from tests.unit.test_job_transitions import MINIMAL_RECORD


def test_a_requests_schedule_lane_and_prompt_version_survive_its_record() -> None:
    request = GradingRequest(
        submission_id="s",
        answer="a",
        rubric="one; two",
        not_before="2026-03-02T08:00:00+00:00",
        lane="exams",
        rubric_version=3,
        prompt_version="grading-v1",
        assignment_round=2,
        practice=True,
        post_manually=True,
    )
    read = GradingRequest.from_dict(request.to_dict())
    assert (read.not_before, read.lane, read.prompt_version) == (
        "2026-03-02T08:00:00+00:00",
        "exams",
        "grading-v1",
    )
    assert (read.practice, read.post_manually) == (True, True)
    assert read == request


def test_a_record_from_before_provider_batches_was_not_returned_by_one() -> None:
    assert Job.from_record(dict(MINIMAL_RECORD)).batch_returned is False
    returned = Job.from_record({**MINIMAL_RECORD, "batch_returned": True})
    assert returned.batch_returned is True


def test_a_record_from_before_manual_posting_has_its_post_announced() -> None:
    # Nothing was held back before posting existed: there is no post left to announce.
    assert Job.from_record(dict(MINIMAL_RECORD)).post_announced is True
    pending = Job.from_record({**MINIMAL_RECORD, "post_announced": False})
    assert pending.post_announced is False
