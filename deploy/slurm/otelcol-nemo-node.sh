#!/usr/bin/env bash
# Copyright The otelcol-nemo Authors
# SPDX-License-Identifier: Apache-2.0
# One otelcol-nemo on this node for the current job: the task of the
# collector step that nemo-telemetry.sh starts (srun, one task per node).
#
# Refuses to start when one of the job's ports is already taken on the node
# (another job whose id maps to the same ports), runs the collector with its
# output under $NEMO_JOB_TELEMETRY_DIR/<node>/, waits for its health check
# (HTTP 200, read with bash's /dev/tcp: no curl needed) and then writes a
# ready file that otelcol-nemo-ready.sh looks for (or, when it cannot start,
# a failed file with the reason). On SIGTERM (the job script's stop, the
# job's end or scancel) the collector writes everything it acknowledged and
# exits 0; this script exits with the collector's status.
set -euo pipefail

node=${SLURMD_NODENAME:-$(hostname -s)}
node_dir="$NEMO_JOB_TELEMETRY_DIR/$node"
# Status files, one pair per node and start of the job (a requeued job
# keeps its id): .ready holds the healthy collector's pid, .failed the reason
# it did not start. The node's name is in the name: where NEMO_RUNTIME_DIR is
# shared by the nodes, one node's ready file must not stand for another's.
status_file="${NEMO_RUNTIME_DIR:-/tmp}/otelcol-nemo.$SLURM_JOB_ID.${SLURM_RESTART_COUNT:-0}.$node"
ready_file="$status_file.ready"
failed_file="$status_file.failed"
log="$node_dir/collector.log"
mkdir -p "$node_dir"

# Lines go to the node's log first, then to the job's output. No command
# substitution: SLURM signals every process of the step, and a `date` child
# killed by its SIGTERM would end this script (set -e) before it logs the
# collector's exit.
say() {
  local line
  TZ=UTC0 printf -v line '%(%FT%TZ)T otelcol-nemo-node[%s]: %s' -1 "$node" "$*"
  printf '%s\n' "$line" >>"$log"
  printf '%s\n' "$line" >&2 || true
}

fail() {
  say "$*"
  printf '%s\n' "$*" >"$failed_file"
  exit 1
}

port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

healthy() {
  (
    exec 3<>"/dev/tcp/127.0.0.1/$HEALTH_CHECK_PORT" || exit 1
    printf 'GET / HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n' >&3
    IFS=' ' read -r -t 2 _ code _ <&3 || exit 1
    [ "$code" = 200 ]
  ) 2>/dev/null
}

rm -f "$ready_file" "$failed_file"
for port in "$OTLP_GRPC_PORT" "$OTLP_HTTP_PORT" "$HEALTH_CHECK_PORT" "$OTELCOL_METRICS_PORT" ${NEMO_VIEW_PORT:+"$NEMO_VIEW_PORT"}; do
  if port_in_use "$port"; then
    fail "port $port is already in use on $node: set NEMO_PORT_BASE (or the *_PORT variables) for this job"
  fi
done

export NEMO_TELEMETRY_DIR="$node_dir"
# The persistent queues (the agent's spool, the network exporters' queues)
# next to the node's output: one directory per node, never shared by two
# collectors, and left with the job's files when something could not be
# sent before the job ended (the next collector started on it sends it).
export NEMO_QUEUE_DIR="$node_dir/queue"
say "starting $OTELCOL_NEMO_BIN --config=$NEMO_COLLECTOR_CONFIG (OTLP gRPC $OTLP_GRPC_PORT, HTTP $OTLP_HTTP_PORT, health $HEALTH_CHECK_PORT)"
"$OTELCOL_NEMO_BIN" --config="$NEMO_COLLECTOR_CONFIG" >>"$log" 2>&1 &
collector=$!
# SLURM signals every process of the step; forwarding covers a stop sent to
# this script alone. A second SIGTERM does not hurry the collector.
trap 'kill -TERM "$collector" 2>/dev/null || true' TERM INT
trap 'rm -f "$ready_file"' EXIT

deadline=$((SECONDS + ${NEMO_COLLECTOR_START_TIMEOUT:-60}))
until healthy; do
  if ! kill -0 "$collector" 2>/dev/null; then
    status=0
    wait "$collector" || status=$?
    fail "collector exited during start-up with status $status; its log: $log"
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    kill -TERM "$collector" 2>/dev/null || true
    wait "$collector" || true
    fail "collector not healthy after ${NEMO_COLLECTOR_START_TIMEOUT:-60}s; stopped it; its log: $log"
  fi
  sleep 0.2
done
echo "$collector" >"$ready_file"
say "collector $collector healthy"

# wait returns early when a trapped signal arrives: wait again until the
# collector has really exited.
# wait returns early (128 + the signal) when the trapped TERM arrives, while
# the collector is still shutting down; wait again until it has exited. Its
# own status is then what a last wait returns: bash keeps the status of a
# background job it reaped.
while kill -0 "$collector" 2>/dev/null; do
  wait "$collector" || true
done
status=0
wait "$collector" || status=$?
if [ "$status" -lt 0 ] || [ "$status" -eq 143 ]; then
  # wait said -1: bash no longer had the child's status (seen once, in CI,
  # on a step cancelled right after start). Or 143: SLURM's SIGTERM reaches
  # every process of the step, so the collector gets it twice (from SLURM
  # and from the trap above); an idle collector can finish its shutdown in
  # a few milliseconds and be killed by the second one after its last line
  # (seen once, a per-job agent with nothing to drain). Either way the
  # collector's own last line says whether it shut down cleanly, which is
  # what its status 0 means.
  if tail -n 5 "$log" | grep -q 'Shutdown complete\.'; then
    say "collector shut down cleanly (its log says so; wait said $status)"
    status=0
  else
    status=1
  fi
fi
say "collector exited with status $status"
exit "$status"
