// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package goodput

import (
	"fmt"
	"runtime"
	"testing"
)

// liveBytes is the heap that fill leaves live, after a collection.
func liveBytes(fill func() any) float64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	kept := fill()
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	return float64(after.HeapAlloc) - float64(before.HeapAlloc)
}

// BenchmarkGoodputStatePerRank: what one rank of a run costs in its account
// (its process identity, its job span's end and its straggler time): 16
// runs of 4,096 ranks, each rank with a process identity as the
// connector builds it, a job span and straggler time, no step kept.
func BenchmarkGoodputStatePerRank(b *testing.B) {
	const runs, world = 16, 4096
	var perRank float64
	for range b.N {
		perRank += liveBytes(func() any {
			out := make([]*Run, runs)
			for i := range out {
				r := NewRun(DefaultLimits)
				for rank := range int64(world) {
					p := r.Process(rank, fmt.Sprintf("instance-%08d-run-%d\x00%d\x00node%04d", rank, i, 10_000+rank, rank/8))
					p.Span(SpanJob, s(0), s(10))
					r.stragglerBy[rank] = 1
				}
				out[i] = r
			}
			return out
		}) / (runs * world)
	}
	b.ReportMetric(perRank/float64(b.N), "B/rank")
}

// BenchmarkGoodputStatePerStep: what one decided step not settled yet costs (a
// run keeps those between two checkpoint saves, at most Limits.Steps), with
// its spans' extent: one run of 2 ranks and 50,000 steps.
func BenchmarkGoodputStatePerStep(b *testing.B) {
	const steps = 50_000
	var perStep float64
	for range b.N {
		perStep += liveBytes(func() any {
			j := newJob(2)
			j.steps(1, steps, 0, 1, 0.1)
			return j
		}) / steps
	}
	b.ReportMetric(perStep/float64(b.N), "B/step")
}
