"""The intake's static pages: one blueprint shape for each page and the script they share.

A page holds no data: its script asks for a key, keeps it in the script's memory only
(a reload asks again) and calls an API on the same origin with it. Every file of a page,
and the shared script, tells the browser to run nothing but the intake's own script and
style, to send no referrer and never to show the page in a frame, so injected markup or a
framing site cannot reach the key.
"""

from __future__ import annotations

from flask import Blueprint, Response
from flask.blueprints import BlueprintSetupState

#: Only the intake's own files; the API on the same origin; no frames, forms or <base>.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "connect-src 'self'",
        # blob: the review page shows an answer's photo it fetched with the reviewer's key
        # (only the page's own script can make such a URL).
        "img-src 'self' blob:",
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


def _browser_policies(response: Response) -> Response:
    response.headers.update(BROWSER_POLICIES)
    return response


def static_files(name: str, import_name: str, url_prefix: str) -> Blueprint:
    """Serve the static folder beside `import_name` at <url_prefix>/static/, with the policies."""
    files = Blueprint(
        name,
        import_name,
        url_prefix=url_prefix,
        static_folder="static",
        static_url_path="/static",
    )
    files.after_request(_browser_policies)
    return files


#: The script every page loads before its own (static/kit.js): the DOM builder and the
#: API caller. The pages name it relative to themselves (../page-kit/static/kit.js).
kit = static_files("page_kit", __name__, "/page-kit")


def _serve_kit(state: BlueprintSetupState) -> None:
    if kit.name not in state.app.blueprints:
        state.app.register_blueprint(kit)


def static_page(name: str, import_name: str, url_prefix: str, html: str) -> Blueprint:
    """Serve static/<html> at <url_prefix>/ with its files, and the shared script once."""
    page = static_files(name, import_name, url_prefix)

    def show() -> Response:
        return page.send_static_file(html)

    page.add_url_rule("/", "page", show, methods=["GET"])
    # A page cannot run without the shared script: whichever page an app registers first
    # registers it too, so it is served once however many pages there are.
    page.record_once(_serve_kit)
    return page
