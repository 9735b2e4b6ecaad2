"""The operator dashboard: one static page whose script calls the admin API.

The page itself holds no data; the operator enters their key in it, and every figure is
fetched from /admin/v1 with that key. It is served like every page of the intake (see
services.intake.page_kit): the key stays in the script's memory, and the browser runs
nothing but the intake's own script and style, sends no referrer and shows no frame.
"""

from __future__ import annotations

from services.intake.page_kit import static_page

page = static_page("admin_dashboard", __name__, "/admin", "dashboard.html")
