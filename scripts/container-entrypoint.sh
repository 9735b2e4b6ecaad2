#!/bin/sh
# Start one Gradeq service under gunicorn, as Cloud Run expects: bound to $PORT, one
# process, threads for the request concurrency plus spare ones for health probes
# (shared/http/gunicorn_conf.py, from $CONCURRENCY), and no gunicorn timeout (Cloud Run
# enforces it).
set -eu

case "${SERVICE:-}" in
  intake | worker | notification | analytics | gradebook) ;;
  *)
    echo "SERVICE must be one of intake, worker, notification, analytics, gradebook (got '${SERVICE:-}')" >&2
    exit 64
    ;;
esac

exec gunicorn \
  --config python:shared.http.gunicorn_conf \
  --bind ":${PORT:-8080}" \
  --workers 1 \
  --timeout 0 \
  --graceful-timeout "${GRACEFUL_TIMEOUT:-8}" \
  --access-logfile - \
  --error-logfile - \
  "services.${SERVICE}.app:create_app()"
