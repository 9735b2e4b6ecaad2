from __future__ import annotations

import pytest

from tests.infra import tfconfig


@pytest.fixture(scope="session")
def tf() -> tfconfig.Terraform:
    return tfconfig.load()
