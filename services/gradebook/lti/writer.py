"""Write posted grades to a school's LTI 1.3 platform with Assignment and Grade Services.

For each grade: the assignment's link (recorded by its launches) names the platform and
the course; the line item is the one the LMS linked, else the one with the assignment id
as `resourceId`, created when absent (under a claim, so that two deliveries never make two
columns: services.gradebook.claims) and remembered; the student's LMS user id is the
grade's `lms_user_id`, else the course roster's (NRPS) entry for the student id. The
score carries `scoreGiven` only once the grade is posted (`FullyGraded`): a grade held
for a teacher (`PendingManual`) shows as submitted and pending, never its number. Its
`timestamp` is when the grade was posted, so the platform keeps the latest and a
redelivered version changes nothing (idempotent per student, assignment and version).
"""

from __future__ import annotations

import logging
import threading
import uuid
from datetime import UTC
from typing import Any

import requests

from services.gradebook.claims import ItemClaims
from services.gradebook.ports import GradebookBusy, GradebookRejected, PostedGrade
from shared.adapters.lti.ags import AgsClient
from shared.adapters.lti.errors import LtiBusy, LtiRefused
from shared.adapters.lti.nrps import NrpsClient
from shared.adapters.lti.tokens import LtiTokens
from shared.domain.lti import AssignmentLink, LtiRegistration
from shared.logs import job_context
from shared.ports import Clock, LtiStore
from shared.service_layer.lti_keys import LtiToolKeys

log = logging.getLogger(__name__)


def score_of(grade: PostedGrade, user_id: str) -> dict[str, Any]:
    """The AGS score for a posted grade (application/vnd.ims.lis.v1.score+json)."""
    posted = grade.grading_progress == "FullyGraded" and grade.score is not None
    score: dict[str, Any] = {
        "userId": user_id,
        "scoreMaximum": grade.max_score,
        "activityProgress": "Completed" if posted else "Submitted",
        "gradingProgress": "FullyGraded" if posted else "PendingManual",
        "timestamp": grade.posted_at.astimezone(UTC).isoformat(timespec="milliseconds"),
    }
    if posted:
        score["scoreGiven"] = grade.score
        if grade.feedback:
            score["comment"] = grade.feedback
    return score


class LtiAgsWriter:
    """One school's LTI platform as a GradebookWriter."""

    def __init__(
        self,
        store: LtiStore,
        ags: AgsClient,
        nrps: NrpsClient,
        claims: ItemClaims | None = None,
    ) -> None:
        """`claims`: where instances agree on the line items they create (without: each
        delivery that finds none makes one)."""
        self._store = store
        self._ags = ags
        self._nrps = nrps
        self._claims = claims
        #: memberships URL -> student id -> LMS user id (read again on a miss).
        self._rosters: dict[str, dict[str, str]] = {}
        self._creating = threading.Lock()

    @classmethod
    def on(
        cls, store: LtiStore, keys: LtiToolKeys, clock: Clock, claims: ItemClaims | None = None
    ) -> LtiAgsWriter:
        """The writer with its clients sharing one token cache and one HTTP session."""
        session = requests.Session()
        tokens = LtiTokens(keys, clock, session)
        return cls(store, AgsClient(tokens, session), NrpsClient(tokens, session), claims)

    def write(self, grade: PostedGrade) -> None:
        try:
            with job_context(grade.job_id):
                self._write(grade)
        except LtiBusy as exc:
            raise GradebookBusy(exc.retry_after_s, str(exc)) from exc
        except LtiRefused as exc:
            raise GradebookRejected(str(exc)) from exc

    def _write(self, grade: PostedGrade) -> None:
        link = self._store.link(grade.school, grade.assignment_id)
        if link is None:
            raise GradebookRejected(
                f"assignment {grade.assignment_id} has no LMS link yet: launch it once from the"
                " LMS course"
            )
        registration = self._store.registration(link.issuer, link.client_id)
        if registration is None or registration.school != grade.school:
            raise GradebookRejected(f"the LTI registration of {link.issuer} is gone")
        user_id = grade.lms_user_id or self._user_of(registration, link, grade.student_id)
        line_item = link.lineitem_url or self._line_item(registration, link, grade)
        self._ags.post_score(registration, line_item, score_of(grade, user_id))
        log.info(
            "score sent to the LMS",
            extra={
                "assignment_id": grade.assignment_id,
                "version": grade.version,
                "grading_progress": grade.grading_progress,
            },
        )

    def _line_item(
        self, registration: LtiRegistration, link: AssignmentLink, grade: PostedGrade
    ) -> str:
        """The assignment's line item: recorded, or found or made (under the claim)."""
        if self._claims is None:
            return self._found_or_made(registration, link, grade)
        school, assignment, holder = grade.school, grade.assignment_id, uuid.uuid4().hex
        recorded = self._claims.settled(school, assignment, holder)
        if recorded is not None:
            return recorded
        try:
            url = self._found_or_made(registration, link, grade)
        except BaseException:
            self._claims.release(school, assignment, holder)
            raise
        self._claims.record(school, assignment, holder, url)
        return url

    def _found_or_made(
        self, registration: LtiRegistration, link: AssignmentLink, grade: PostedGrade
    ) -> str:
        with self._creating:  # one creation at a time in this instance
            # Another delivery may have found or made it while this one waited.
            current = self._store.link(link.school, link.assignment_id)
            if (
                current is not None
                and current.lineitem_url
                and (current.issuer, current.context_id) == (link.issuer, link.context_id)
            ):
                return current.lineitem_url
            item = self._ags.find_or_create(
                registration,
                link.lineitems_url,
                label=f"Gradeq: {grade.assignment_id}",
                score_maximum=grade.max_score,
                resource_id=grade.assignment_id,
            )
            self._store.put_link(link.with_line_item(item.url))
            return item.url

    def _user_of(self, registration: LtiRegistration, link: AssignmentLink, student_id: str) -> str:
        if not link.memberships_url:
            raise GradebookRejected("the LMS offers no roster (NRPS) for this course")
        known = self._rosters.get(link.memberships_url, {})
        if student_id not in known:
            known = self._nrps.students(registration, link.memberships_url)
            self._rosters[link.memberships_url] = known
        if student_id not in known:
            raise GradebookRejected(f"student {student_id} is not in the LMS course's roster")
        return known[student_id]
