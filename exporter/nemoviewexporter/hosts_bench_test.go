// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoviewexporter

import (
	"fmt"
	"net/http/httptest"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// BenchmarkFleet: the heap /hosts takes per host at max_hosts (10,000
// hosts), with 20 runs each in the window (KB/host) and with the most runs
// it remembers (KB/host-full), and the time to build /api/hosts at
// 10,000 hosts (ms/report).
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
	var typical, full float64
	f := fill(20)
	for b.Loop() {
		typical, full = perHost(20), perHost(maxHostRuns)
	}
	b.ReportMetric(typical, "KB/host")
	b.ReportMetric(full, "KB/host-full")
	start := time.Now()
	for range 5 {
		f.report(time.Unix(1_000_000, 0), l)
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds())/5, "ms/report")
}

// BenchmarkHostsPageRender: headless chromium opening /hosts over 10,000
// hosts and 1,000 runs (each run on 80 hosts, 10 of them costly in it)
// until its script has drawn the page (the drain list and the costliest
// 500 hosts: ms/render), and that fleet's heap (MiB, in the log). Needs
// Debian's chromium.
func BenchmarkHostsPageRender(b *testing.B) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		b.Skip("chromium not installed (apt-get install chromium)")
	}
	cfg := createDefaultConfig().(*Config)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := newStore(limitsOf(cfg), time.Now)
	now := time.Now()
	for run := range 1000 {
		for h := range 80 {
			host := fmt.Sprintf("node-%05d", (run*80+h*37)%10000)
			for step := range 20 {
				s.fleet.step(host, fmt.Sprintf("run-%04d", run), h < 10 && step < 4, now, s.limits.hosts)
			}
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	heap := float64(after.HeapAlloc-before.HeapAlloc) / (1 << 20)
	srv := httptest.NewServer(newHandler(s, cfg))
	defer srv.Close()
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.UserDataDir(b.TempDir()), chromedp.WindowSize(1366, 900))
	alloc, cancelAlloc := chromedp.NewExecAllocator(b.Context(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	render := chromedp.Steps(chromedp.Navigate(srv.URL+"/hosts"), chromedp.WaitReady(`body[data-rendered="true"]`))
	if err = chromedp.Do(ctx, render); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for b.Loop() {
		if err = chromedp.Do(ctx, chromedp.Navigate("about:blank"), render); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/render")
	b.ReportMetric(heap, "MiB")
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("#hosts tbody tr").length`))
	if err != nil || rows != 500 {
		b.Fatalf("/hosts rows %d (%v), want the costliest 500", rows, err)
	}
}
