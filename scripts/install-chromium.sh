#!/usr/bin/env bash
# Install Debian's chromium for the browser tests (Playwright drives the system browser;
# no browser is downloaded). Needs root and apt; prints why when it cannot install.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "chromium is missing and installing it needs root: apt-get install -y chromium" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null; then
  echo "chromium is missing and this system has no apt-get" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq chromium >&2
