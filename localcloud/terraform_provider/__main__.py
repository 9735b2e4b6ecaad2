"""`python -m localcloud.terraform_provider google|google-beta|time`: what terraform runs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from localcloud.terraform_provider.schema import PACKAGES
from localcloud.terraform_provider.server import serve

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in PACKAGES:
        sys.exit(f"usage: python -m localcloud.terraform_provider {{{','.join(PACKAGES)}}}")
    default_cache = Path(__file__).resolve().parents[2] / ".cache"
    cache = Path(os.environ.get("GRADEQ_PROVIDER_SCHEMA_CACHE", default_cache))
    sys.exit(serve(sys.argv[1], cache))
