#!/usr/bin/env bash
# Copyright The otelcol-nemo Authors
# SPDX-License-Identifier: Apache-2.0
# Makes sure the Docker Compose v2 CLI plugin (`docker compose`) is available.
#
# Debian packages only Compose v1 (`docker-compose`, which rejects the
# top-level `name:` key and other Compose-spec features), and no prebuilt
# binary can be downloaded on the project's machines, so when `docker compose
# version` fails this script builds the pinned release from its Go module and
# installs it as a CLI plugin under ${DOCKER_CONFIG:-~/.docker}/cli-plugins.
# Later runs find it there and do nothing. The build takes several minutes on
# two cores and needs about 2 GB of module cache.
#
# Usage: docker/compose-cli.sh            (idempotent)
set -euo pipefail

COMPOSE_MODULE=github.com/docker/compose/v2
COMPOSE_VERSION=${COMPOSE_VERSION:-v2.40.3}
PLUGIN_DIR="${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins"
PLUGIN="$PLUGIN_DIR/docker-compose"

if docker compose version >/dev/null 2>&1; then
  echo "compose-cli: $(docker compose version)"
  exit 0
fi

echo "compose-cli: \`docker compose\` is missing: building $COMPOSE_MODULE@$COMPOSE_VERSION into $PLUGIN"
start=$(date +%s)
work=$(mktemp -d)
trap 'chmod -R u+w "$work" 2>/dev/null; rm -rf "$work"' EXIT

# Download the module (outside any module, so no go.mod is touched) and copy
# it somewhere writable: the module cache is read-only.
dir=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "$COMPOSE_MODULE@$COMPOSE_VERSION" |
  sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
if [ -z "$dir" ] || [ ! -f "$dir/go.mod" ]; then
  echo "compose-cli: could not download $COMPOSE_MODULE@$COMPOSE_VERSION" >&2
  exit 1
fi
cp -r "$dir" "$work/compose"
chmod -R u+w "$work/compose"

mkdir -p "$PLUGIN_DIR"
(
  cd "$work/compose"
  # GOTOOLCHAIN=local: build with the installed Go, never fetch another toolchain.
  CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-buildvcs=false go build -trimpath \
    -ldflags "-s -w -X $COMPOSE_MODULE/internal.Version=$COMPOSE_VERSION" \
    -o "$PLUGIN.tmp" ./cmd
)
mv "$PLUGIN.tmp" "$PLUGIN"
chmod 0755 "$PLUGIN"
echo "compose-cli: built in $(( $(date +%s) - start ))s: $(docker compose version)"
