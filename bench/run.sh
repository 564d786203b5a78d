#!/usr/bin/env bash
# Copyright The otelcol-nemo Authors
# SPDX-License-Identifier: Apache-2.0
# Benchmarks of otelcol-nemo (`make bench`): the Go micro-benchmarks of every
# package that has some (go test -bench, -count 6, summarised by benchstat),
# then the system scenarios against the built binary (bench/scenarios_test.go
# with -full) and the 10-minute soak of the stall detector, which write
# BENCHMARKS.md at the repository root. Raw output goes to bench/out/.
#
# Usage: bench/run.sh [-smoke]
#   -smoke   one iteration of each micro-benchmark, ~2 s per scenario and an 8 s soak; no report.
# Environment:
#   BENCH_PHASE   length of one scenario load phase (default 12s)
#   BENCH_COUNT   -count of the micro-benchmarks (default 6: benchstat needs 6
#                 samples for a 95% confidence interval)
#   BENCH_TIME    -benchtime of the micro-benchmarks (default 200ms)
#   BENCH_ONLY    comma-separated scenarios to run (default all)
#   BENCH_SOAK    how long the soak's jobs train (default 10m)
#   BENCH_E2E_COUNT  -count of e2e's micro-benchmarks (default 1: each
#                 iteration is a whole two-tier run of its own, 10 s of load
#                 and a drain; ScaleOut's eight take about 4 minutes)
#   BENCH_ROUNDS  rounds of the preset comparisons' 100k/s phase (and of the
#                 default preset and its ceiling at saturation), alternating
#                 between them (default 3; the median round is reported)
#   BENCH_BUDGET  seconds the whole run may take (default 2430, 41 minutes)
#   BENCH_SCENARIO_RESERVE  seconds of it kept for the scenarios, their rounds
#                 and the soak (default 1830: 640 for the scenarios, 470 for
#                 the rounds (2 more of 10 alternated 22-second phases), 720
#                 for the soak)
#
# Everything it starts runs under `timeout`, in a process group of its own
# that is killed when the budget runs out or the script is interrupted.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
out=bench/out
mkdir -p "$out"

smoke=0
case "${1:-}" in
  -smoke) smoke=1 ;;
  "") ;;
  *) echo "usage: bench/run.sh [-smoke]" >&2; exit 2 ;;
esac

phase=${BENCH_PHASE:-12s}
count=${BENCH_COUNT:-6}
benchtime=${BENCH_TIME:-200ms}
# Seconds kept for the scenarios (about 22 s per phase of 12 s; 28 phases)
# and the soak (its training, a collector's start and drain); the
# micro-benchmarks get the rest.
scenario_reserve=${BENCH_SCENARIO_RESERVE:-1830}
soak=${BENCH_SOAK:-10m}
only=${BENCH_ONLY:-}
budget=${BENCH_BUDGET:-2430}
e2e_count=${BENCH_E2E_COUNT:-1}
rounds=${BENCH_ROUNDS:-3}
benchstat=golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
go=${GO:-go}
start=$(date +%s)

if [[ ! -x _build/otelcol-nemo ]]; then
  echo "bench: _build/otelcol-nemo not found: run make build (make bench does)" >&2
  exit 1
fi

child=
# run_bounded SECONDS CMD...: runs CMD under timeout (its own process group,
# killed as a whole at the deadline) and waits for it.
run_bounded() {
  local secs=$1; shift
  timeout -k 15s "${secs}s" "$@" &
  child=$!
  local rc=0
  wait "$child" || rc=$?
  child=
  return "$rc"
}
trap 'if [[ -n "$child" ]]; then kill -TERM "$child" 2>/dev/null || true; wait "$child" 2>/dev/null || true; fi; exit 130' INT TERM

remaining() { echo $(( budget - ($(date +%s) - start) )); }

# Packages with benchmarks (a *_test.go declaring func Benchmark...), in
# each module: the root, e2e/ and bench/ are modules of their own, and one
# `go test` runs the packages of one module. e2e's two-tier benchmarks take
# minutes, so they run last, in what the others leave of the budget.
modules=(bench . e2e)
declare -A bench_pkgs
for mod in "${modules[@]}"; do
  found=$($go -C "$mod" list -f '{{.ImportPath}} {{.Dir}}' ./... | while read -r pkg dir; do
    if grep -qs '^func Benchmark' "$dir"/*_test.go; then echo "$pkg"; fi
  done)
  bench_pkgs[$mod]=$found
done

all_pkgs=()
for mod in "${modules[@]}"; do all_pkgs+=(${bench_pkgs[$mod]}); done
echo "== micro-benchmarks: ${all_pkgs[*]:-none}"
micro_raw=$out/micro.txt
micro_sum=$out/micro-benchstat.txt
if [[ ${#all_pkgs[@]} -gt 0 ]]; then
  if [[ $smoke -eq 1 ]]; then
    bench_flags=(-benchtime 1x -count 1)
  else
    bench_flags=(-count "$count" -benchtime "$benchtime")
  fi
  micro_budget=$(( $(remaining) - scenario_reserve ))
  [[ $micro_budget -ge 120 ]] || micro_budget=120
  micro_end=$(( $(date +%s) + micro_budget ))
  : > "$micro_raw"
  for mod in "${modules[@]}"; do
    [[ -n "${bench_pkgs[$mod]}" ]] || continue
    mapfile -t pkgs <<<"${bench_pkgs[$mod]}"
    # The modules share the micro-benchmarks' budget.
    left=$(( micro_end - $(date +%s) ))
    if [[ $left -lt 30 ]]; then
      echo "bench: no time left for the micro-benchmarks of ${pkgs[*]}" | tee -a "$micro_raw" >&2
      continue
    fi
    flags=("${bench_flags[@]}")
    if [[ $mod == e2e && $smoke -eq 0 ]]; then
      flags=(-count "$e2e_count" -benchtime "$benchtime")
    fi
    if ! run_bounded "$left" $go -C "$mod" test -run '^$' -bench . -benchmem "${flags[@]}" -timeout "${left}s" "${pkgs[@]}" > >(tee -a "$micro_raw") 2>&1; then
      echo "bench: micro-benchmarks of ${pkgs[*]} failed or ran out of the ${micro_budget}s" | tee -a "$micro_raw" >&2
    fi
  done
  if run_bounded 180 $go run "$benchstat" "$micro_raw" > "$micro_sum" 2> "$out/benchstat.err"; then
    cat "$micro_sum"
  else
    echo "bench: benchstat unavailable ($(head -1 "$out/benchstat.err")); the report shows the raw output" >&2
    cp "$micro_raw" "$micro_sum"
  fi
else
  echo "no package has benchmarks" > "$micro_sum"
fi

scen_budget=$(( $(remaining) - 20 ))
if [[ $scen_budget -lt 60 ]]; then
  echo "bench: only ${scen_budget}s left for the scenarios" >&2
  exit 1
fi
args=(-json "$root/$out/scenarios.json")
[[ -n "$only" ]] && args+=(-only "$only")
if [[ $smoke -eq 1 ]]; then
  echo "== scenarios (smoke)"
else
  echo "== scenarios (${phase} per phase, at most ${scen_budget}s)"
  args+=(-full -phase "$phase" -soak "$soak" -rounds "$rounds" -budget "$(( scen_budget - 30 ))s" -out "$root/BENCHMARKS.md" -micro "$root/$micro_sum")
fi
status=0
run_bounded "$scen_budget" $go -C bench test . -run '^TestScenarios$' -count=1 -v -timeout "$(( scen_budget - 10 ))s" -args "${args[@]}" \
  > >(tee "$out/scenarios.log" | grep --line-buffered -E '^(=== RUN|--- |    scenarios_test|ok|FAIL|PASS)') 2>&1 || status=$?
echo "== done in $(( $(date +%s) - start ))s"
if [[ $status -ne 0 ]]; then
  echo "bench: the scenarios failed (exit $status): see $out/scenarios.log" >&2
  exit "$status"
fi
[[ $smoke -eq 1 ]] || echo "wrote BENCHMARKS.md and $out/scenarios.json"
