// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"cmp"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/procstat"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// Flags of a full run (go test -run TestScenarios -args -full ... in bench/);
// without -full the test is the smoke run.
var (
	fullRun          = flag.Bool("full", false, "run every scenario for -phase per load phase and write the report; default: a smoke run of about 2 s per scenario")
	phaseLen         = flag.Duration("phase", 15*time.Second, "length of one load phase in a -full run")
	outPath          = flag.String("out", "", "-full: write the report (BENCHMARKS.md) here")
	jsonPath         = flag.String("json", "", "write the raw results as JSON here")
	microPath        = flag.String("micro", "", "-full: file with the Go micro-benchmark results to include in the report")
	onlyScenarios    = flag.String("only", "", "comma-separated scenarios to run (default: all)")
	withTelemetrygen = flag.Bool("telemetrygen", true, "-full: also measure telemetrygen against the ceiling scenario")
	budget           = flag.Duration("budget", 0, "stop starting scenarios when one would end past this much time (0: no limit); the report still gets written")
	rounds           = flag.Int("rounds", 3, "-full: rounds of the preset comparisons' alternated phases (100k/s; the default preset and its ceiling at saturation too), alternating between them; the median round is reported")
)

// phaseOverhead is a generous estimate of what a phase costs besides its
// load: starting and stopping a collector, building 1,000 ranks' requests,
// draining the pipeline.
const phaseOverhead = 10 * time.Second

// smokePhase is the length of one load phase in the smoke run.
const smokePhase = time.Second

// batchTimeout is the batch processor timeout of every scenario config.
const batchTimeout = time.Second

// phase is one load level of a scenario.
type phase struct {
	name string
	// rate is the target in spans/s; 0 is saturation (as fast as accepted).
	rate float64
}

var (
	saturation = phase{"saturation", 0}
	fixed100k  = phase{"100k/s", 100_000}
	fixed10k   = phase{"10k/s", 10_000}
)

// alternatedPhases are the phases a scenario can list in alternate, in the
// order their rounds run.
var alternatedPhases = []phase{saturation, fixed100k}

// scenario is one collector config under load, and what it is compared with.
type scenario struct {
	name string
	// what describes the pipeline for the report.
	what string
	// config is the collector config, relative to the repository root.
	config string
	// requires lists components the binary must contain.
	requires []string
	// baseline is the scenario this one is compared with (its stock counterpart).
	baseline string
	// loadgen holds extra load generator flags.
	loadgen []string
	// env holds extra environment variables of the collector (a preset's knobs).
	env map[string]string
	// sink starts a local OTLP/HTTP sink and passes its URL as BENCH_SINK_ENDPOINT.
	sink bool
	// derive, when set, edits the config before the run: a preset's
	// counterpart without one of its parts, compared with it side by side.
	derive func(cfg map[string]any)
	phases []phase
	// alternate lists the phases a full run measures again, in rounds that
	// alternate between the scenarios listing the phase (-rounds), reporting
	// the median round: the preset comparisons and the stock baselines they
	// are compared with, whose ratios are a few percent apart, within the
	// noise of one phase each.
	alternate []phase
}

// thousandRanks is the 1,000-rank load: 200 ms steps, so that at 100,000
// spans/s (5 steps per second per rank) the timestamps follow the sending.
var thousandRanks = []string{"-ranks", "1000", "-batch", "500", "-step-duration", "200ms"}

// thousandRanksStragglers is that load with 10 straggling ranks, synchronous
// (the loadgen's default): every rank's step lasts the same, the stragglers
// compute 3 times as long and the others wait for them in grad sync.
var thousandRanksStragglers = append([]string{"-stragglers", "10"}, thousandRanks...)

// scenarioList is every scenario, in report order. A scenario whose config
// does not exist, or whose components the binary lacks, is listed as pending
// rather than run: a new one needs its entry here and its config under
// bench/configs/.
func scenarioList() []scenario {
	std := []phase{saturation, fixed100k}
	return []scenario{
		{
			name: "ceiling", what: "OTLP -> batch -> nop, 8 ranks", config: "bench/configs/ceiling.yaml",
			phases: []phase{saturation, fixed100k, fixed10k},
		},
		{
			name: "ceiling_1000_ranks", what: "OTLP -> batch -> nop, 1,000 ranks", config: "bench/configs/ceiling.yaml",
			baseline: "ceiling", loadgen: thousandRanks, phases: std, alternate: []phase{saturation},
		},
		{
			name: "file", what: "OTLP -> batch -> stock `file` (json)", config: "bench/configs/file.yaml",
			baseline: "ceiling", phases: std,
		},
		// jsonl_file versus the stock file exporter.
		{
			name: "jsonl_file", what: "OTLP -> batch -> `jsonl_file`", config: "bench/configs/jsonl_file.yaml",
			requires: []string{"jsonl_file"}, baseline: "file", phases: std,
		},
		{
			name: "filter_single_rank", what: "OTLP -> stock `filter` (OTTL: keep rank 999) -> batch -> nop, 1,000 ranks",
			config: "bench/configs/filter_single_rank.yaml", baseline: "ceiling_1000_ranks", loadgen: thousandRanks, phases: std,
		},
		// rank_strategy single_rank, then sampled 10% with straggler retention on.
		{
			name: "rank_strategy_single_rank", what: "OTLP -> `rank_strategy` (single_rank) -> batch -> nop, 1,000 ranks",
			config: "bench/configs/rank_strategy_single_rank.yaml", requires: []string{"rank_strategy"},
			baseline: "ceiling_1000_ranks", loadgen: thousandRanks, phases: std,
		},
		{
			name: "rank_strategy_sampled", what: "OTLP -> `rank_strategy` (sampled 10%, straggler retention) -> batch -> nop, 1,000 ranks, 10 stragglers",
			config: "bench/configs/rank_strategy_sampled.yaml", requires: []string{"rank_strategy"},
			baseline: "ceiling_1000_ranks", loadgen: append([]string{"-stragglers", "10"}, thousandRanks...), phases: std,
		},
		// Run id with and without nemo_run; the ranks minted their own run ids.
		{
			name: "nemo_run", what: "OTLP -> `nemo_run` -> batch -> nop, 1,000 ranks with per-process run ids",
			config: "bench/configs/nemo_run.yaml", requires: []string{"nemo_run"},
			baseline: "ceiling_1000_ranks", loadgen: append([]string{"-run-id", "random"}, thousandRanks...), phases: std,
		},
		{
			name: "otlp_http", what: "OTLP -> batch -> stock `otlp_http` -> local sink", config: "bench/configs/otlp_http.yaml",
			baseline: "ceiling", sink: true, phases: std,
		},
		// nemo_otlp (own client, dead letters) versus the stock otlp_http
		// exporter to the same sink.
		{
			name: "nemo_otlp", what: "OTLP -> batch -> `nemo_otlp` (http/protobuf) -> local sink", config: "bench/configs/nemo_otlp.yaml",
			requires: []string{"nemo_otlp"}, baseline: "otlp_http", sink: true, phases: std,
		},
		// weave versus the stock otlp_http exporter to the same sink.
		{
			name: "weave", what: "OTLP -> batch -> `weave` -> local sink", config: "bench/configs/weave.yaml",
			requires: []string{"weave"}, baseline: "otlp_http", sink: true, phases: std,
		},
		// The default preset as committed (single_rank, straggler retention
		// on, durable JSONL) on a synchronous job with 10 straggling ranks,
		// against the same preset with straggler retention off.
		{
			name: "preset_stragglers_off", what: "configs/file.yaml with NEMO_STRAGGLERS=false, 1,000 ranks, 10 stragglers", config: "configs/file.yaml",
			env: map[string]string{"NEMO_STRAGGLERS": "false"}, requires: []string{"rank_strategy", "jsonl_file"},
			baseline: "ceiling_1000_ranks", loadgen: thousandRanksStragglers, phases: std, alternate: []phase{fixed100k},
		},
		{
			name: "preset", what: "configs/file.yaml as committed (the default preset), 1,000 ranks, 10 stragglers", config: "configs/file.yaml",
			requires: []string{"rank_strategy", "jsonl_file"},
			baseline: "preset_stragglers_off", loadgen: thousandRanksStragglers, phases: std, alternate: std,
		},
		// The default preset without its stall detector (NEMO_STALLS=false:
		// nemo_steps reads only step and wait spans) against the preset:
		// what finding stalled runs costs.
		{
			name: "preset_no_stall_detector", what: "configs/file.yaml with NEMO_STALLS=false, 1,000 ranks, 10 stragglers", config: "configs/file.yaml",
			env: map[string]string{"NEMO_STALLS": "false"}, requires: []string{"rank_strategy", "jsonl_file"},
			baseline: "preset", loadgen: thousandRanksStragglers, phases: []phase{fixed100k}, alternate: []phase{fixed100k},
		},
		// The default preset without its goodput accounting
		// (NEMO_GOODPUT=false) against the preset: what goodput costs.
		{
			name: "preset_no_goodput", what: "configs/file.yaml with NEMO_GOODPUT=false, 1,000 ranks, 10 stragglers", config: "configs/file.yaml",
			env: map[string]string{"NEMO_GOODPUT": "false"}, requires: []string{"rank_strategy", "jsonl_file"},
			baseline: "preset", loadgen: thousandRanksStragglers, phases: []phase{fixed100k}, alternate: []phase{fixed100k},
		},
		// The default preset without its run pages (NEMO_VIEW=false)
		// against the preset: what the pages cost.
		{
			name: "preset_no_view", what: "configs/file.yaml with NEMO_VIEW=false, 1,000 ranks, 10 stragglers", config: "configs/file.yaml",
			env: map[string]string{"NEMO_VIEW": "false"}, requires: []string{"rank_strategy", "jsonl_file"},
			baseline: "preset", loadgen: thousandRanksStragglers, phases: []phase{fixed100k}, alternate: []phase{fixed100k},
		},
		// The default preset without nemo_steps (step metrics
		// of every rank) against it: what the metrics cost.
		{
			name: "preset_no_step_metrics", what: "configs/file.yaml without nemo_steps (processor and receiver), 1,000 ranks, 10 stragglers", config: "configs/file.yaml",
			derive: withoutStepMetrics, requires: []string{"rank_strategy", "jsonl_file"},
			baseline: "ceiling_1000_ranks", loadgen: thousandRanksStragglers, phases: std, alternate: []phase{fixed100k},
		},
		// Every span written: the durable default preset with all_ranks, and
		// its fast mode, against the stock file exporter on the same load.
		{
			name: "file_1000_ranks", what: "OTLP -> batch -> stock `file` (json), 1,000 ranks", config: "bench/configs/file.yaml",
			baseline: "ceiling_1000_ranks", loadgen: thousandRanks, phases: std, alternate: []phase{fixed100k},
		},
		{
			name: "preset_all_ranks", what: "configs/file.yaml with all_ranks (durable: fsync, ack after write; zstd, its default), 1,000 ranks", config: "configs/file.yaml",
			env: map[string]string{"NEMO_RANK_STRATEGY": "all_ranks"}, requires: []string{"rank_strategy", "jsonl_file"},
			baseline: "file_1000_ranks", loadgen: thousandRanks, phases: std, alternate: []phase{fixed100k},
		},
		{
			name: "preset_all_ranks_plain", what: "configs/file.yaml with all_ranks and NEMO_JSONL_COMPRESSION=none (durable, plain .jsonl), 1,000 ranks", config: "configs/file.yaml",
			env: map[string]string{"NEMO_RANK_STRATEGY": "all_ranks", "NEMO_JSONL_COMPRESSION": "none"}, requires: []string{"rank_strategy", "jsonl_file"},
			baseline: "file_1000_ranks", loadgen: thousandRanks, phases: std,
		},
		// Every rank, 1% of the steps (step_sampling), against every step.
		{
			name: "preset_all_ranks_steps_1pct", what: "configs/file.yaml with all_ranks and NEMO_STEP_SAMPLE_RATE=0.01, 1,000 ranks", config: "configs/file.yaml",
			env: map[string]string{"NEMO_RANK_STRATEGY": "all_ranks", "NEMO_STEP_SAMPLE_RATE": "0.01"}, requires: []string{"rank_strategy", "jsonl_file", "step_sampling"},
			baseline: "preset_all_ranks", loadgen: thousandRanks, phases: std,
		},
		{
			name: "preset_all_ranks_fast", what: "configs/file.yaml with all_ranks and NEMO_JSONL_DURABLE=false, 1,000 ranks", config: "configs/file.yaml",
			env: map[string]string{"NEMO_RANK_STRATEGY": "all_ranks", "NEMO_JSONL_DURABLE": "false"}, requires: []string{"rank_strategy", "jsonl_file"},
			baseline: "file_1000_ranks", loadgen: thousandRanks, phases: std,
		},
	}
}

// phaseResult is what one load phase measured.
type phaseResult struct {
	Phase      string  `json:"phase"`
	TargetRate float64 `json:"target_spans_per_second"`
	Seconds    float64 `json:"seconds"`
	// Accepted and Refused are the collector's own counts (otelcol_receiver_*_spans).
	Accepted        float64 `json:"collector_accepted_spans"`
	Refused         float64 `json:"collector_refused_spans"`
	LoadgenAccepted int64   `json:"loadgen_accepted_spans"`
	SpansPerSecond  float64 `json:"accepted_spans_per_second"`
	// CPUSeconds covers the load and the pipeline draining after it.
	CPUSeconds        float64          `json:"collector_cpu_seconds"`
	CPUPerMillion     float64          `json:"collector_cpu_seconds_per_million_spans"`
	AvgCores          float64          `json:"collector_avg_cores"`
	PeakCores         float64          `json:"collector_peak_cores_250ms"`
	PeakRSSMiB        float64          `json:"collector_peak_rss_mib"`
	LoadgenCPUSeconds float64          `json:"loadgen_cpu_seconds"`
	LoadgenErrors     map[string]int64 `json:"loadgen_errors,omitempty"`
	LatencyP99Ms      float64          `json:"loadgen_latency_p99_ms"`
	// BytesPerSpan is what the phase added to the output directory per
	// accepted span (file exporters; 0 for the others).
	BytesPerSpan float64 `json:"output_bytes_per_span"`
	LoadAvg      string  `json:"machine_load_average"`
	// CPURounds and RSSRounds are every round's CPU-s / M spans and peak RSS
	// of an alternated phase, in the order they ran; the rest is the median
	// round's.
	CPURounds []float64 `json:"collector_cpu_seconds_per_million_spans_by_round,omitempty"`
	RSSRounds []float64 `json:"collector_peak_rss_mib_by_round,omitempty"`
}

// scenarioResult is one scenario's outcome.
type scenarioResult struct {
	Name     string        `json:"name"`
	What     string        `json:"what"`
	Config   string        `json:"config"`
	Baseline string        `json:"baseline,omitempty"`
	Loadgen  []string      `json:"loadgen_flags,omitempty"`
	Status   string        `json:"status"`
	Phases   []phaseResult `json:"phases,omitempty"`
}

func (r scenarioResult) phase(name string) (phaseResult, bool) {
	for i := range r.Phases {
		if r.Phases[i].Phase == name {
			return r.Phases[i], true
		}
	}
	return phaseResult{}, false
}

// TestScenarios runs the scenarios against the built binary. Without -full
// it is the smoke run: about 2 s of load per scenario on one collector each,
// failing when a scenario's collector accepted nothing or when the load
// generator's count and the collector's differ.
func TestScenarios(t *testing.T) {
	root := testcollector.RepoRoot(t)
	testcollector.Binary(t)
	components := componentList(t)
	loadgen := testcollector.BuildTool(t, "bench/loadgen")
	only := map[string]bool{}
	known := map[string]bool{soakName: true}
	for _, sc := range scenarioList() {
		known[sc.name] = true
	}
	for n := range strings.SplitSeq(*onlyScenarios, ",") {
		if n = strings.TrimSpace(n); n != "" {
			if !known[n] {
				t.Fatalf("-only: no scenario %q", n)
			}
			only[n] = true
		}
	}
	length := smokePhase
	soak := smokeSoak
	if *fullRun {
		length = *phaseLen
		soak = fullSoak
		soak.load = *soakLen
	}
	// The soak runs last; the scenarios leave it its time (its load and
	// a collector's start and drain).
	var soakReserve time.Duration
	wantSoak := len(only) == 0 || only[soakName]
	if wantSoak {
		soakReserve = soak.load*11/10 + phaseOverhead
	}
	// The alternated rounds run after the scenarios, before the soak: the
	// scenarios leave them their time too (once they have run, the
	// generators and the soak need only the soak's).
	extraRounds := 0
	if *fullRun {
		extraRounds = max(*rounds-1, 0)
	}
	var roundsReserve time.Duration
	for _, sc := range scenarioList() {
		if len(only) == 0 || only[sc.name] {
			roundsReserve += time.Duration(extraRounds*len(sc.alternate)) * (length + phaseOverhead)
		}
	}

	started := time.Now()
	var results []scenarioResult
	for _, sc := range scenarioList() {
		if len(only) > 0 && !only[sc.name] {
			continue
		}
		res := scenarioResult{Name: sc.name, What: sc.what, Config: sc.config, Baseline: sc.baseline, Loadgen: sc.loadgen}
		if note := pending(root, sc, components); note != "" {
			res.Status = "pending: " + note
			t.Logf("%s: %s", sc.name, res.Status)
			results = append(results, res)
			continue
		}
		if *budget > 0 && time.Since(started)+time.Duration(len(sc.phases))*(length+phaseOverhead)+roundsReserve+soakReserve > *budget {
			res.Status = fmt.Sprintf("skipped: it would not end within the %s budget", *budget)
			t.Logf("%s: %s", sc.name, res.Status)
			results = append(results, res)
			continue
		}
		ok := t.Run(sc.name, func(t *testing.T) {
			res.Phases = runScenario(t, root, sc, loadgen, length, *fullRun)
		})
		res.Status = "ok"
		if !ok {
			res.Status = "failed (see the test log)"
		}
		results = append(results, res)
	}

	if extraRounds > 0 {
		alternateRounds(t, root, results, loadgen, length, extraRounds)
	}

	var gens []generatorResult
	generatorsFit := *budget == 0 || time.Since(started)+2*(length+phaseOverhead)+soakReserve < *budget
	if *fullRun && *withTelemetrygen && (len(only) == 0 || only["ceiling"]) && generatorsFit {
		t.Run("generators", func(t *testing.T) {
			gens = compareGenerators(t, root, loadgen, *phaseLen)
		})
	}
	var soakRes *soakResult
	switch {
	case !wantSoak:
	case *budget > 0 && time.Since(started)+soakReserve > *budget:
		t.Logf("soak: skipped: it would not end within the %s budget", *budget)
	default:
		t.Run(soakName, func(t *testing.T) {
			soakRes = runSoak(t, root, soak)
			t.Logf("soak: %s; %d false stalls (%s)", soakRes.Plan, soakRes.falseStalls(), soakRes.Status)
		})
	}
	for _, r := range results {
		for _, p := range r.Phases {
			t.Logf("%-26s %-10s %9.0f spans/s  %6.2f CPU-s/M spans  %5.2f cores avg  %6.1f MiB peak RSS",
				r.Name, p.Phase, p.SpansPerSecond, p.CPUPerMillion, p.AvgCores, p.PeakRSSMiB)
		}
	}
	if *jsonPath != "" {
		if err := writeJSON(*jsonPath, results, gens, soakRes); err != nil {
			t.Error(err)
		}
	}
	if *fullRun && *outPath != "" {
		rep := reportInput{
			root: root, results: results, generators: gens, phase: *phaseLen,
			started: started, elapsed: time.Since(started), microPath: *microPath, soak: soakRes,
		}
		if err := os.WriteFile(*outPath, []byte(renderReport(t, rep)), 0o644); err != nil { //nolint:gosec // G306: BENCHMARKS.md, a document of the repository, readable like its other files
			t.Errorf("write %s: %v", *outPath, err)
		} else if out, err := filepath.Abs(*outPath); err == nil && out == filepath.Join(root, benchReport) {
			// The docs quote the report's figures (quotes_test.go): bring them to this run's.
			problems, err := checkQuotes(root, true)
			if err != nil {
				t.Errorf("rewrite the docs' quotes of %s: %v", benchReport, err)
			}
			for _, p := range problems {
				t.Errorf("after writing %s: %s", benchReport, p)
			}
		}
	}
}

// alternateRounds measures the alternated phases of the scenarios that ran
// extra more times, phase by phase, in rounds that take each scenario
// listing the phase in turn (each on a fresh collector), and reports for
// each the median round by CPU per span, with every round's figures: a ratio
// of a few percent between two of them is then not one phase's noise.
func alternateRounds(t *testing.T, root string, results []scenarioResult, loadgen string, length time.Duration, extra int) {
	byName := map[string]scenario{}
	list := scenarioList()
	for i := range list {
		byName[list[i].name] = list[i]
	}
	for _, ph := range alternatedPhases {
		var runs []*scenarioResult
		for i := range results {
			r := &results[i]
			if sc, ok := byName[r.Name]; ok && slices.Contains(sc.alternate, ph) && r.Status == "ok" {
				if _, ok := r.phase(ph.name); ok {
					runs = append(runs, r)
				}
			}
		}
		if len(runs) < 2 {
			continue
		}
		samples := make([][]phaseResult, len(runs))
		for i, r := range runs {
			p, _ := r.phase(ph.name)
			samples[i] = []phaseResult{p}
		}
		for round := 2; round <= extra+1; round++ {
			for i, r := range runs {
				sc := byName[r.Name]
				sc.phases = []phase{ph}
				t.Run(fmt.Sprintf("%s/%s/round_%d", sc.name, ph.name, round), func(t *testing.T) {
					samples[i] = append(samples[i], runScenario(t, root, sc, loadgen, length, true)...)
				})
			}
		}
		for i, r := range runs {
			if len(samples[i]) < extra+1 {
				r.Status = "failed (a round failed: see the test log)"
				continue
			}
			for j := range r.Phases {
				if r.Phases[j].Phase == ph.name {
					r.Phases[j] = medianRound(samples[i])
				}
			}
		}
	}
}

// medianRound is the round of median CPU per span, with every round's CPU
// per span and peak RSS, in the order they ran.
func medianRound(rounds []phaseResult) phaseResult {
	sorted := slices.Clone(rounds)
	slices.SortFunc(sorted, func(a, b phaseResult) int { return cmp.Compare(a.CPUPerMillion, b.CPUPerMillion) })
	m := sorted[len(sorted)/2]
	m.CPURounds, m.RSSRounds = nil, nil
	for i := range rounds {
		m.CPURounds = append(m.CPURounds, rounds[i].CPUPerMillion)
		m.RSSRounds = append(m.RSSRounds, rounds[i].PeakRSSMiB)
	}
	return m
}

// pending says why a scenario cannot run yet ("" when it can).
func pending(root string, sc scenario, components map[string]bool) string {
	var missing []string
	for _, c := range sc.requires {
		if !components[c] {
			missing = append(missing, c)
		}
	}
	_, err := os.Stat(filepath.Join(root, sc.config))
	switch {
	case err != nil && len(missing) > 0:
		return fmt.Sprintf("needs %s in the build and %s", strings.Join(missing, ", "), sc.config)
	case err != nil:
		return "needs " + sc.config
	case len(missing) > 0:
		return fmt.Sprintf("the binary lacks %s (make build)", strings.Join(missing, ", "))
	}
	return ""
}

// runScenario runs the phases of one scenario. A full run gives every phase a
// fresh collector, so that its peak RSS (VmHWM) is that phase's own; the
// smoke run shares one.
func runScenario(t *testing.T, root string, sc scenario, loadgen string, length time.Duration, fresh bool) []phaseResult {
	env := map[string]string{"NEMO_TELEMETRY_DIR": t.TempDir(), "NEMO_QUEUE_DIR": t.TempDir()}
	maps.Copy(env, sc.env)
	if sc.sink {
		env["BENCH_SINK_ENDPOINT"] = startSink(t)
	}
	config := filepath.Join(root, sc.config)
	if sc.derive != nil {
		config = derivedConfig(t, config, sc.derive)
	}
	var c *testcollector.Collector
	var out []phaseResult
	for _, ph := range sc.phases {
		if c == nil || fresh {
			if c != nil {
				c.Stop()
			}
			c = testcollector.Start(t, config, testcollector.Options{Env: env})
		}
		r, err := runPhase(t, c, sc, ph, loadgen, length, fresh)
		if err != nil {
			t.Fatalf("%s %s: %v", sc.name, ph.name, err)
		}
		if r.Accepted <= 0 {
			t.Fatalf("%s %s: the collector accepted no span (loadgen errors %v)", sc.name, ph.name, r.LoadgenErrors)
		}
		if float64(r.LoadgenAccepted) != r.Accepted {
			t.Errorf("%s %s: the load generator counted %d spans accepted, the collector %.0f", sc.name, ph.name, r.LoadgenAccepted, r.Accepted)
		}
		out = append(out, r)
	}
	c.Stop()
	return out
}

// derivedConfig writes the config at path, edited by derive, to a file of
// the test's and returns its path.
func derivedConfig(t *testing.T, path string, derive func(map[string]any)) string {
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err = yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	derive(cfg)
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	derived := filepath.Join(t.TempDir(), filepath.Base(path))
	if err := os.WriteFile(derived, out, 0o600); err != nil {
		t.Fatal(err)
	}
	return derived
}

// withoutStepMetrics is a preset without nemo_steps: the processor leaves
// every traces pipeline, and the receiver and the pipelines it feeds (its
// step metrics and stall records) are gone.
func withoutStepMetrics(cfg map[string]any) {
	procs, _ := cfg["processors"].(map[string]any)
	delete(procs, "nemo_steps")
	recvs, _ := cfg["receivers"].(map[string]any)
	delete(recvs, "nemo_steps")
	service, _ := cfg["service"].(map[string]any)
	pipes, _ := service["pipelines"].(map[string]any)
	for name, p := range pipes {
		pl, _ := p.(map[string]any)
		if recv, _ := pl["receivers"].([]any); slices.Contains(recv, any("nemo_steps")) {
			delete(pipes, name)
			continue
		}
		if ps, _ := pl["processors"].([]any); slices.Contains(ps, any("nemo_steps")) {
			pl["processors"] = slices.DeleteFunc(slices.Clone(ps), func(p any) bool { return p == "nemo_steps" })
		}
	}
}

// runPhase drives one load phase at c. With drain it waits for the pipeline
// to hand on what it received before reading the CPU time (a full run); the
// smoke run skips that wait.
func runPhase(t *testing.T, c *testcollector.Collector, sc scenario, ph phase, loadgen string, length time.Duration, drain bool) (phaseResult, error) {
	pid := c.Pid()
	out := c.Env["NEMO_TELEMETRY_DIR"]
	bytes0 := dirBytes(out)
	acc0, ref0, err := collectorSpans(c)
	if err != nil {
		return phaseResult{}, err
	}
	cpu0, err := procstat.CPU(pid)
	if err != nil {
		return phaseResult{}, err
	}
	r := phaseResult{Phase: ph.name, TargetRate: ph.rate, LoadAvg: loadAvg()}
	args := append([]string{
		"-endpoint", c.GRPCEndpoint(),
		"-duration", length.String(),
		"-rate", strconv.FormatFloat(ph.rate, 'f', -1, 64),
	}, sc.loadgen...)
	sampler := startSampler(pid, 250*time.Millisecond)
	rep, lerr := runLoadgen(t, loadgen, length+2*time.Minute, args...)
	cpuLoad, _ := procstat.CPU(pid)
	r.PeakCores = sampler.finish()
	if drain {
		waitDrained(c, batchTimeout)
	}

	cpu1, err := procstat.CPU(pid)
	if err != nil {
		return r, err
	}
	acc1, ref1, err := collectorSpans(c)
	if err != nil {
		return r, err
	}
	hwm, err := procstat.StatusKiB(pid, "VmHWM")
	if err != nil {
		return r, err
	}
	r.Seconds = rep.ElapsedSeconds
	r.Accepted, r.Refused = acc1-acc0, ref1-ref0
	r.LoadgenAccepted = rep.ItemsAccepted
	r.LoadgenCPUSeconds = rep.CPUSeconds
	r.LoadgenErrors = rep.Errors
	r.LatencyP99Ms = rep.LatencyMs["p99"]
	r.CPUSeconds = (cpu1 - cpu0).Seconds()
	// The generator's sending time, not its process's: building 1,000 ranks'
	// requests takes a moment during which the collector idles.
	if r.Seconds > 0 {
		r.AvgCores = (cpuLoad - cpu0).Seconds() / r.Seconds
	}
	r.PeakRSSMiB = float64(hwm) / 1024
	if r.Seconds > 0 {
		r.SpansPerSecond = r.Accepted / r.Seconds
	}
	if r.Accepted > 0 {
		r.CPUPerMillion = r.CPUSeconds / r.Accepted * 1e6
		r.BytesPerSpan = float64(dirBytes(out)-bytes0) / r.Accepted
	}
	if lerr != nil && rep.ItemsAccepted > 0 {
		// A run that got some spans through is a result; its errors are in the report.
		lerr = nil
	}
	return r, lerr
}

// dirBytes is the size of the regular files under dir (0 when it is empty
// or missing).
func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n
}
