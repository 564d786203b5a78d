// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoviewexporter

import (
	"fmt"
	"runtime"
	"testing"
	"time"
)

// BenchmarkFleet: the heap /hosts takes per host at max_hosts (10,000
// hosts), with 20 runs each in the window (KB/host) and with the most runs
// it remembers (KB/host-full); the heap of 10,000 hosts over 1,000 runs
// (each run on 80 hosts, 10 of them costly: MiB-1000-runs); the time to
// build /api/hosts at 10,000 hosts (ms/report). Opening /hosts in a
// browser: e2e's BenchmarkHostsPageRender.
func BenchmarkFleet(b *testing.B) {
	l := limitsOf(createDefaultConfig().(*Config)).hosts
	fill := func(runs int) *fleet {
		f := newFleet()
		now := time.Unix(1_000_000, 0)
		for h := range l.maxHosts {
			host := fmt.Sprintf("node-%05d", h)
			for r := range runs {
				f.step(host, fmt.Sprintf("run-%06d", r), r%7 == 0, now, l)
			}
		}
		return f
	}
	perHost := func(runs int) float64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f := fill(runs)
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(f)
		return float64(after.HeapAlloc-before.HeapAlloc) / float64(l.maxHosts) / 1024
	}
	fleetOfRuns := func() float64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f := newFleet()
		now := time.Now()
		for run := range 1000 {
			for h := range 80 {
				host := fmt.Sprintf("node-%05d", (run*80+h*37)%10000)
				for step := range 20 {
					f.step(host, fmt.Sprintf("run-%04d", run), h < 10 && step < 4, now, l)
				}
			}
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(f)
		return float64(after.HeapAlloc-before.HeapAlloc) / (1 << 20)
	}
	var typical, full, runs float64
	f := fill(20)
	for b.Loop() {
		typical, full, runs = perHost(20), perHost(maxHostRuns), fleetOfRuns()
	}
	b.ReportMetric(typical, "KB/host")
	b.ReportMetric(full, "KB/host-full")
	b.ReportMetric(runs, "MiB-1000-runs")
	start := time.Now()
	for range 5 {
		f.report(time.Unix(1_000_000, 0), l)
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds())/5, "ms/report")
}
