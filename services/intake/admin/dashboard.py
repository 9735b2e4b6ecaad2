"""The operator dashboard: one static page whose script calls the admin API.

The page itself holds no data; the operator enters their key in it, and every figure is
fetched from /admin/v1 with that key. The key lives in the script's memory only (a
reload asks for it again), and every file of the page tells the browser to run nothing
but the page's own script and style, to send no referrer and never to show the page in
a frame, so injected markup or a framing site cannot reach the key.
"""

from __future__ import annotations

from flask import Blueprint, Response

page = Blueprint(
    "admin_dashboard",
    __name__,
    url_prefix="/admin",
    static_folder="static",
    static_url_path="/static",
)

#: Only the page's own files; the API on the same origin; no frames, forms or <base>.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        "img-src 'self'",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    ]
)
BROWSER_POLICIES = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Frame-Options": "DENY",  # frame-ancestors for browsers that predate it
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


@page.after_request
def _browser_policies(response: Response) -> Response:
    response.headers.update(BROWSER_POLICIES)
    return response


@page.get("/")
def dashboard() -> Response:
    return page.send_static_file("dashboard.html")
