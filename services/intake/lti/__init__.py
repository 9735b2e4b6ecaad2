"""The intake's LTI 1.3 tool routes: login initiation, launch, and Gradeq's JWKS.

Registered by the app factory only when LTI is configured (GRADEQ_LTI_TOOL_URL and
GRADEQ_LTI_SECRETS_KEY); the checks themselves live in shared.service_layer.lti_launch.
"""

from __future__ import annotations

from services.intake.lti.routes import bp, init_app

__all__ = ["bp", "init_app"]
