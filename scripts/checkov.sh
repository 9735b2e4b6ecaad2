#!/usr/bin/env bash
# Run checkov on terraform/ with the built-in checks and Gradeq's own policies
# (terraform/policies). checkov lives in its own venv: it ships a module named hcl2 that
# would shadow python-hcl2 in the project venv.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
VENV="${CHECKOV_VENV:-$ROOT/.cache/checkov-venv}"
VERSION="${CHECKOV_VERSION:-3.3.30}"

if [ ! -x "$VENV/bin/checkov" ] || ! "$VENV/bin/pip" show checkov 2>/dev/null | grep -qx "Version: $VERSION"; then
  echo "[checkov] installing checkov $VERSION into $VENV" >&2
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet "checkov==$VERSION"
fi

# Skips are written next to the resource they concern (#checkov:skip=ID:reason), so
# each one carries its reason; none are passed here.
exec "$VENV/bin/checkov" \
  --directory "${CHECKOV_DIR:-$ROOT/terraform}" \
  --framework terraform \
  --skip-download \
  --external-checks-dir "$ROOT/terraform/policies" \
  --compact \
  "$@"
