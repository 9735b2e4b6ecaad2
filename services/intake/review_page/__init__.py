"""The reviewers' page: one static page whose script calls the review API (/v1/reviews).

Like the operator dashboard it holds no data: the reviewer enters their reviewer key,
which stays in the script's memory only, and the page runs under the same browser
policies (its own script and style only, no frames, no referrer).
"""

from __future__ import annotations

from flask import Blueprint, Response

from services.intake.admin.dashboard import BROWSER_POLICIES

page = Blueprint(
    "review_page",
    __name__,
    url_prefix="/review",
    static_folder="static",
    static_url_path="/static",
)


@page.after_request
def _browser_policies(response: Response) -> Response:
    response.headers.update(BROWSER_POLICIES)
    return response


@page.get("/")
def review_page() -> Response:
    return page.send_static_file("review.html")
