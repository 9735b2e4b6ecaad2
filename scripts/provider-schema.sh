#!/usr/bin/env bash
# Install the npm package @cdktf/provider-google (generated from the google provider's
# schema; no provider binary) into .cache/provider-schema and print its lib/ directory.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
DIR="${PROVIDER_SCHEMA_DIR:-$ROOT/.cache/provider-schema}"
VERSION="${PROVIDER_SCHEMA_VERSION:-16.12.1}" # google provider 6.50
LIB="$DIR/node_modules/@cdktf/provider-google/lib"

if ! grep -qs "\"version\": \"$VERSION\"" "$DIR/node_modules/@cdktf/provider-google/package.json"; then
  mkdir -p "$DIR"
  npm install --silent --no-save --no-audit --no-fund --prefix "$DIR" "@cdktf/provider-google@$VERSION" >&2
fi
echo "$LIB"
