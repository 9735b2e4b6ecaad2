"""The operator dashboard: one static page whose script calls the admin API.

The page itself holds no data; the operator enters their key in it, and every figure is
fetched from /admin/v1 with that key.
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


@page.get("/")
def dashboard() -> Response:
    return page.send_static_file("dashboard.html")
