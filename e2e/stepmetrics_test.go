// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/otlpsink"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// stepGauges are the nemo_steps processor's per rank and step metrics.
var stepGauges = []string{"nemo.step.duration", "nemo.step.busy_time", "nemo.step.wait_time", "nemo.step.relative_score", "nemo.step.individual_score"}

const (
	stepRanks    = 16
	stepCount    = 4
	slowRank     = 5
	slowStep     = stepCount // the last, so that Prometheus' last value is the slow one
	stepsRunID   = "run-step-metrics"
	stepSlowdown = 3
)

// slowJob is a synchronous 16-rank job in which rank 5 computes three times
// as long on the last step and every other rank waits for it in grad sync,
// its steps named stepName, each its own trace root when roots.
func slowJob(c *testcollector.Collector, stepName string, roots bool) []lensemu.Rank {
	ranks := mixedJob(c, stepsRunID, stepRanks, stepCount)
	for i := range ranks {
		ranks[i].StepSpanName, ranks[i].StepsAreRoots = stepName, roots
	}
	ranks[slowRank].ComputeDuration = func(it int) time.Duration {
		if it == slowStep {
			return stepSlowdown * lensemu.DefaultComputeDuration
		}
		return lensemu.DefaultComputeDuration
	}
	return ranks
}

// TestStepMetricsInTheFilePreset: the default preset as committed (single_rank,
// so the traces keep one rank) writes every rank's step timing to the run's
// metrics.jsonl: one point per rank, step and metric, busy time = compute +
// optimizer, and on the slow step rank 5 alone scores below the threshold.
// Both Megatron step names and both trace shapes.
func TestStepMetricsInTheFilePreset(t *testing.T) {
	for _, tc := range []struct {
		stepName string
		roots    bool
	}{{"megatron.train_step", false}, {"megatron.train.iteration", true}} {
		t.Run(fmt.Sprintf("%s roots=%v", tc.stepName, tc.roots), func(t *testing.T) { checkStepMetricsInFiles(t, tc.stepName, tc.roots) })
	}
}

func checkStepMetricsInFiles(t *testing.T, stepName string, roots bool) {
	env := testEnv(t)
	delete(env, "NEMO_RANK_STRATEGY")
	c := testcollector.Start(t, testcollector.Config(t, "file.yaml"), testcollector.Options{Env: env})
	runJob(t, slowJob(c, stepName, roots))
	c.Stop()

	got := readTelemetry(t, env["NEMO_TELEMETRY_DIR"])
	var stragglers []int64
	points := stepGaugePoints(t, got, func(p record) {
		if run, _ := p.resource()["nemo.run.id"].(string); run != stepsRunID {
			t.Errorf("%s point with resource run %q, want %s (the run's own metrics.jsonl)", p.str("name"), run, stepsRunID)
		}
		if p.str("name") == "nemo.step.stragglers" {
			n, _ := p["value"].(json.Number).Int64()
			stragglers = append(stragglers, n)
			return
		}
		for _, forbidden := range []string{"process.pid", "service.instance.id", "megatron.iteration"} {
			if _, ok := p.attributes()[forbidden]; ok {
				t.Fatalf("%s point carries %s: one series per process or step", p.str("name"), forbidden)
			}
		}
	})
	checkSlowStepGauges(t, points)
	if len(stragglers) == 0 || stragglers[len(stragglers)-1] != 1 {
		t.Errorf("nemo.step.stragglers of the run: %v, want ending at 1", stragglers)
	}
	// The traces are what single_rank keeps: rank 15, plus rank 5's slow step.
	if spans := got.ByRank[slowRank].Spans; spans != int64(lensemu.SpansPerStep(2)) {
		t.Errorf("rank %d: %d spans kept, want its slow step's %d", slowRank, spans, lensemu.SpansPerStep(2))
	}
}

// gaugeKey is a step gauge of one rank.
type gaugeKey struct {
	name string
	rank int64
}

// stepGaugePoints are the values of the step gauges (stepGauges) in got,
// by gauge and rank, in the order they were written; every nemo.step.*
// point (the gauges and nemo.step.stragglers) is shown to check first.
func stepGaugePoints(t *testing.T, got telemetry, check func(p record)) map[gaugeKey][]float64 {
	t.Helper()
	points := map[gaugeKey][]float64{}
	for _, p := range got.StepPoints {
		if !strings.HasPrefix(p.str("name"), "nemo.step.") {
			continue // the stall and goodput metrics: e2e/goodput_test.go, stalls_test.go
		}
		if _, ok := p["value"].(json.Number); !ok {
			t.Fatalf("step point without a number value: %v", p)
		}
		check(p)
		if !slices.Contains(stepGauges, p.str("name")) {
			continue
		}
		rn, ok := p.attributes()["nv.dl.rank"].(json.Number)
		if !ok {
			t.Fatalf("%s point without nv.dl.rank: %v", p.str("name"), p)
		}
		r, _ := rn.Int64()
		v, _ := p["value"].(json.Number).Float64()
		points[gaugeKey{p.str("name"), r}] = append(points[gaugeKey{p.str("name"), r}], v)
	}
	return points
}

// checkSlowStepGauges checks slowJob's step gauges: a point per rank, step
// and gauge; on the slow (last) step the busy time one collector measures
// (compute + optimizer; three times the compute for the slow rank), and
// the slow rank alone below the relative threshold.
func checkSlowStepGauges(t *testing.T, points map[gaugeKey][]float64) {
	t.Helper()
	busy := (lensemu.DefaultComputeDuration + lensemu.OptimizerTime).Seconds()
	slowBusy := (stepSlowdown*lensemu.DefaultComputeDuration + lensemu.OptimizerTime).Seconds()
	for _, name := range stepGauges {
		for r := range int64(stepRanks) {
			vs := points[gaugeKey{name, r}]
			if len(vs) != stepCount {
				t.Errorf("%s: rank %d has %d points, want one per step (%d)", name, r, len(vs), stepCount)
				continue
			}
			// Points are written in step order: the last is the slow step.
			last := vs[stepCount-1]
			switch name {
			case "nemo.step.busy_time":
				want := busy
				if r == slowRank {
					want = slowBusy
				}
				if diff := last - want; diff > 0.002 || diff < -0.002 {
					t.Errorf("rank %d busy time on the slow step %.4fs, want %.4fs", r, last, want)
				}
			case "nemo.step.relative_score":
				if slow := r == slowRank; slow != (last < 0.7) {
					t.Errorf("rank %d relative score on the slow step %.3f (slow rank: %v; threshold 0.7)", r, last, slow)
				}
			}
		}
	}
}

// TestStepMetricsOnPrometheus: the fanout preset's Prometheus endpoint has
// one series per rank and step metric (never one per step), named with the
// exporter's unit suffixes, and the slow rank stands out on the slow step.
func TestStepMetricsOnPrometheus(t *testing.T) {
	weave, err := otlpsink.Start(otlpsink.StandardPaths)
	if err != nil {
		t.Fatal(err)
	}
	defer weave.Close()
	promPort := testcollector.FreePort(t)
	env := testEnv(t)
	delete(env, "NEMO_RANK_STRATEGY")
	env["WEAVE_ENDPOINT"] = weave.URL + "/v1/traces"
	env["JAEGER_OTLP_ENDPOINT"] = fmt.Sprintf("127.0.0.1:%d", testcollector.FreePort(t)) // nobody: Jaeger's queue waits
	env["PROMETHEUS_EXPORTER_PORT"] = strconv.Itoa(promPort)
	c := testcollector.Start(t, testcollector.Config(t, "fanout.yaml"), testcollector.Options{Env: env})
	runJob(t, slowJob(c, "megatron.train_step", false))

	names := map[string]string{ // OTel name -> Prometheus name
		"nemo.step.duration":         "nemo_step_duration_seconds",
		"nemo.step.busy_time":        "nemo_step_busy_time_seconds",
		"nemo.step.wait_time":        "nemo_step_wait_time_seconds",
		"nemo.step.relative_score":   "nemo_step_relative_score_ratio",
		"nemo.step.individual_score": "nemo_step_individual_score_ratio",
	}
	scrapeURL := fmt.Sprintf("http://127.0.0.1:%d/metrics", promPort)
	var body []byte
	waitFor(t, deliveryTimeout, "the slow step's scores on the Prometheus endpoint", func() bool {
		body = scrape(scrapeURL)
		v, ok := testcollector.SumMetric(body, "nemo_step_stragglers_total", "nemo_run_id="+stepsRunID)
		return ok && v == 1
	})
	for _, name := range stepGauges {
		series := seriesOf(body, names[name])
		if len(series) != stepRanks {
			t.Errorf("%s: %d series, want one per rank (%d)", names[name], len(series), stepRanks)
		}
	}
	for r := range stepRanks {
		v, ok := testcollector.SumMetric(body, "nemo_step_relative_score_ratio", "nemo_run_id="+stepsRunID, "nv_dl_rank="+strconv.Itoa(r))
		if !ok {
			t.Errorf("no relative score for rank %d", r)
			continue
		}
		if slow := r == slowRank; slow != (v < 0.7) {
			t.Errorf("rank %d relative score %.3f on Prometheus (slow rank: %v)", r, v, slow)
		}
	}
	// The run's goodput, once its job spans ended and its time settled
	// (live before: the goodput at every tick, the time once settled):
	// every category's time, the ratio, and the slow rank's straggler time.
	waitFor(t, deliveryTimeout, "the run's goodput and the slow rank's straggler time on the Prometheus endpoint", func() bool {
		body = scrape(scrapeURL)
		_, ok := testcollector.SumMetric(body, "nemo_run_goodput_ratio", "nemo_run_id="+stepsRunID)
		v, straggler := testcollector.SumMetric(body, "nemo_rank_straggler_time_seconds_total", "nemo_run_id="+stepsRunID, "nv_dl_rank="+strconv.Itoa(slowRank))
		return ok && straggler && v > 0
	})
	if got := len(seriesOf(body, "nemo_run_time_seconds_total")); got != 10 {
		t.Errorf("nemo_run_time_seconds_total: %d series, want one per category (10)", got)
	}
	if v, ok := testcollector.SumMetric(body, "nemo_rank_straggler_time_seconds_total", "nemo_run_id="+stepsRunID, "nv_dl_rank="+strconv.Itoa(slowRank)); !ok || v <= 0 {
		t.Errorf("the slow rank's straggler time: %v (present %v), want more than 0", v, ok)
	}
	own := scrape(fmt.Sprintf("http://127.0.0.1:%d/metrics", c.MetricsPort))
	if len(own) == 0 {
		t.Fatalf("the collector's own metrics endpoint (port %d) answered nothing", c.MetricsPort)
	}
	checkDashboardQueries(t, append(body, own...), stallMetrics...)
	c.Stop()
}

// stallMetrics are the dashboard's stall metrics, which a run has only
// while it is stalled: a healthy run's exposition lacks them, a hung run's
// (the stall e2e test) has them.
var stallMetrics = []string{"nemo_run_stalled", "nemo_rank_behind"}

// dashboardQuery is one query of the Grafana dashboard: a panel's target,
// or a variable's definition (title "variable").
type dashboardQuery struct{ title, expr string }

// dashboardQueries are deploy/grafana/nemo-steps.json's queries; a panel
// that queries nothing fails the test.
func dashboardQueries(t *testing.T) []dashboardQuery {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testcollector.RepoRoot(t), "deploy", "grafana", "nemo-steps.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("deploy/grafana/nemo-steps.json: %v", err)
	}
	var out []dashboardQuery
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q queries nothing", p.Title)
		}
		for _, tg := range p.Targets {
			out = append(out, dashboardQuery{p.Title, tg.Expr})
		}
	}
	for _, v := range dash.Templating.List {
		out = append(out, dashboardQuery{"variable", v.Definition})
	}
	return out
}

// checkDashboardQueries: every metric the Grafana dashboard queries is in
// the exposition (the prometheus exporter's :8889 and the collector's own :8888, from
// a real run), and every label it selects or groups by is on that metric, so
// that a renamed metric or label fails here instead of leaving an empty
// panel. The metrics in absent may be missing (a run that never stalled has
// no stall metrics); those present are checked all the same.
func checkDashboardQueries(t *testing.T, exposition []byte, absent ...string) {
	t.Helper()
	var exprs []string
	for _, q := range dashboardQueries(t) {
		exprs = append(exprs, q.expr)
	}
	labelsOf := func(name string) map[string]bool {
		out := map[string]bool{}
		for _, series := range seriesOf(exposition, name) {
			for _, m := range regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`).FindAllStringSubmatch(series, -1) {
				out[m[1]] = true
			}
		}
		return out
	}
	metricRe := regexp.MustCompile(`\b((?:nemo|otelcol)_[a-zA-Z0-9_]+)\b`)
	labelRe := regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!=|!~|=)`)
	groupRe := regexp.MustCompile(`\bby\s*\(([^)]*)\)`)
	// Label names are what selectors and by (...) hold; metric names are
	// what is left.
	selectorRe := regexp.MustCompile(`\{[^}]*\}|\bby\s*\([^)]*\)`)
	for _, expr := range exprs {
		names := metricRe.FindAllString(selectorRe.ReplaceAllString(expr, " "), -1)
		if strings.HasPrefix(expr, "label_values(") {
			names = names[:min(len(names), 1)] // label_values(metric, label)
			if _, label, ok := strings.Cut(strings.TrimSuffix(expr, ")"), ","); ok {
				expr += " by (" + strings.TrimSpace(label) + ")"
			}
		}
		if len(names) == 0 {
			t.Errorf("dashboard query %q names no metric of ours or of the collector", expr)
			continue
		}
		labels := map[string]bool{}
		for _, m := range labelRe.FindAllStringSubmatch(expr, -1) {
			labels[m[1]] = true
		}
		for _, m := range groupRe.FindAllStringSubmatch(expr, -1) {
			for l := range strings.SplitSeq(m[1], ",") {
				labels[strings.TrimSpace(l)] = true
			}
		}
		for _, name := range names {
			have := labelsOf(name)
			if len(have) == 0 && slices.Contains(absent, name) {
				continue
			}
			if len(have) == 0 {
				t.Errorf("dashboard query %q: metric %s is not in the exposition", expr, name)
				continue
			}
			for l := range labels {
				if !have[l] {
					t.Errorf("dashboard query %q: metric %s has no label %s (it has %v)", expr, name, l, have)
				}
			}
		}
	}
}

// seriesOf lists the label sets of a metric in a Prometheus exposition.
func seriesOf(exposition []byte, name string) []string {
	re := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + `\{([^}]*)\} `)
	var out []string
	for _, m := range re.FindAllSubmatch(exposition, -1) {
		out = append(out, string(m[1]))
	}
	return out
}
