#!/usr/bin/env bash
# Copyright The otelcol-nemo Authors
# SPDX-License-Identifier: Apache-2.0
# Builds the otelcol-nemo container image (what `make docker` runs).
#
# Stages the build context in docker/context/ (git-ignored):
#   otelcol-nemo         the static collector binary (_build/otelcol-nemo, from `make build`)
#   healthcheck          the static health-check probe (docker/healthcheck, stdlib only)
#   configs/*.yaml       the presets, installed in /etc/otel/configs/ and named
#                        /etc/otel/<preset>.yaml and /etc/otel/collector-<preset>.yaml
#   configs/overlays/    overlays, /etc/otel/overlays/<overlay>.yaml
#   rootfs/etc/passwd, rootfs/etc/group   root and otelcol (uid/gid 10001)
#   rootfs/etc/ssl/certs/ca-certificates.crt   this machine's CA bundle
#   rootfs/tmp           an empty, world-writable /tmp
#   data/telemetry, data/queue   the /data volume's layout (owned by 10001 in the image)
#   var-log-otel         an empty /var/log/otel (owned by 10001): where the NeMo Lens
#                        page's stock `file` exporter examples write
# then builds the Dockerfile with the legacy builder (DOCKER_BUILDKIT=0: the
# BuildKit client needs buildx, which is not installed here). FROM scratch:
# nothing is pulled.
#
# Usage: docker/build.sh [IMAGE]      IMAGE defaults to $IMAGE or otelcol-nemo:local
# Env:   OTELCOL_NEMO_BIN   binary to package  (default _build/otelcol-nemo)
#        CA_BUNDLE          CA certificates     (default /etc/ssl/certs/ca-certificates.crt)
#        DOCKER             docker CLI          (default docker)
set -euo pipefail
cd "$(dirname "$0")/.."

IMAGE=${1:-${IMAGE:-otelcol-nemo:local}}
BIN=${OTELCOL_NEMO_BIN:-_build/otelcol-nemo}
CA_BUNDLE=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
DOCKER=${DOCKER:-docker}
CTX=docker/context
USER_ID=10001

die() { echo "docker/build.sh: $*" >&2; exit 1; }

[ -x "$BIN" ] || die "$BIN not found: run \`make build\` first"
# A FROM scratch image has no dynamic loader: the binary must be static.
if command -v readelf >/dev/null 2>&1; then
  if readelf -l "$BIN" 2>/dev/null | grep -q 'program interpreter'; then
    die "$BIN is dynamically linked: build it with CGO_ENABLED=0 (make build does)"
  fi
elif ldd "$BIN" >/dev/null 2>&1; then
  die "$BIN is dynamically linked: build it with CGO_ENABLED=0 (make build does)"
fi
[ -s "$CA_BUNDLE" ] || die "CA bundle $CA_BUNDLE not found: install the ca-certificates package"
ls configs/*.yaml >/dev/null 2>&1 || die "no presets in configs/"
[ -f configs/file.yaml ] || die "configs/file.yaml (the default preset) is missing"

start=$(date +%s)
rm -rf "$CTX"
mkdir -p "$CTX/etc-otel/configs/overlays" "$CTX/rootfs/etc/ssl/certs" "$CTX/rootfs/tmp" "$CTX/data/telemetry" "$CTX/data/queue" "$CTX/var-log-otel"

cp "$BIN" "$CTX/otelcol-nemo"
chmod 0755 "$CTX/otelcol-nemo"
# /etc/otel/configs/ holds the presets and overlays (docker-compose mounts the
# repository's configs/ over it, so an edited preset needs no rebuild); every
# name a user may know points there: <preset>.yaml, the NeMo Lens docs'
# collector-<preset>.yaml, collector.yaml (the default: the file preset) and
# overlays/.
cp configs/*.yaml "$CTX/etc-otel/configs/"
cp configs/overlays/*.yaml "$CTX/etc-otel/configs/overlays/"
chmod 0644 "$CTX"/etc-otel/configs/*.yaml "$CTX"/etc-otel/configs/overlays/*.yaml
for f in configs/*.yaml; do
  name=$(basename "$f")
  ln -s "configs/$name" "$CTX/etc-otel/$name"
  ln -s "configs/$name" "$CTX/etc-otel/collector-$name"
done
ln -s configs/file.yaml "$CTX/etc-otel/collector.yaml"
ln -s configs/overlays "$CTX/etc-otel/overlays"
cp "$CA_BUNDLE" "$CTX/rootfs/etc/ssl/certs/ca-certificates.crt"
chmod 0644 "$CTX/rootfs/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/root:/sbin/nologin\notelcol:x:%d:%d:otelcol-nemo:/data:/sbin/nologin\n' \
  "$USER_ID" "$USER_ID" >"$CTX/rootfs/etc/passwd"
printf 'root:x:0:\notelcol:x:%d:\n' "$USER_ID" >"$CTX/rootfs/etc/group"
chmod 0644 "$CTX/rootfs/etc/passwd" "$CTX/rootfs/etc/group"
chmod 1777 "$CTX/rootfs/tmp"
chmod 0750 "$CTX/data/telemetry" "$CTX/data/queue" "$CTX/var-log-otel"

CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS=-buildvcs=false \
  go build -trimpath -ldflags='-s -w' -o "$CTX/healthcheck" ./docker/healthcheck

version=$("$BIN" --version 2>/dev/null | awk '{print $NF}')
echo "docker/build.sh: staged $CTX in $(( $(date +%s) - start ))s; building $IMAGE (otelcol-nemo ${version:-unknown})"

build_start=$(date +%s)
DOCKER_BUILDKIT=0 "$DOCKER" build --file Dockerfile --tag "$IMAGE" \
  --build-arg VERSION="${version:-dev}" .
size=$("$DOCKER" image inspect --format '{{.Size}}' "$IMAGE")
echo "docker/build.sh: built $IMAGE in $(( $(date +%s) - build_start ))s, $(( size / 1024 / 1024 )) MiB"
