# Copyright The otelcol-nemo Authors
# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
# Sourced by a SLURM job script (see nemo-telemetry.sbatch): runs one
# otelcol-nemo per node of the job, beside the training step, and points the
# ranks at it.
#
#   source /opt/otelcol-nemo/slurm/nemo-telemetry.sh
#   trap nemo_telemetry_stop EXIT
#   trap 'exit 143' TERM
#   nemo_telemetry_start        # returns once every node's collector is healthy
#   srun python pretrain_gpt.py ...
#
# nemo_telemetry_start exports, for the ranks (srun passes the environment on):
#   OTEL_EXPORTER_OTLP_ENDPOINT  http://127.0.0.1:<port> (this node's collector)
#   OTEL_EXPORTER_OTLP_PROTOCOL  NEMO_OTLP_PROTOCOL (grpc, or http/protobuf)
#   OTEL_RESOURCE_ATTRIBUTES     + slurm.restart_count, and for job arrays
#                                slurm.array_job.id and slurm.array_task.id
#                                (heterogeneous jobs: slurm.het_job.size)
# Output: $NEMO_TELEMETRY_DIR/$SLURM_JOB_ID/<node>/<run id>/{traces,metrics,logs}.jsonl.zst
# and <node>/collector.log. One directory per node: collectors on different
# nodes never append to the same file (appends over NFS are not atomic).
#
# Settings (environment; defaults in brackets):
#   NEMO_COLLECTOR       job: start a collector per node for this job;
#                        service: the nodes run otelcol-nemo@agent (systemd),
#                        only point the ranks at it (localhost:4317)  [job]
#   NEMO_TELEMETRY_DIR   shared directory for every job's telemetry [$SLURM_SUBMIT_DIR/telemetry]
#   OTELCOL_NEMO_BIN     collector binary           [/opt/otelcol-nemo/bin/otelcol-nemo]
#   NEMO_COLLECTOR_CONFIG  preset                   [/opt/otelcol-nemo/configs/file.yaml]
#   NEMO_SLURM_DIR       where these scripts are    [the directory of this file]
#   NEMO_PORT_BASE, NEMO_PORT_SLOTS  port range     [20000, 2400: ports 20000-31999]
#   OTLP_GRPC_PORT, OTLP_HTTP_PORT, HEALTH_CHECK_PORT, OTELCOL_METRICS_PORT,
#   NEMO_VIEW_PORT
#                        explicit ports; by default derived from SLURM_JOB_ID
#   NEMO_OTLP_PROTOCOL   what the ranks send        [grpc]
#   NEMO_RUN_OVERRIDE    true: every item of this job gets run id
#                        NEMO_LENS_RUN_ID, else SLURM_JOB_ID [true]
#   NEMO_COLLECTOR_START_TIMEOUT, NEMO_COLLECTOR_STOP_TIMEOUT  seconds [60, 25]
#   NEMO_RUNTIME_DIR     node-local dir for the collectors' ready files [/tmp]
#   NEMO_RANK_STRATEGY etc.: passed to the collector (see the preset's header)

: "${NEMO_SLURM_DIR:=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}"
: "${NEMO_TELEMETRY_DIR:=${SLURM_SUBMIT_DIR:-$PWD}/telemetry}"
: "${OTELCOL_NEMO_BIN:=/opt/otelcol-nemo/bin/otelcol-nemo}"
: "${NEMO_COLLECTOR_CONFIG:=/opt/otelcol-nemo/configs/file.yaml}"
: "${NEMO_PORT_BASE:=20000}"
: "${NEMO_PORT_SLOTS:=2400}"
: "${NEMO_OTLP_PROTOCOL:=grpc}"
: "${NEMO_COLLECTOR:=job}"
: "${NEMO_COLLECTOR_START_TIMEOUT:=60}"
: "${NEMO_COLLECTOR_STOP_TIMEOUT:=25}"

# Five ports per job, from the job id: every node of the job uses the same
# ones (the ranks' environment is the same everywhere) and jobs sharing a node
# differ unless their ids are equal modulo NEMO_PORT_SLOTS; a clash is refused
# at start (otelcol-nemo-node.sh). The range stays below Linux's ephemeral
# ports (32768-60999), which outgoing connections take.
nemo_telemetry_env() {
  local base=$((NEMO_PORT_BASE + 5 * (SLURM_JOB_ID % NEMO_PORT_SLOTS)))
  case $NEMO_COLLECTOR in
    job)
      export OTLP_GRPC_PORT=${OTLP_GRPC_PORT:-$base}
      export OTLP_HTTP_PORT=${OTLP_HTTP_PORT:-$((base + 1))}
      export HEALTH_CHECK_PORT=${HEALTH_CHECK_PORT:-$((base + 2))}
      export OTELCOL_METRICS_PORT=${OTELCOL_METRICS_PORT:-$((base + 3))}
      export NEMO_VIEW_PORT=${NEMO_VIEW_PORT:-$((base + 4))}
      ;;
    service) # the agent preset's defaults
      export OTLP_GRPC_PORT=${OTLP_GRPC_PORT:-4317}
      export OTLP_HTTP_PORT=${OTLP_HTTP_PORT:-4318}
      ;;
    *) echo "nemo-telemetry: NEMO_COLLECTOR must be job or service, got $NEMO_COLLECTOR" >&2; return 1 ;;
  esac
  export OTELCOL_LISTEN_HOST=127.0.0.1
  export NEMO_TELEMETRY_DIR NEMO_COLLECTOR_CONFIG OTELCOL_NEMO_BIN NEMO_COLLECTOR_START_TIMEOUT
  export NEMO_RUNTIME_DIR=${NEMO_RUNTIME_DIR:-/tmp}
  export NEMO_JOB_TELEMETRY_DIR="$NEMO_TELEMETRY_DIR/$SLURM_JOB_ID"
  export NEMO_RUN_ID=${NEMO_LENS_RUN_ID:-$SLURM_JOB_ID}
  export NEMO_RUN_OVERRIDE=${NEMO_RUN_OVERRIDE:-true}

  local port=$OTLP_GRPC_PORT
  case $NEMO_OTLP_PROTOCOL in
    grpc) ;;
    http/protobuf) port=$OTLP_HTTP_PORT ;;
    *) echo "nemo-telemetry: NEMO_OTLP_PROTOCOL must be grpc or http/protobuf, got $NEMO_OTLP_PROTOCOL" >&2; return 1 ;;
  esac
  export OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:$port"
  export OTEL_EXPORTER_OTLP_PROTOCOL=$NEMO_OTLP_PROTOCOL

  # A requeued job keeps its id (so its run and directory) and counts up
  # SLURM_RESTART_COUNT; an array task has a job id of its own.
  local attrs="slurm.restart_count=${SLURM_RESTART_COUNT:-0}"
  if [ -n "${SLURM_ARRAY_JOB_ID:-}" ]; then
    attrs+=",slurm.array_job.id=$SLURM_ARRAY_JOB_ID,slurm.array_task.id=$SLURM_ARRAY_TASK_ID"
  fi
  if [ -n "${SLURM_HET_SIZE:-}" ]; then
    attrs+=",slurm.het_job.size=$SLURM_HET_SIZE"
  fi
  export OTEL_RESOURCE_ATTRIBUTES="${OTEL_RESOURCE_ATTRIBUTES:+$OTEL_RESOURCE_ATTRIBUTES,}$attrs"
}

# nemo_telemetry_start starts the collector step (one task per node, sharing
# the job's CPUs and memory, no GPUs) and waits until every node's collector
# answers its health check: ranks started afterwards lose nothing to a
# collector still starting.
nemo_telemetry_start() {
  nemo_telemetry_env || return 1
  if [ "$NEMO_COLLECTOR" = service ]; then
    echo "nemo-telemetry: ranks send to the node's otelcol-nemo service at $OTEL_EXPORTER_OTLP_ENDPOINT" >&2
    return 0
  fi
  # A bare srun in a heterogeneous job reaches the first component only: its
  # other components' ranks would find no collector on their nodes.
  if [ -n "${SLURM_HET_SIZE:-}" ] && [ "$SLURM_HET_SIZE" -gt 1 ]; then
    echo "nemo-telemetry: heterogeneous job: use NEMO_COLLECTOR=service (node agents); per-job collectors cover component 0 only" >&2
    return 1
  fi
  mkdir -p "$NEMO_JOB_TELEMETRY_DIR"
  local nodes=${SLURM_JOB_NUM_NODES:-1}
  local -a step=(srun --overlap --nodes="$nodes" --ntasks="$nodes" --ntasks-per-node=1
    --cpus-per-task=1 --mem=0 --gres=none --kill-on-bad-exit=0)
  "${step[@]}" --job-name=otelcol-nemo "$NEMO_SLURM_DIR/otelcol-nemo-node.sh" </dev/null &
  NEMO_COLLECTOR_STEP_PID=$!
  if ! "${step[@]}" --job-name=otelcol-nemo-ready "$NEMO_SLURM_DIR/otelcol-nemo-ready.sh" </dev/null; then
    echo "nemo-telemetry: a collector did not become healthy; see $NEMO_JOB_TELEMETRY_DIR/*/collector.log" >&2
    nemo_telemetry_stop
    return 1
  fi
  echo "nemo-telemetry: collectors healthy on $nodes node(s); ranks send to $OTEL_EXPORTER_OTLP_ENDPOINT; output in $NEMO_JOB_TELEMETRY_DIR" >&2
}

# nemo_telemetry_stop ends the collector step: SLURM delivers SIGTERM to its
# processes (scancel --signal=TERM on the step), each collector writes what it
# acknowledged and exits 0. SIGTERM to srun itself would not do: srun then
# cancels the step, and its tasks are killed. Waits at most
# NEMO_COLLECTOR_STOP_TIMEOUT seconds, less than SLURM's default KillWait (30).
nemo_telemetry_stop() {
  local pid=${NEMO_COLLECTOR_STEP_PID:-} status=0 waited=0 step
  [ -n "$pid" ] || return 0
  NEMO_COLLECTOR_STEP_PID=
  step=$(squeue --steps --jobs="$SLURM_JOB_ID" --noheader --format='%i %j' 2>/dev/null |
    awk '$2 == "otelcol-nemo" { print $1; exit }') || true
  if [ -z "$step" ] || ! scancel --signal=TERM "$step" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
  fi
  while kill -0 "$pid" 2>/dev/null && [ "$waited" -lt $((NEMO_COLLECTOR_STOP_TIMEOUT * 10)) ]; do
    sleep 0.1
    waited=$((waited + 1))
  done
  if kill -0 "$pid" 2>/dev/null; then
    echo "nemo-telemetry: collector step still running after ${NEMO_COLLECTOR_STOP_TIMEOUT}s; SLURM will kill it" >&2
    return 0
  fi
  wait "$pid" || status=$?
  echo "nemo-telemetry: collector step ended with status $status" >&2
  return 0
}
