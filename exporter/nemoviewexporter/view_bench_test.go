// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoviewexporter

import (
	"net/http/httptest"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
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

// BenchmarkRunPageRender: headless chromium opening the page of a 1,000-rank
// run's last 500 steps until its script has drawn everything (ms/render).
// Needs Debian's chromium.
func BenchmarkRunPageRender(b *testing.B) {
	chromium, err := exec.LookPath("chromium")
	if err != nil {
		b.Skip("chromium not installed (apt-get install chromium)")
	}
	srv := httptest.NewServer(newHandler(filledStore(b), createDefaultConfig().(*Config)))
	defer srv.Close()
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.UserDataDir(b.TempDir()), chromedp.WindowSize(1366, 900))
	alloc, cancelAlloc := chromedp.NewExecAllocator(b.Context(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	page := srv.URL + "/runs/run-bench"
	render := chromedp.Steps(chromedp.Navigate(page), chromedp.WaitReady(`body[data-rendered="true"]`))
	if err = chromedp.Do(ctx, render); err != nil { // warm: the browser started
		b.Fatal(err)
	}
	start := time.Now()
	for b.Loop() {
		if err = chromedp.Do(ctx, chromedp.Navigate("about:blank"), render); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/render")
	// Past 600 ranks a row is a group of ranks: rows x group covers them.
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[int](`(() => { const d = document.getElementById("heatmap").dataset; return +d.rows * +d.group; })()`))
	if err != nil || rows < benchRanks {
		b.Fatalf("heatmap rows x group %d (%v), want %d ranks", rows, err, benchRanks)
	}
}
