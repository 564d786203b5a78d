// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoviewexporter

import (
	"runtime"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"
)

const (
	benchRanks = 1000
	benchSteps = 500
)

// stepBatch is one iteration of a benchRanks-rank run, as nemo_steps sends
// it: every rank's step gauges (rank 7 slow on every tenth iteration).
func stepBatch(run string, iteration int64) pmetric.Metrics {
	md := pmetric.NewMetrics()
	for rank := range int64(benchRanks) {
		busy, rel := 0.2+float64(rank%13)/1000, 1.0
		if rank == 7 && iteration%10 == 0 {
			busy, rel = 0.6, 0.33
		}
		stepPoints(md, run, rank, iteration, "node-"+string(rune('a'+rank/8%26)), busy, rel)
	}
	return md
}

// filledStore holds one run of benchRanks ranks and benchSteps steps, with
// the presets' limits.
func filledStore(tb testing.TB) *store {
	tb.Helper()
	cfg := createDefaultConfig().(*Config)
	s := newStore(limitsOf(cfg), time.Now)
	for it := int64(1); it <= benchSteps; it++ {
		s.addMetrics(stepBatch("run-bench", it))
	}
	return s
}

// BenchmarkStoreMemory: the heap a 1,000-rank run's last 500 steps take
// (MiB/run), and the time to take one rank step (ns/rank-step).
func BenchmarkStoreMemory(b *testing.B) {
	batches := make([]pmetric.Metrics, 20)
	for i := range batches {
		batches[i] = stepBatch("run-bench", int64(i+1))
	}
	var before, after runtime.MemStats
	var kept *store
	for b.Loop() {
		runtime.GC()
		runtime.ReadMemStats(&before)
		kept = filledStore(b)
		runtime.GC()
		runtime.ReadMemStats(&after)
	}
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB/run")
	runtime.KeepAlive(kept)

	s := newStore(limitsOf(createDefaultConfig().(*Config)), time.Now)
	start := time.Now()
	const rounds = 10
	for range rounds {
		for _, md := range batches {
			s.addMetrics(md)
		}
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(rounds*len(batches)*benchRanks), "ns/rank-step")
}
