"""Regrade a whole assignment under a new rubric or prompt version, and report the change.

A regrade opens the assignment's next grading round and moves every final submission of
the round before into it as a new generation of its job (`Job.regrade`: the previous
result kept, a fresh attempt budget and event id). The round is not graded before all it
expects are counted in it; a regrade cut off half way is completed by asking again.

A moved job is not final again, so it is admitted under the same ceilings as a new job
(`JobStore.reopen`, checked in the write that counts it): a regrade moves what fits, and
the rest waits. The worker resumes it each time the jobs moved so far are all graded
(`resume`, from the round's completion check), and asking again resumes it too.

A regrade never discards a teacher's grade: the job keeps its reviews, the teacher's grade
stays final, and a new model grade far from it goes back to the teacher's queue flagged
(shared.domain.review.after_regrade). The report compares, per student, the final grade
(what the student sees) and the model's grade before and after.
"""

from __future__ import annotations

import dataclasses
import logging
import statistics
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime

from shared.domain.admission import AdmissionLimits
from shared.domain.agreement import quadratic_weighted_kappa
from shared.domain.assignment import Assignment, Rubric
from shared.domain.authorization import Action, Principal, as_principal
from shared.domain.errors import (
    AssignmentBusy,
    BacklogFull,
    GradeqError,
    JobLocked,
    TooManyActiveJobs,
    ValidationFailed,
)
from shared.domain.ids import task_name_for
from shared.domain.job import GradingRequest, Job
from shared.domain.status import JobStatus
from shared.ports import AssignmentStore, Clock, JobStore, TaskQueue, TaskSpec
from shared.service_layer.assignments import AssignmentService

log = logging.getLogger(__name__)

_REGRADABLE = (JobStatus.SUCCEEDED, JobStatus.FAILED)
#: How long a regrade waits for a just-finished job's event to be published (it is in
#: flight when the round has only just become done).
ANNOUNCE_WAITS_S = (0.05, 0.2, 0.5)


@dataclass(frozen=True)
class ScoreChange:
    """One submission's grade before and after the regrade (None: no score).

    `old` and `new` are final grades, what the student sees (the teacher's where a teacher
    decided); `old_model` and `new_model` the model's grades of the two generations.
    """

    submission_id: str
    job_id: str
    old: float | None
    new: float | None
    status: JobStatus
    student_id: str | None = None
    old_model: float | None = None
    new_model: float | None = None
    #: Whose grade `new` is: "teacher" or "model".
    source: str = "model"
    #: The regrade put the grade back in the teacher's queue (moved past the threshold,
    #: or reopened).
    flagged: bool = False


@dataclass(frozen=True)
class RegradeReport:
    """How the regrade moved the grades of the submissions graded both times: the mean
    shift and the count past `threshold` of the final grades, the model's mean shift, and
    the kappa between the two model gradings."""

    round: int
    compared: int
    mean_shift: float | None
    changed: int
    threshold: float
    kappa: float | None
    changes: list[ScoreChange]
    model_mean_shift: float | None = None
    #: Grades back in the teacher's queue after this regrade.
    flagged: int = 0
    reopen_reviewed: bool = False


class Regrader:
    """Starts (or resumes) an assignment's regrade, and reports on the last one."""

    def __init__(
        self,
        service: AssignmentService,
        assignments: AssignmentStore,
        jobs: JobStore,
        queue: TaskQueue,
        clock: Clock,
        check_round: Callable[[str, str, int], bool] | None = None,
        parallelism: int = 1,
        lane: str | None = None,
        limits: AdmissionLimits | None = None,
    ) -> None:
        self._limits = limits
        # Where regrades are graded: the lowest-priority lane, so a regrade of a whole
        # class never delays live grading (None: each job's own lane).
        self._lane = lane
        self._service = service
        self._assignments = assignments
        self._jobs = jobs
        self._queue = queue
        self._clock = clock
        self._check_round = check_round
        self._parallelism = parallelism

    def regrade(
        self,
        caller: Principal | str,
        assignment_id: str,
        rubric: Rubric | None = None,
        prompt_version: str | None = None,
        reopen_reviewed: bool = False,
    ) -> Assignment:
        """Open the next round and move every final submission into it (or finish moving).

        `reopen_reviewed`: the teacher's choice, recorded on the round, to put every grade
        a teacher reviewed back in the queue once its new model grade is in.
        """
        principal = as_principal(caller)
        assignment = self._service.get(principal, assignment_id, Action.ASSIGNMENT_REGRADE)
        tally = self._assignments.tally(assignment.id, assignment.round)
        resuming = assignment.round > 0 and tally.total < assignment.expected
        if not resuming:
            if sum(tally.counts.get(s, 0) for s in _REGRADABLE) == 0 and tally.final == tally.total:
                raise ValidationFailed(
                    "the assignment has no graded submission to regrade",
                    errors=[{"field": "", "message": "nothing to regrade"}],
                )
            if not tally.done:
                raise AssignmentBusy(
                    f"round {assignment.round} has {tally.total - tally.final} submissions"
                    " not yet final; regrade once it is graded"
                )
            expected = sum(tally.counts.get(s, 0) for s in _REGRADABLE)
            now = self._clock.now()
            current_round = assignment.round

            def start(a: Assignment) -> Assignment:
                if a.round != current_round:
                    raise AssignmentBusy("another regrade of this assignment started first")
                revised = a.revise(rubric, now) if rubric is not None else a
                return revised.start_round(now, expected, prompt_version, reopen_reviewed)

            assignment = self._assignments.update(assignment.id, start)
        moved, full = self._move(assignment)
        log.info(
            "regrade started",
            extra={"assignment_id": assignment.id, "round": assignment.round, "moved": moved},
        )
        assignment = self._mark_waiting(assignment, moved)
        if full is not None and moved == 0:
            raise full  # nothing fits now (429 or 503): asking again resumes the round
        if self._check_round is not None:
            # Every job may have been graded already while others were still moving.
            self._check_round(assignment.id, assignment.client_id, assignment.round)
        return assignment

    def resume(self, assignment_id: str) -> int:
        """Move what now fits of a regrade still waiting for room; how many are in its round.

        Nothing to do (0) unless the assignment's current round is a regrade's that still
        expects submissions not yet moved.
        """
        assignment = self._assignments.get(assignment_id)
        if assignment is None or assignment.round == 0:
            return 0
        if self._assignments.tally(assignment.id, assignment.round).total >= assignment.expected:
            self._mark_waiting(assignment, assignment.expected)
            return 0
        moved, _ = self._move(assignment)
        log.info(
            "regrade resumed",
            extra={"assignment_id": assignment.id, "round": assignment.round, "moved": moved},
        )
        self._mark_waiting(assignment, moved)
        if self._check_round is not None:
            self._check_round(assignment.id, assignment.client_id, assignment.round)
        return moved

    def resume_waiting(self, limit: int = 100) -> list[str]:
        """Resume every regrade waiting for room (the recovery sweep); their assignment ids.

        Covers a regrade whose moved jobs are all graded while the client's other jobs
        still held its ceiling: no job of its round is left to resume it.
        """
        resumed = []
        for assignment in self._assignments.waiting_regrades(limit):
            try:
                self.resume(assignment.id)
            except GradeqError:
                log.warning("regrade not resumed", extra={"assignment_id": assignment.id})
                continue
            resumed.append(assignment.id)
        return resumed

    def _mark_waiting(self, assignment: Assignment, moved: int) -> Assignment:
        """Record whether the round still waits for submissions to move (only a change)."""
        waiting = moved < assignment.expected
        if assignment.regrade_waiting == waiting:
            return assignment
        round_ = assignment.round

        def mark(a: Assignment) -> Assignment:
            return a.with_regrade_waiting(waiting) if a.round == round_ else a

        return self._assignments.update(assignment.id, mark)

    def _move(self, assignment: Assignment) -> tuple[int, GradeqError | None]:
        """Regrade each final job of the round before while the ceilings admit it: how many
        are in this round now, and the ceiling's error when one refused a job."""
        now = self._clock.now()
        previous = assignment.round - 1
        full: list[GradeqError] = []
        refused = threading.Event()

        def one(job: Job) -> int:
            if job.request.assignment_round == assignment.round:
                return 1  # moved by the regrade's first try
            if job.request.assignment_round != previous or job.status not in _REGRADABLE:
                return 0
            if refused.is_set():
                return 0  # a ceiling is reached: this one waits for the next pass
            request = dataclasses.replace(
                job.request,
                rubric=assignment.rubric.rubric,
                rubric_version=assignment.rubric.version,
                prompt_version=assignment.prompt_version,
                assignment_round=assignment.round,
            )
            try:
                regraded = self._regrade_when_announced(
                    job.id, now, request, assignment.reopen_reviewed
                )
            except (TooManyActiveJobs, BacklogFull) as past:
                full.append(past)
                refused.set()
                return 0
            if regraded is None:
                return 0  # its event is still not out: the next ask moves it
            if regraded.status is JobStatus.PENDING:
                name = task_name_for(regraded.id, regraded.generation)
                task = TaskSpec(name, regraded.id, now, queue=regraded.lane)
                try:
                    self._queue.enqueue(task)
                except GradeqError:
                    log.warning("regrade task not made; the sweep replays it", exc_info=True)
            return 1

        jobs = self._service.all_grades(assignment)
        if self._parallelism <= 1:
            moved = sum(one(job) for job in jobs)
        else:
            with ThreadPoolExecutor(max_workers=self._parallelism) as pool:
                moved = sum(pool.map(one, jobs))
        return moved, full[0] if full else None

    def _regrade_when_announced(
        self, job_id: str, now: datetime, request: GradingRequest, reopen: bool = False
    ) -> Job | None:
        """Regrade the job, waiting a little for its completion event to go out first."""

        def move(job: Job) -> Job:
            return _regrade(job, now, request, self._lane, reopen)

        for wait_s in (*ANNOUNCE_WAITS_S, None):
            try:
                if self._limits is None:
                    return self._jobs.update(job_id, move)
                return self._jobs.reopen(job_id, move, self._limits)
            except JobLocked:
                if wait_s is None:
                    log.warning("regrade skipped a job still announcing", extra={"job_id": job_id})
                    return None
                time.sleep(wait_s)
        return None

    def report(
        self, caller: Principal | str, assignment_id: str, threshold: float = 1.0
    ) -> RegradeReport:
        """Old and new score of each submission of the current round, and the summary."""
        principal = as_principal(caller)
        assignment = self._service.get(principal, assignment_id, Action.ASSIGNMENT_GRADES)
        changes = list(self._changes(assignment))
        pairs = [(c.old, c.new) for c in changes if c.old is not None and c.new is not None]
        models = [
            (c.old_model, c.new_model)
            for c in changes
            if c.old_model is not None and c.new_model is not None
        ]
        return RegradeReport(
            round=assignment.round,
            compared=len(pairs),
            mean_shift=statistics.fmean(n - o for o, n in pairs) if pairs else None,
            changed=sum(1 for o, n in pairs if abs(n - o) > threshold),
            threshold=threshold,
            kappa=quadratic_weighted_kappa(
                [m[0] for m in models], [m[1] for m in models], 0, round(assignment.max_score)
            ),
            changes=changes,
            model_mean_shift=statistics.fmean(n - o for o, n in models) if models else None,
            flagged=sum(1 for c in changes if c.flagged),
            reopen_reviewed=assignment.reopen_reviewed,
        )

    def _changes(self, assignment: Assignment) -> Iterator[ScoreChange]:
        for job in self._service.all_grades(assignment):
            if job.request.assignment_round != assignment.round:
                continue
            before = job.regraded_from
            old_model = before.result.score if before and before.result else None
            new_model = job.result.score if job.result else None
            # The final grade before: the newest teacher's decision made before the regrade.
            decided = [
                r
                for r in (job.review.reviews if job.review else ())
                if before and r.at <= before.at
            ]
            old = decided[-1].result.score if decided else old_model
            final = job.effective_result if job.status is JobStatus.SUCCEEDED else None
            yield ScoreChange(
                submission_id=job.request.submission_id,
                job_id=job.id,
                old=old,
                new=final.score if final is not None else None,
                status=job.status,
                student_id=job.request.student_id,
                old_model=old_model,
                new_model=new_model,
                source=job.final_source,
                flagged=job.review is not None and job.review.flagged,
            )


def _regrade(
    job: Job, now: datetime, request: GradingRequest, lane: str | None, reopen: bool = False
) -> Job:
    if job.request.assignment_round == request.assignment_round:
        return job  # a retried move: already in the new round
    return job.regrade(now, request, lane=lane, reopen=reopen)
