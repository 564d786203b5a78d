// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/pmetric/pmetricotlp"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/runrecords"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// bigRunGauges are the step gauges of iterations from to to of a run of
// ranks ranks, 8 a host, as nemo_steps emits them (internal/runrecords:
// every gauge of a rank-step at its step's end, the iteration on the busy
// time point's exemplar); slow computes three times as long on iteration
// slowStep.
func bigRunGauges(run string, ranks, from, to int, slow, slowStep int64) pmetric.Metrics {
	return runGauges(run, ranks, from, to, func(rank int64) string { return fmt.Sprintf("node-%04d", rank/8) },
		func(rank, it int64) bool { return rank == slow && it == slowStep })
}

// runGauges are the step gauges of iterations from to to of a run of ranks
// ranks on the hosts hostOf says; a rank-step slow says computes three
// times as long.
func runGauges(run string, ranks, from, to int, hostOf func(rank int64) string, slow func(rank, it int64) bool) pmetric.Metrics {
	md := pmetric.NewMetrics()
	rm := md.ResourceMetrics().AppendEmpty()
	rm.Resource().Attributes().PutStr(attrkey.RunID, run)
	ms := rm.ScopeMetrics().AppendEmpty().Metrics()
	gauges := map[string]pmetric.NumberDataPointSlice{}
	for _, name := range []string{runrecords.StepDuration, runrecords.StepBusyTime, runrecords.StepRelativeScore} {
		m := ms.AppendEmpty()
		m.SetName(name)
		gauges[name] = m.SetEmptyGauge().DataPoints()
	}
	start := time.Now().Add(-time.Hour)
	for it := int64(from); it <= int64(to); it++ {
		ts := pcommon.NewTimestampFromTime(start.Add(time.Duration(it) * time.Second))
		for rank := range int64(ranks) {
			busy, rel := 0.2, 1.0
			if slow(rank, it) {
				busy, rel = 0.6, 1.0/3
			}
			for name, v := range map[string]float64{runrecords.StepDuration: 0.65, runrecords.StepBusyTime: busy, runrecords.StepRelativeScore: rel} {
				dp := gauges[name].AppendEmpty()
				dp.SetTimestamp(ts)
				dp.SetDoubleValue(v)
				dp.Attributes().PutStr(attrkey.RunID, run)
				dp.Attributes().PutInt(attrkey.DLRank, rank)
				dp.Attributes().PutStr(attrkey.HostName, hostOf(rank))
				if name == runrecords.StepBusyTime {
					dp.Exemplars().AppendEmpty().FilteredAttributes().PutInt(runrecords.StepIteration, it)
				}
			}
		}
	}
	return md
}

// heatmapState is what the test reads of the heatmap.
type heatmapState struct {
	Rows, Cols, Group, Width, Wrap int
	Marked, Axes                   string
	Slow, Fast                     []int
}

const readHeatmap = `(() => {
  const cv = document.getElementById("heatmap");
  const px = (rank, it) => { const c = window.nemoView.cellCenter(rank, it); return c ? Array.from(cv.getContext("2d").getImageData(c.x, c.y, 1, 1).data.slice(0, 3)) : []; };
  return {Rows: +cv.dataset.rows, Cols: +cv.dataset.cols, Group: +cv.dataset.group, Width: cv.width, Wrap: cv.parentElement.clientWidth,
    Marked: cv.dataset.marked || "", Axes: document.getElementById("heatmap-axes").textContent, Slow: px(%d, 3), Fast: px(%d, 3)};
})()`

// TestHeatmapAtScale: the run pages alone (testdata/view-only.yaml), fed
// a run's step gauges as nemo_steps emits them, at 1,000 and at 10,000
// ranks, one rank three times as slow on iteration 3: headless chromium
// draws a heatmap as wide as the page, at most 600 rows (a row for a
// group of ranks past that, colored by its slowest), the slow rank's cell
// marked and darker than a fast one; a click on the slow rank's row zooms
// in to one row a rank, the slow rank still marked.
func TestHeatmapAtScale(t *testing.T) {
	chromium := requireChromium(t)
	c := viewOnly(t, 10)
	browser := newBrowser(t, chromium)
	shots := screenshotDir(t)
	for _, ranks := range []int{1000, 10000} {
		t.Run(fmt.Sprint(ranks), func(t *testing.T) {
			run := fmt.Sprintf("run-heatmap-%d", ranks)
			slow := int64(ranks*3/4 + 1)
			postMetrics(t, c, bigRunGauges(run, ranks, 1, 5, slow, 3))
			page := fmt.Sprintf("http://127.0.0.1:%d/runs/%s", c.ViewPort, run)
			read := func() heatmapState {
				s, err := chromedp.Run(browser, chromedp.Evaluate[heatmapState](fmt.Sprintf(readHeatmap, slow, slow-100)))
				if err != nil {
					t.Fatal(err)
				}
				return s
			}
			if err := chromedp.Do(browser, chromedp.Navigate(page), chromedp.WaitReady(`body[data-rendered="true"]`)); err != nil {
				t.Fatal(err)
			}
			got := read()
			screenshot(browser, t, filepath.Join(shots, fmt.Sprintf("heatmap-%d.png", ranks)))
			group := (ranks + 599) / 600
			if got.Group != group || got.Rows != (ranks+group-1)/group || got.Cols != 5 {
				t.Errorf("%d ranks: %d rows of %d ranks, %d columns; want rows of %d ranks, 5 columns", ranks, got.Rows, got.Group, got.Cols, group)
			}
			if got.Width < got.Wrap*9/10 {
				t.Errorf("the heatmap is %d px wide in %d px", got.Width, got.Wrap)
			}
			want := fmt.Sprintf("%d@3", slow)
			if got.Marked != want || len(got.Slow) != 3 || len(got.Fast) != 3 || got.Slow[0]+got.Slow[1]+got.Slow[2] >= got.Fast[0]+got.Fast[1]+got.Fast[2] {
				t.Errorf("marked %q (want %s); slow cell %v, fast cell %v (want it darker)", got.Marked, want, got.Slow, got.Fast)
			}
			// Zoom in: a click on the slow rank's row.
			cell := fmt.Sprintf(`window.nemoView.cellCenter(%d, 3)`, slow)
			if err := chromedp.Do(browser, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`(() => { const c = %s, cv = document.getElementById("heatmap"), b = cv.getBoundingClientRect();
			  const at = {clientX: b.left + c.x, clientY: b.top + c.y, bubbles: true};
			  cv.dispatchEvent(new MouseEvent("mousemove", at)); cv.dispatchEvent(new MouseEvent("click", at)); })()`, cell))); err != nil {
				t.Fatal(err)
			}
			zoomed := read()
			screenshot(browser, t, filepath.Join(shots, fmt.Sprintf("heatmap-%d-zoomed.png", ranks)))
			if zoomed.Group != 1 || zoomed.Rows != 600 || zoomed.Marked != want || len(zoomed.Slow) != 3 {
				t.Errorf("zoomed: %d rows of %d ranks, marked %q; want 600 rows of 1, %s marked", zoomed.Rows, zoomed.Group, zoomed.Marked, want)
			}
		})
	}
}

// viewOnly starts the run pages alone (testdata/view-only.yaml), keeping
// steps iterations per run.
func viewOnly(tb testing.TB, steps int) *testcollector.Collector {
	tb.Helper()
	return testcollector.Start(tb, filepath.Join(testcollector.RepoRoot(tb), "e2e", "testdata", "view-only.yaml"),
		testcollector.Options{Env: map[string]string{"NEMO_VIEW_MAX_STEPS": strconv.Itoa(steps)}})
}

// postMetrics sends md to c's OTLP/HTTP receiver and fails unless it is
// accepted.
func postMetrics(tb testing.TB, c *testcollector.Collector, md pmetric.Metrics) {
	tb.Helper()
	body, err := pmetricotlp.NewExportRequestFromMetrics(md).MarshalProto()
	if err != nil {
		tb.Fatal(err)
	}
	if status, msg := post(tb, fmt.Sprintf("http://127.0.0.1:%d/v1/metrics", c.HTTPPort), "application/x-protobuf", "", body); status != 200 {
		tb.Fatalf("metrics refused: %d %s", status, msg)
	}
}
