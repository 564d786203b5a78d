#!/usr/bin/env bash
# Copyright The otelcol-nemo Authors
# SPDX-License-Identifier: Apache-2.0
# Waits until this node's collector of the current job is healthy: the task
# of the short step nemo-telemetry.sh runs on every node after starting the
# collectors. otelcol-nemo-node.sh writes the ready file (the collector's pid)
# once the health check answers 200 (the pid must still be alive), or a
# failed file with the reason it could not start. Exits 1 on failure or after
# NEMO_COLLECTOR_START_TIMEOUT seconds.
set -euo pipefail

node=${SLURMD_NODENAME:-$(hostname -s)}
status_file="${NEMO_RUNTIME_DIR:-/tmp}/otelcol-nemo.$SLURM_JOB_ID.${SLURM_RESTART_COUNT:-0}.$node"
timeout=${NEMO_COLLECTOR_START_TIMEOUT:-60}
deadline=$((SECONDS + timeout))

while [ "$SECONDS" -lt "$deadline" ]; do
  pid=$(cat "$status_file.ready" 2>/dev/null || true)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    exit 0
  fi
  if [ -s "$status_file.failed" ]; then
    echo "otelcol-nemo-ready[$node]: the collector did not start: $(cat "$status_file.failed")" >&2
    rm -f "$status_file.failed"
    exit 1
  fi
  sleep 0.2
done
echo "otelcol-nemo-ready[$node]: no healthy collector after ${timeout}s; see $NEMO_JOB_TELEMETRY_DIR/$node/collector.log" >&2
exit 1
