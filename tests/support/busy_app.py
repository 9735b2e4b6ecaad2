"""A service-shaped app for gunicorn tests: requests that hold a thread, and /healthz.

`POST /busy` marks itself started (a file in $BUSY_DIR) and holds its thread until the
file `release` appears there, as a grading request holds one for minutes.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path

from flask import Flask


def create_app() -> Flask:
    """Build the app; gunicorn calls this."""
    app = Flask(__name__)
    folder = Path(os.environ["BUSY_DIR"])

    @app.post("/busy")
    def busy() -> str:
        (folder / f"started-{uuid.uuid4().hex}").touch()
        give_up = time.monotonic() + 60
        while not (folder / "release").exists() and time.monotonic() < give_up:
            time.sleep(0.05)
        return "done"

    @app.get("/healthz")
    def healthz() -> str:
        return "ok"

    return app
