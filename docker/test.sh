#!/usr/bin/env bash
# Copyright The otelcol-nemo Authors
# SPDX-License-Identifier: Apache-2.0
# End-to-end test of the container image and the compose files (what
# `make docker-test` runs, from .ci/run as root).
#
#  1. installs docker.io with apt-get when dockerd is missing;
#  2. starts dockerd in the background when no daemon answers (and stops it
#     at the end);
#  3. makes sure the Compose v2 CLI plugin is there (docker/compose-cli.sh
#     builds it from its Go module the first time: several minutes);
#  4. builds the image (docker/build.sh);
#  5. checks every compose file with the real CLI (`docker compose config`);
#  6. runs the Docker-guarded Go tests in e2e/compose_test.go
#     (NEMO_DOCKER_TEST=1): every preset validates inside the image; the
#     container on the default preset, ports published on 127.0.0.1 and a host
#     directory mounted at /data, receives a NeMo Lens-shaped job from the
#     host and writes complete JSONL as uid 10001; then
#     `docker compose -f docker-compose.otel.yml up` of the collector service
#     alone (no other image is pulled), health checked, fed, and `down -v`.
#
# Everything it creates carries the label org.nemo-lens.docker-test=<run id>
# or the compose project <run id>, and is removed on exit (containers,
# volumes, networks; the image tag too unless it existed before). Each step
# is bounded in time.
set -euo pipefail
cd "$(dirname "$0")/.."

export GOFLAGS=${GOFLAGS:--buildvcs=false}
IMAGE=${IMAGE:-otelcol-nemo:local}
RUN_ID=nemo-docker-test-$$
LABEL=org.nemo-lens.docker-test=$RUN_ID
DOCKERD_LOG=${DOCKERD_LOG:-/tmp/$RUN_ID-dockerd.log}

log() { echo "== docker-test: $*"; }
die() { echo "docker-test: $*" >&2; exit 1; }
now() { date +%s; }

dockerd_pid=""
had_image=""

cleanup() {
  local rc=$?
  set +e
  if docker info >/dev/null 2>&1; then
    log "cleaning up"
    docker ps -aq --filter "label=$LABEL" | xargs -r docker rm -f >/dev/null
    if docker compose version >/dev/null 2>&1; then
      for f in docker-compose.otel.yml docker-compose.weave.yml docker-compose.honeycomb.yml; do
        timeout 60 docker compose -p "$RUN_ID" -f "$f" down -v --remove-orphans --timeout 10 >/dev/null 2>&1
      done
    fi
    for kind in container volume network; do
      ids=$(docker "$kind" ls -q --filter "label=com.docker.compose.project=$RUN_ID" 2>/dev/null)
      [ "$kind" = container ] && ids=$(docker ps -aq --filter "label=com.docker.compose.project=$RUN_ID")
      if [ -n "$ids" ]; then
        echo "docker-test: removing leftover ${kind}s: $ids"
        if [ "$kind" = container ]; then docker rm -f $ids >/dev/null; else docker "$kind" rm $ids >/dev/null; fi
      fi
    done
    if [ -z "$had_image" ] && [ "${DOCKER_TEST_KEEP_IMAGE:-}" != 1 ]; then
      docker image rm "$IMAGE" >/dev/null 2>&1
    fi
    # Earlier builds of the image that this build untagged.
    docker image prune --force --filter "label=org.opencontainers.image.title=otelcol-nemo" >/dev/null 2>&1
  fi
  if [ -n "$dockerd_pid" ]; then
    log "stopping the dockerd this script started (pid $dockerd_pid)"
    kill -TERM "$dockerd_pid" 2>/dev/null
    for _ in $(seq 1 30); do kill -0 "$dockerd_pid" 2>/dev/null || break; sleep 1; done
    if kill -0 "$dockerd_pid" 2>/dev/null; then
      echo "docker-test: dockerd did not stop in 30s: killing it" >&2
      kill -KILL "$dockerd_pid" 2>/dev/null
    fi
    [ "$rc" -eq 0 ] && rm -f "$DOCKERD_LOG"
  fi
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

t0=$(now)

# 1. Docker engine.
if ! command -v dockerd >/dev/null 2>&1; then
  [ "$(id -u)" -eq 0 ] || die "dockerd is missing and installing docker.io needs root"
  log "installing docker.io (apt-get)"
  s=$(now)
  timeout 120 apt-get update -qq
  DEBIAN_FRONTEND=noninteractive NEEDRESTART_SUSPEND=1 timeout 600 apt-get install -y -qq docker.io >/dev/null
  log "docker.io installed in $(( $(now) - s ))s"
fi
command -v docker >/dev/null 2>&1 || die "no docker CLI after installing docker.io"

# 2. Docker daemon.
if ! docker info >/dev/null 2>&1; then
  [ "$(id -u)" -eq 0 ] || die "no Docker daemon answers and starting dockerd needs root"
  log "starting dockerd (log: $DOCKERD_LOG)"
  dockerd >"$DOCKERD_LOG" 2>&1 &
  dockerd_pid=$!
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    kill -0 "$dockerd_pid" 2>/dev/null || { tail -20 "$DOCKERD_LOG" >&2; die "dockerd exited"; }
    sleep 1
  done
  docker info >/dev/null 2>&1 || { tail -20 "$DOCKERD_LOG" >&2; die "dockerd did not answer within 60s"; }
fi
log "docker $(docker version --format 'client {{.Client.Version}}, server {{.Server.Version}}')"

# 3. Compose v2 CLI.
s=$(now)
timeout 1800 docker/compose-cli.sh
log "compose CLI ready in $(( $(now) - s ))s"

# 4. Image.
docker image inspect "$IMAGE" >/dev/null 2>&1 && had_image=1
s=$(now)
timeout 600 docker/build.sh "$IMAGE"
log "image built in $(( $(now) - s ))s"

# 5. The real CLI must accept every compose file too (compose-go checks them in
#    plain `go test`); required variables get test values.
for f in docker-compose.otel.yml docker-compose.weave.yml docker-compose.honeycomb.yml; do
  timeout 60 docker compose -p "$RUN_ID" -f "$f" config --quiet || die "docker compose config rejected $f"
done
log "docker compose config: every compose file accepted"

# 6. The Docker-guarded Go tests.
s=$(now)
NEMO_DOCKER_TEST=1 NEMO_DOCKER_IMAGE="$IMAGE" NEMO_DOCKER_LABEL="$LABEL" NEMO_COMPOSE_PROJECT="$RUN_ID" \
  go -C e2e test -count=1 -timeout 15m -run '^TestDocker' -v .
log "docker tests passed in $(( $(now) - s ))s; total $(( $(now) - t0 ))s"
