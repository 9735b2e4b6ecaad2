"""Clients of a school's LTI 1.3 Advantage platform: the OAuth 2 client-credentials grant
(tokens.py), Assignment and Grade Services (ags.py) and Names and Role Provisioning
Services (nrps.py).

They are adapters to an outside system, like shared/adapters/google: the gradebook
service writes grades with them, and they sign with the tool keys the intake also serves.
Their errors say whether to try again (`LtiBusy`: 429, 5xx, a timeout) or not
(`LtiRefused`: any other 4xx).
"""

from __future__ import annotations

from shared.adapters.lti.errors import LtiBusy, LtiRefused

__all__ = ["LtiBusy", "LtiRefused"]
