"""A student's grade, opened from the LMS: one static page whose script reads the LTI
session token from the URL fragment (no server sees it), keeps it in memory only, and
lists the student's own jobs of the assignment through /v1/grading-jobs, with the same
browser policies as every intake page (services.intake.page_kit)."""

from __future__ import annotations

from services.intake.page_kit import static_page

page = static_page("lti_grade_page", __name__, "/lti/grade", "grade.html")
