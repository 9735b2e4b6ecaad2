"""The gradebook's LTI 1.3 Advantage writer (AGS scores, NRPS roster)."""

from __future__ import annotations

from services.gradebook.lti.writer import LtiAgsWriter, score_of

__all__ = ["LtiAgsWriter", "score_of"]
