#!/usr/bin/env bash
# Build the Gradeq image with podman and check that every service starts in it and
# answers GET /healthz and /health/live. Installs podman, runc and debootstrap when missing.
#
# No container registry is reachable on CI, so the base image is a Debian bookworm
# rootfs made with debootstrap (cached under .cache/image-test) and passed as BASE_IMAGE.
# Set BASE_IMAGE=python:3.12-slim to build on the real base where a registry is reachable.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
CACHE="${IMAGE_TEST_CACHE:-$ROOT/.cache/image-test}"
IMAGE="${IMAGE:-localhost/gradeq:test}"
SERVICES="${SERVICES:-intake worker notification analytics gradebook}"
BASE_PORT="${BASE_PORT:-18480}"
HOST_CA="${HOST_CA:-/etc/ssl/certs/ca-certificates.crt}"
# A throwaway Standard Webhooks secret for the notification service's start-up check.
SMOKE_WEBHOOK_SECRETS_KEY="$(head -c 32 /dev/urandom | base64)"
mkdir -p "$CACHE"

log() { printf '[image-test] %s\n' "$*" >&2; }

install_tools() {
  local missing=()
  command -v podman >/dev/null || missing+=(podman)
  command -v runc >/dev/null || [ -x /usr/sbin/runc ] || missing+=(runc)
  command -v debootstrap >/dev/null || [ -x /usr/sbin/debootstrap ] || missing+=(debootstrap)
  command -v curl >/dev/null || missing+=(curl)
  if [ "${#missing[@]}" -gt 0 ]; then
    log "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  export PATH="$PATH:/usr/sbin:/sbin"
}

configure_podman() {
  # Rootful podman with runc and cgroupfs; storage kept in the cache, not /var/lib.
  mkdir -p "$CACHE/storage/root" "$CACHE/storage/run"
  cat >"$CACHE/containers.conf" <<CONF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=5000:5000"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
  cat >"$CACHE/storage.conf" <<CONF
[storage]
driver = "overlay"
graphroot = "$CACHE/storage/root"
runroot = "$CACHE/storage/run"
CONF
  export CONTAINERS_CONF="$CACHE/containers.conf"
  export CONTAINERS_STORAGE_CONF="$CACHE/storage.conf"
}

debian_mirror() {
  local mirror
  # The first Debian archive apt uses (one-line or deb822 format), security excluded.
  mirror="$(grep -hE '^[[:space:]]*(deb[[:space:]]|URIs:)' /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null \
    | grep -oE 'https?://[^ ]*/debian/?' | grep -v -- '-security' | head -n1 || true)"
  echo "${mirror:-http://deb.debian.org/debian}"
}

local_base() {
  local tag="localhost/gradeq-base:bookworm"
  if podman image exists "$tag"; then
    echo "$tag"
    return
  fi
  local rootfs="$CACHE/rootfs"
  if [ ! -x "$rootfs/usr/bin/python3" ]; then
    log "debootstrap bookworm into $rootfs (first run only)"
    rm -rf "$rootfs"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
      bookworm "$rootfs" "$(debian_mirror)" >"$CACHE/debootstrap.log" 2>&1 \
      || { tail -n 30 "$CACHE/debootstrap.log" >&2; exit 1; }
  fi
  tar -C "$rootfs" -c . | podman import - "$tag" >/dev/null
  echo "$tag"
}

build_image() {
  local base="$1" build_args=(--build-arg "BASE_IMAGE=$base")
  # HTTPS to the package index may go through a proxy only the host trusts: give pip
  # the host's CA bundle during the build (not baked into the image).
  if [ -f "$HOST_CA" ]; then
    mkdir -p "$CACHE/ca"
    cp "$HOST_CA" "$CACHE/ca/ca.crt"
    printf '[global]\ncert = /run/host-ca/ca.crt\n' >"$CACHE/pip.conf"
    build_args+=(-v "$CACHE/ca:/run/host-ca:ro" -v "$CACHE/pip.conf:/etc/pip.conf:ro")
  fi
  log "building $IMAGE on $base"
  podman build --network=host "${build_args[@]}" -t "$IMAGE" -f "$ROOT/Dockerfile" "$ROOT"
}

CONTAINERS=()
cleanup() {
  local c
  for c in "${CONTAINERS[@]}"; do
    podman rm -f "$c" >/dev/null 2>&1 || true
  done
}
trap cleanup EXIT INT TERM

smoke_test() {
  local service="$1" port="$2" name="gradeq-smoke-$1-$$"
  podman run -d --name "$name" --network=host \
    -e SERVICE="$service" -e PORT="$port" \
    -e GRADEQ_BACKEND=embedded -e GRADEQ_DATA_DIR=/tmp/data -e GRADEQ_PUSH_TOKEN=x \
    -e GRADEQ_CLIENT_KEYS=smoke=smoke-key -e GRADEQ_WEBHOOK_SECRETS_KEY="$SMOKE_WEBHOOK_SECRETS_KEY" \
    "$IMAGE" >/dev/null
  CONTAINERS+=("$name")
  local i
  for i in $(seq 1 60); do
    if curl -fsS "http://127.0.0.1:$port/healthz" >/dev/null 2>&1 \
      && curl -fsS "http://127.0.0.1:$port/health/live" >/dev/null 2>&1; then
      # The process must run as the image's non-root user.
      local uid
      uid="$(podman exec "$name" id -u)"
      if [ "$uid" = "0" ]; then
        log "FAIL $service runs as root"
        return 1
      fi
      log "ok   $service answered /healthz and /health/live on :$port (uid $uid, ${i}x0.5s)"
      return 0
    fi
    if [ "$(podman inspect -f '{{.State.Running}}' "$name")" != "true" ]; then
      break
    fi
    sleep 0.5
  done
  log "FAIL $service did not answer /healthz and /health/live; its logs:"
  podman logs "$name" >&2 || true
  return 1
}

main() {
  install_tools
  configure_podman
  local base="${BASE_IMAGE:-}"
  [ -n "$base" ] || base="$(local_base)"
  build_image "$base"

  local port="$BASE_PORT" failed=0 service
  for service in $SERVICES; do
    if [ ! -f "$ROOT/services/$service/app.py" ]; then
      log "FAIL services/$service/app.py does not exist"
      failed=1
      continue
    fi
    smoke_test "$service" "$port" || failed=1
    port=$((port + 1))
  done

  # An unknown SERVICE must fail fast with a clear message, not start something else.
  local refused="gradeq-smoke-refused-$$"
  CONTAINERS+=("$refused")
  if podman run --name "$refused" --network=host -e SERVICE=nope "$IMAGE" >/dev/null 2>&1; then
    log "FAIL the image started with SERVICE=nope"
    failed=1
  else
    log "ok   unknown SERVICE is refused"
  fi

  if [ "$failed" -ne 0 ]; then
    log "image test FAILED"
    exit 1
  fi
  log "image test passed: $SERVICES"
}

main "$@"
