// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/internal/deadletter"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// requireChromium returns the path of Debian's chromium, or skips the test
// when it is missing; NEMO_REQUIRE_CHROMIUM=1 (CI) makes that a failure.
func requireChromium(tb testing.TB) string {
	tb.Helper()
	p, err := exec.LookPath("chromium")
	if err == nil {
		return p
	}
	if os.Getenv("NEMO_REQUIRE_CHROMIUM") == "1" {
		tb.Fatal("NEMO_REQUIRE_CHROMIUM=1, but chromium is not installed (apt-get install chromium)")
	}
	tb.Skip("chromium not installed (apt-get install chromium; NEMO_REQUIRE_CHROMIUM=1 makes this a failure)")
	return ""
}

// newBrowser starts headless chromium for the test (its own profile, no
// sandbox: CI runs as root) and returns a tab's context.
func newBrowser(tb testing.TB, chromium string) context.Context {
	tb.Helper()
	opts := append(slices.Clone(chromedp.DefaultExecAllocatorOptions[:]),
		chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.UserDataDir(tb.TempDir()),
		chromedp.WindowSize(1366, 900), // a laptop screen
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(tb.Context(), opts...)
	ctx, cancel := chromedp.NewContext(alloc)
	tb.Cleanup(func() { cancel(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		tb.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// screenshotDir is where the test leaves its screenshots for a reviewer:
// not a t.TempDir(), which is removed when the test ends.
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "otelcol-nemo-run-pages")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// pageState is what the test reads from a rendered run page.
type pageState struct {
	State      string      `json:"state"`
	Banner     string      `json:"banner"`
	BannerOn   bool        `json:"bannerOn"`
	Rows       int         `json:"rows"`
	Cols       int         `json:"cols"`
	Marked     string      `json:"marked"`
	Stragglers []pageCells `json:"stragglers"`
	Goodput    string      `json:"goodput"`
	GoodputTxt string      `json:"goodputText"`
	Live       string      `json:"live"`
	Slow       []int       `json:"slowPixel"`
	Fast       []int       `json:"fastPixel"`
}

type pageCells struct {
	Rank      string `json:"rank"`
	Iteration string `json:"iteration"`
	Text      string `json:"text"`
}

// readPage reads the page's DOM, and the heatmap's pixels at a straggler's
// cell and at a fast rank's cell of the same iteration.
const readPage = `(() => {
  const cv = document.getElementById("heatmap"), b = document.getElementById("banner");
  const px = (rank, it) => { const c = window.nemoView.cellCenter(rank, it); return c ? Array.from(cv.getContext("2d").getImageData(c.x, c.y, 1, 1).data.slice(0, 3)) : []; };
  const rows = Array.from(document.querySelectorAll("#stragglers tbody tr")).filter((tr) => tr.dataset.rank)
    .map((tr) => ({rank: tr.dataset.rank, iteration: tr.dataset.iteration, text: tr.textContent}));
  const first = rows.length ? +rows[rows.length - 1].iteration : -1;
  return {
    state: document.getElementById("state").textContent, banner: b.textContent, bannerOn: !b.hidden,
    rows: +cv.dataset.rows, cols: +cv.dataset.cols, marked: cv.dataset.marked || "", stragglers: rows,
    goodput: document.getElementById("goodput-text").dataset.goodput || "", goodputText: document.getElementById("goodput-text").textContent,
    live: document.getElementById("goodput-text").dataset.live || "",
    slowPixel: px(%d, first), fastPixel: px(%d, first),
  };
})()`

// TestRunPageInAHeadlessBrowser: the default preset as committed serves the
// run pages; headless chromium renders them. The goodput test's run (4
// synchronous ranks on two hosts, rank 2 slower on iterations 3 to 8, a
// hang in 14 where rank 1 on gp-node-a stops, a relaunch): the run is
// listed; the heatmap has a row per rank and rank 2's straggler steps are
// outlined and darker than a fast rank's; the straggler steps named are
// the ones rank_strategy kept; while hung, the banner names rank 1 and
// gp-node-a, and goodput shows, live, before any goodput record; at the
// end the goodput shown is the final nemo.run.goodput record's;
// the saved page renders from disk alone. Screenshots of each page are
// left for a reviewer (the path is logged). In both taxonomies and trace
// shapes.
func TestRunPageInAHeadlessBrowser(t *testing.T) {
	chromium := requireChromium(t)
	env := testEnv(t)
	delete(env, "NEMO_RANK_STRATEGY") // the preset's default: the export rank and the stragglers
	env["NEMO_STALL_AFTER"] = stallAfter.String()
	env["NEMO_STRAGGLER_WAIT"] = "2s"
	c := testcollector.Start(t, testcollector.Config(t, "file.yaml"), testcollector.Options{Env: env})
	dir := env["NEMO_TELEMETRY_DIR"]
	base := fmt.Sprintf("http://127.0.0.1:%d", c.ViewPort)
	browser := newBrowser(t, chromium)
	shots := screenshotDir(t)
	t.Logf("screenshots: %s", shots)

	for _, name := range slices.Sorted(func(yield func(string) bool) {
		for k := range stallShapes {
			if !yield(k) {
				return
			}
		}
	}) {
		t.Run(name, func(t *testing.T) {
			run := runName("run-page", name)
			first, second := goodputRun(c, run, stallShapes[name])
			runJob(t, first)
			stallRecords(t, dir, run, "nemo.run.stalled")
			page := base + "/runs/" + url.PathEscape(run)
			file := strings.ReplaceAll(name, "/", "-")

			// While hung.
			var hung pageState
			waitPage(browser, t, page, 2, 3, func(p pageState) bool { return p.BannerOn }, &hung)
			screenshot(browser, t, filepath.Join(shots, file+"-hung.png"))
			if !strings.Contains(hung.Banner, "rank 1 ") || !strings.Contains(hung.Banner, "gp-node-a") || !strings.HasPrefix(hung.State, "stalled") {
				t.Errorf("while hung: state %q, banner %q; want stalled, naming rank 1 on gp-node-a", hung.State, hung.Banner)
			}
			if hung.Rows != 4 {
				t.Errorf("heatmap rows %d, want one per rank (4)", hung.Rows)
			}
			// Goodput is live: from the metrics of every tick, long before the
			// first record (goodput::interval, 5 minutes, or the run's end).
			if g, err := strconv.ParseFloat(hung.Goodput, 64); err != nil || g <= 0 || g > 1 || hung.Live != "true" {
				t.Errorf("while hung: goodput %q (live %q), want the live goodput so far: %q", hung.Goodput, hung.Live, hung.GoodputTxt)
			}

			// The straggler steps: rank 2's, those rank_strategy kept.
			kept := keptStragglerSteps(t, dir, run)
			var shown []string
			for _, s := range hung.Stragglers {
				shown = append(shown, s.Rank+"@"+s.Iteration)
				if !strings.Contains(s.Text, "gp-node-b") {
					t.Errorf("straggler row %q does not name rank %s's host gp-node-b", s.Text, s.Rank)
				}
			}
			slices.Sort(shown)
			if len(kept) == 0 || !slices.Equal(shown, kept) {
				t.Errorf("straggler steps on the page %v, kept by rank_strategy %v", shown, kept)
			}
			marked := strings.Fields(hung.Marked)
			slices.Sort(marked)
			if !slices.Equal(marked, kept) {
				t.Errorf("heatmap cells outlined %v, want the straggler steps %v", marked, kept)
			}
			if len(hung.Slow) != 3 || len(hung.Fast) != 3 || slices.Equal(hung.Slow, hung.Fast) {
				t.Errorf("heatmap pixels: straggler %v, fast rank %v; want different colors", hung.Slow, hung.Fast)
			}

			checkTimeline(browser, t, page, base, run, filepath.Join(shots, file+"-timeline.png"))

			// After the relaunch, to the end.
			runJob(t, second)
			final := finalGoodput(t, dir, run)
			var ended pageState
			waitPage(browser, t, page, 2, 3, func(p pageState) bool { return p.State == "ended" }, &ended)
			screenshot(browser, t, filepath.Join(shots, file+"-ended.png"))
			if !sameNumber(ended.Goodput, final) {
				t.Errorf("goodput on the page %q, the final nemo.run.goodput record's %s", ended.Goodput, final)
			}
			if ended.BannerOn {
				t.Errorf("the banner still shows after the run ended: %q", ended.Banner)
			}

			// The list of runs.
			if err := chromedp.Do(browser, chromedp.Navigate(base+"/"), chromedp.WaitReady(`body[data-rendered="true"]`)); err != nil {
				t.Fatal(err)
			}
			listed, err := chromedp.Run(browser, chromedp.Evaluate[bool](fmt.Sprintf(`!!document.querySelector('#runs tr[data-key=%q] a[href="/runs/%s"]')`, run, url.PathEscape(run))))
			if err != nil {
				t.Fatal(err)
			}
			screenshot(browser, t, filepath.Join(shots, file+"-runs.png"))
			if !listed {
				t.Errorf("run %s not listed on / with a link to its page", run)
			}

			// The saved page, opened from disk.
			saved := filepath.Join(shots, file+"-saved.html")
			download(t, page+"?save=1", saved)
			var fromDisk pageState
			waitPage(browser, t, "file://"+saved, 2, 3, func(p pageState) bool { return p.Rows > 0 }, &fromDisk)
			if fromDisk.Rows != 4 || !sameNumber(fromDisk.Goodput, final) {
				t.Errorf("saved page from disk: %d rows, goodput %q; want 4 and %s", fromDisk.Rows, fromDisk.Goodput, final)
			}

			checkDeadLetterLine(browser, t, page, dir, run, filepath.Join(shots, file+"-dead-letters.png"))
		})
	}
}

// checkDeadLetterLine: no line while the run has no dead letters; once a
// network exporter wrote one (here the writer nemo_otlp and the spool use,
// into the preset's NEMO_TELEMETRY_DIR), the page says so in its stalls
// area, naming the destination and the replay preset.
func checkDeadLetterLine(browser context.Context, t *testing.T, page, dir, run, shot string) {
	t.Helper()
	line := func() (string, bool) {
		if err := chromedp.Do(browser, chromedp.Navigate(page), chromedp.WaitReady(`body[data-rendered="true"]`)); err != nil {
			t.Fatalf("render %s: %v", page, err)
		}
		text, err := chromedp.Run(browser, chromedp.Evaluate[string](`document.getElementById("dead-letters").hidden ? "" : document.getElementById("dead-letters").textContent`))
		if err != nil {
			t.Fatal(err)
		}
		return text, text != ""
	}
	if text, shown := line(); shown {
		t.Errorf("a dead-letter line without dead letters: %q", text)
	}
	cfg := deadletter.NewDefaultConfig()
	cfg.Directory = dir
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("nemo.run.id", run)
	rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("megatron.train_step")
	if err := deadletter.Write(deadletter.NewWriter(cfg, "nemo_otlp/honeycomb", zap.NewNop(), func(deadletter.Reason, int) {}), deadletter.Traces, td, deadletter.Refused, "HTTP 401"); err != nil {
		t.Fatal(err)
	}
	text, shown := line()
	screenshot(browser, t, shot)
	if !shown || !strings.Contains(text, "nemo_otlp_honeycomb (traces)") || !strings.Contains(text, "configs/replay.yaml") {
		t.Errorf("the page's dead-letter line %q: want it naming nemo_otlp_honeycomb (traces) and configs/replay.yaml", text)
	}
}

// waitPage opens url until the rendered page satisfies ok, reading it with
// readPage (slow and fast: the ranks whose cells' pixels are read).
func waitPage(browser context.Context, t *testing.T, url string, slow, fast int, ok func(pageState) bool, into *pageState) {
	t.Helper()
	var last pageState
	waitFor(t, deliveryTimeout, "the page "+url, func() bool {
		if err := chromedp.Do(browser, chromedp.Navigate(url), chromedp.WaitReady(`body[data-rendered="true"]`)); err != nil {
			t.Fatalf("render %s: %v", url, err)
		}
		p, err := chromedp.Run(browser, chromedp.Evaluate[pageState](fmt.Sprintf(readPage, slow, fast)))
		if err != nil {
			t.Fatalf("read %s: %v", url, err)
		}
		last = p
		return ok(p)
	})
	*into = last
}

func screenshot(browser context.Context, t *testing.T, path string) {
	t.Helper()
	png, err := chromedp.Run(browser, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil { //nolint:gosec // G306: a screenshot for a reviewer
		t.Fatal(err)
	}
}

func download(t *testing.T, url, path string) {
	t.Helper()
	resp, err := http.Get(url) //nolint:gosec,noctx // G107: the test's own collector
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %v %s", url, err, resp.Status)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil { //nolint:gosec // G306: a page for a reviewer
		t.Fatal(err)
	}
}

// keptStragglerSteps are the "rank@iteration" of the step spans
// rank_strategy kept as stragglers in the run's traces, sorted.
func keptStragglerSteps(t *testing.T, dir, run string) []string {
	t.Helper()
	var kept []string
	for _, s := range readTelemetry(t, filepath.Join(dir, run)).SpanRecords {
		attrs := s.attributes()
		it, isStep := attrs["megatron.iteration"].(json.Number)
		if !isStep || attrs["nemo.rank_strategy.kept_reason"] != "straggler" || !strings.HasPrefix(s.str("name"), "megatron.train") {
			continue
		}
		kept = append(kept, fmt.Sprintf("%d@%s", s.rank(), it))
	}
	slices.Sort(kept)
	return slices.Compact(kept)
}

// sameNumber: two decimal strings of the same float64.
func sameNumber(a, b string) bool {
	x, errA := strconv.ParseFloat(a, 64)
	y, errB := strconv.ParseFloat(b, 64)
	return errA == nil && errB == nil && x == y
}

// finalGoodput waits for the run's final nemo.run.goodput record and
// returns its nemo.goodput as written.
func finalGoodput(t *testing.T, dir, run string) string {
	t.Helper()
	return waitFinalGoodput(t, dir, run).attributes()["nemo.goodput"].(json.Number).String()
}

// timelineRow is a row of the page's step timeline.
type timelineRow struct {
	Rank string  `json:"rank"`
	Role string  `json:"role"`
	FB   float64 `json:"fb"`
	Bars int     `json:"bars"`
}

// checkTimeline opens the newest straggler step of the goodput run (rank 2
// on gp-node-b, computing 3 s where the others compute 2 s) as a
// timeline from its row: the straggler's row first, its forward_backward
// bar half again as long as the export rank's (rank 3), a median rank's
// row from the step metrics; the Chrome trace download has a thread per
// row and the straggler's forward_backward of 3 s.
func checkTimeline(browser context.Context, t *testing.T, page, base, run, shot string) {
	t.Helper()
	if err := chromedp.Do(browser, chromedp.Navigate(page), chromedp.WaitReady(`body[data-rendered="true"]`),
		chromedp.Click(`#stragglers tbody tr[data-rank] button.open-timeline`),
		chromedp.WaitVisible(`#timeline .tl-row`)); err != nil {
		t.Fatalf("open a straggler step's timeline: %v", err)
	}
	rows, err := chromedp.Run(browser, chromedp.Evaluate[[]timelineRow](`Array.from(document.querySelectorAll("#timeline .tl-row")).map((r) => {
	  const fb = r.querySelector('.tl-bar[data-name="megatron.forward_backward"]');
	  return {rank: r.dataset.rank, role: r.dataset.role, fb: fb ? +fb.dataset.ms : 0, bars: r.querySelectorAll(".tl-bar").length};
	})`))
	if err != nil {
		t.Fatal(err)
	}
	screenshot(browser, t, shot)
	if len(rows) != 3 || rows[0].Rank != "2" || rows[0].Role != "straggler" || rows[1].Rank != "3" || rows[1].Role != "export" || rows[2].Role != "median" {
		t.Fatalf("timeline rows %+v, want the straggler (rank 2), the export rank (3), a median rank", rows)
	}
	if got := rows[0].FB / rows[1].FB; math.Abs(got-1.5) > 0.01 {
		t.Errorf("the straggler's forward_backward %.0f ms, the export rank's %.0f ms: ratio %.3f, want 1.5", rows[0].FB, rows[1].FB, got)
	}
	iteration, err := chromedp.Run(browser, chromedp.Evaluate[string](`document.getElementById("timeline-iteration").textContent`))
	if err != nil {
		t.Fatal(err)
	}
	var trace struct {
		TraceEvents []struct {
			Name string  `json:"name"`
			Ph   string  `json:"ph"`
			Tid  int64   `json:"tid"`
			Dur  float64 `json:"dur"`
		} `json:"traceEvents"`
	}
	getJSON(t, fmt.Sprintf("%s/api/runs/%s/steps/%s/trace.json", base, url.PathEscape(run), iteration), &trace)
	threads := map[int64]bool{}
	var fb float64
	for _, ev := range trace.TraceEvents {
		if ev.Ph == "M" && ev.Name == "thread_name" {
			threads[ev.Tid] = true
		}
		if ev.Ph == "X" && ev.Tid == 2 && ev.Name == "megatron.forward_backward" {
			fb = ev.Dur
		}
	}
	if len(threads) != 3 || math.Abs(fb-3e6) > 1e3 {
		t.Errorf("Chrome trace: %d threads, the straggler's forward_backward %.0f µs; want 3 and 3,000,000", len(threads), fb)
	}
}
