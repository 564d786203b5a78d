// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stall

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// statePerRankRuns and statePerRankWorld are the jobs the state is
// measured on: 4 runs of 4,096 ranks, each through statePerRankSteps
// complete steps and into the next.
const (
	statePerRankRuns  = 4
	statePerRankWorld = 4096
	statePerRankSteps = 3
)

// stateSpans is what each rank sends of an iteration, in the order it ends
// them: the detector keeps the latest in step order.
var stateSpans = []string{"megatron.microbatch.forward", "megatron.microbatch.backward", "megatron.forward_backward", "megatron.grad_sync.start"}

// BenchmarkStatePerRank measures the detector's memory per rank
// (runtime.MemStats' live heap, after a collection) once every rank of
// statePerRankRuns runs of statePerRankWorld ranks has completed
// statePerRankSteps steps and ended part of the next one, as in a hang
// (a run's ring of History step durations is per run, a few bytes per
// rank of a large job, and left out). The
// strings a rank's spans carry are allocated per rank, as the OTLP decoder
// allocates them per request. B/rank is the figure the connector's README
// gives.
func BenchmarkStatePerRank(b *testing.B) {
	ranks := statePerRankRuns * statePerRankWorld
	var perRank float64
	for range b.N {
		b.StopTimer()
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()
		d := fillDetector()
		b.StopTimer()
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		perRank += float64(after.HeapAlloc-before.HeapAlloc) / float64(ranks)
		runtime.KeepAlive(d)
		b.StartTimer()
	}
	b.ReportMetric(perRank/float64(b.N), "B/rank")
}

// fillDetector is a detector that follows statePerRankRuns runs of
// statePerRankWorld ranks.
func fillDetector() []*RunState {
	d := New(defaultConfig)
	runs := make([]*RunState, statePerRankRuns)
	for i := range runs {
		runs[i] = d.NewRun(Run(i+1), t0)
	}
	start := t0
	const step = time.Second
	for it := range int64(statePerRankSteps + 1) {
		last := it == statePerRankSteps // the open iteration: no step span
		for run := range Run(statePerRankRuns) {
			for r := range int64(statePerRankWorld) {
				id := Rank{Rank: r, Host: fmt.Sprintf("node%04d", r/8), Process: fmt.Sprintf("run-%d-rank%d", run, r)}
				tr := d.Rank(runs[run], statePerRankWorld, id, start.Add(step))
				for i, name := range stateSpans {
					end := start.Add(time.Duration(i+1) * step / 10)
					tr.Span(Span{Name: strings.Clone(name), Start: start.UnixNano(), End: end.UnixNano()})
				}
				if !last {
					tr.Span(Span{Name: strings.Clone("megatron.train_step"), Start: start.UnixNano(), End: start.Add(step * 9 / 10).UnixNano(), Step: true, Iteration: it})
				}
			}
		}
		start = start.Add(step)
	}
	return runs
}
