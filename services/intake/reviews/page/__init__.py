"""The reviewers' page: one static page whose script calls the review API (/v1/reviews).

Like the operator dashboard it holds no data: the reviewer enters their reviewer key,
which stays in the script's memory only, and the page runs under the same browser
policies (see services.intake.page_kit).
"""

from __future__ import annotations

from services.intake.page_kit import static_page

page = static_page("review_page", __name__, "/review", "review.html")
