// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// BenchmarkRunPageRender: headless chromium opening the page of a
// 1,000-rank run's last 500 steps (the run pages alone, fed its step
// gauges as nemo_steps emits them) until its script has drawn everything
// (ms/render).
func BenchmarkRunPageRender(b *testing.B) {
	const ranks, steps = 1000, 500
	chromium := requireChromium(b)
	c := viewOnly(b, steps)
	for from := 1; from <= steps; from += 50 {
		postMetrics(b, c, bigRunGauges("run-bench", ranks, from, from+49, 7, 10))
	}
	rows := benchRender(b, chromium, fmt.Sprintf("http://127.0.0.1:%d/runs/run-bench", c.ViewPort),
		`(() => { const d = document.getElementById("heatmap").dataset; return +d.rows * +d.group; })()`)
	if rows < ranks {
		b.Fatalf("heatmap rows x group %d, want %d ranks", rows, ranks)
	}
}

// BenchmarkHostsPageRender: headless chromium opening /hosts over 10,000
// hosts and 1,000 runs (each run on 80 hosts, one rank each, 10 of them
// straggling in 4 of its 10 steps: costly) until its script has drawn the
// page: the drain list and the costliest 500 hosts (ms/render).
func BenchmarkHostsPageRender(b *testing.B) {
	chromium := requireChromium(b)
	c := viewOnly(b, 10)
	for run := range 1000 {
		hostOf := func(rank int64) string { return fmt.Sprintf("node-%05d", (int64(run)*80+rank*37)%10000) }
		postMetrics(b, c, runGauges(fmt.Sprintf("run-%04d", run), 80, 1, 10, hostOf, func(rank, it int64) bool { return rank < 10 && it <= 4 }))
	}
	rows := benchRender(b, chromium, fmt.Sprintf("http://127.0.0.1:%d/hosts", c.ViewPort), `document.querySelectorAll("#hosts tbody tr").length`)
	if rows != 500 {
		b.Fatalf("/hosts rows %d, want the costliest 500", rows)
	}
}

// benchRender times opening page until it is drawn (ms/render) and
// returns what check evaluates to on it.
func benchRender(b *testing.B, chromium, page, check string) int {
	b.Helper()
	browser := newBrowser(b, chromium)
	render := chromedp.Steps(chromedp.Navigate(page), chromedp.WaitReady(`body[data-rendered="true"]`))
	if err := chromedp.Do(browser, render); err != nil { // warm: the browser started
		b.Fatal(err)
	}
	start := time.Now()
	for b.Loop() {
		if err := chromedp.Do(browser, chromedp.Navigate("about:blank"), render); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Milliseconds())/float64(b.N), "ms/render")
	n, err := chromedp.Run(browser, chromedp.Evaluate[int](check))
	if err != nil {
		b.Fatal(err)
	}
	return n
}
