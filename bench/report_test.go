// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

type reportInput struct {
	root       string
	results    []scenarioResult
	generators []generatorResult
	phase      time.Duration
	started    time.Time
	elapsed    time.Duration
	microPath  string
	soak       *soakResult
}

func writeJSON(path string, results []scenarioResult, gens []generatorResult, soak *soakResult) error {
	b, err := json.MarshalIndent(struct {
		Scenarios  []scenarioResult  `json:"scenarios"`
		Generators []generatorResult `json:"generators,omitempty"`
		Soak       *soakResult       `json:"soak,omitempty"`
	}{results, gens, soak}, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil { //nolint:gosec // G306: benchmark results with no secrets, meant to be readable like any output file
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// machine describes the host from /proc.
func machine() (cpu, mem, kernel string) {
	cpu, mem, kernel = "?", "?", "?"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				cpu = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	if kb, err := procStatusKBFile("/proc/meminfo", "MemTotal"); err == nil {
		mem = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	return cpu, mem, kernel
}

func procStatusKBFile(path, key string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), key+":"); ok {
			var kb int64
			_, err := fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
			return kb, err
		}
	}
	return 0, fmt.Errorf("%s has no %s", path, key)
}

// moduleVersions reads the core and contrib releases from the ocb manifest.
func moduleVersions(root string) string {
	b, err := os.ReadFile(filepath.Join(root, "builder-config.yaml"))
	if err != nil {
		return "?"
	}
	var core, contrib string
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || f[1] != "gomod:" {
			continue
		}
		mod, ver := f[2], f[3]
		switch {
		case core == "" && strings.HasPrefix(mod, "go.opentelemetry.io/collector/") && strings.HasPrefix(ver, "v0."):
			core = ver
		case contrib == "" && strings.HasPrefix(mod, "github.com/open-telemetry/opentelemetry-collector-contrib/"):
			contrib = ver
		}
	}
	return fmt.Sprintf("collector core %s, contrib %s", core, contrib)
}

func ratio(v, base float64) string {
	if v <= 0 || base <= 0 {
		return "n/a"
	}
	return num(v/base) + "x"
}

func num(v float64) string {
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// thousands formats an integer count with thin separators: 1,234,567.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// phaseTables are the report's scenario tables, one per load phase, in order.
var phaseTables = []struct{ phase, title, intro string }{
	{"saturation", "Saturation", "As many spans as the collector accepts. Higher spans/s and lower CPU-s / M spans are better."},
	{"100k/s", "Fixed 100,000 spans/s", "The load of a 1,000-rank job tracing every step (over 100,000 spans/s). A scenario below 100,000 spans/s here cannot keep up."},
	{"10k/s", "Fixed 10,000 spans/s", "The contrib testbed's budget for 10k spans/s OTLP is 20% of a core and 100 MiB."},
}

// scenarioColumns are the columns of a scenario table: the name a doc's
// quote gives the column (quotes_test.go) and its header in the report.
var scenarioColumns = []struct{ key, header string }{
	{"scenario", "scenario"},
	{"pipeline", "pipeline"},
	{"spans_per_s", "spans/s"},
	{"spans_vs_baseline", "vs baseline"},
	{"cpu_per_mspans", "CPU-s / M spans"},
	{"cpu_vs_baseline", "vs baseline"},
	{"cores_avg", "cores avg"},
	{"cores_peak", "cores peak"},
	{"peak_rss_mib", "peak RSS MiB"},
	{"rss_vs_baseline", "vs baseline"},
	{"ack_p99_ms", "ack p99 ms"},
	{"bytes_per_span", "bytes / span"},
	{"refused_spans", "refused spans"},
	{"generator_cpu_per_m", "generator CPU-s / M"},
}

func scenarioTableHeader() string {
	var b strings.Builder
	for _, c := range scenarioColumns {
		b.WriteString("| " + c.header + " ")
	}
	return b.String() + "|"
}

func renderReport(t *testing.T, in reportInput) string {
	byName := map[string]scenarioResult{}
	for i := range in.results {
		byName[in.results[i].Name] = in.results[i]
	}
	cpu, mem, kernel := machine()
	version, _ := testcollector.Run(t, nil, "--version")
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }

	w("# Benchmarks\n\n")
	w("Written by the scenario harness (`make bench`, i.e. `bench/run.sh`) on %s; the scenarios took %s.\n", in.started.UTC().Format("2006-01-02 15:04 UTC"), in.elapsed.Round(time.Second))
	w("Every figure below comes from that one run, on one machine: compare rows of this file with each other,\n")
	w("not with another run's.\n\n")
	w("Rerun everything: `make bench`. Scenarios only: `cd bench && go test -run TestScenarios -count=1 -timeout 14m -args -full -out $PWD/../BENCHMARKS.md`\n")
	w("(add `-only ceiling,file` to pick scenarios). Smoke run (CI, `make test`): `cd bench && go test .` (about 2 s of load per scenario).\n\n")

	w("## Machine\n\n| | |\n|---|---|\n")
	w("| CPU | %s, %d cores |\n| Memory | %s |\n| Kernel | %s |\n| Go | %s |\n", cpu, runtime.NumCPU(), mem, kernel, runtime.Version())
	w("| Collector | %s (%s) |\n", strings.TrimSpace(version), moduleVersions(in.root))
	w("| Load phase | %s per phase, a fresh collector per phase |\n", in.phase)
	lo, hi := loadRange(in.results, in.soak)
	w("| Machine load (1-min load average at phase starts, and at the soak's start and end) | %s to %s |\n\n", num(lo), num(hi))
	w("The load generator and the collector share these cores.")
	if hi > float64(runtime.NumCPU()) {
		w(" **Other work kept the machine busy during this run (a load average above\n")
		w("its %d cores): the collector got a fraction of the CPU, so absolute spans/s understate what it does alone;\n", runtime.NumCPU())
		w("ratios between rows of one run hold better, CPU-s / M spans best.**")
	}
	w("\n\n")

	w("## Method\n\n")
	w("- Load: `bench/loadgen` over OTLP/gRPC, NeMo Lens-shaped (bench/README.md, \"What a rank sends\"): one resource per rank with the\n")
	w("  rank, run, SLURM and W&B attributes; a `megatron.train_step` subtree of 20 spans per step; 500 spans (25 steps)\n")
	w("  per request; 4 connections, 8 requests in flight. Span ids, timestamps and `megatron.iteration` change on every replay.\n")
	w("- *saturation*: as fast as the collector answers; *100k/s*, *10k/s*: paced to that many spans per second.\n")
	w("- spans/s: the collector's own `otelcol_receiver_accepted_spans` over the phase, divided by the generator's sending time.\n")
	w("  The generator's accepted count must equal the collector's (the harness fails otherwise).\n")
	w("- CPU-s / M spans: the collector's user+system CPU (`/proc/<pid>/stat`) during the load and the drain after it\n")
	w("  (until the exporters' sent counts stop moving), per million accepted spans. Cores: CPU during the load / wall time;\n")
	w("  peak cores: the busiest 250 ms. Peak RSS: `VmHWM` from `/proc/<pid>/status` at the end of the phase.\n")
	w("- Ratios compare a scenario with its baseline (its stock counterpart), same run, same load.\n")
	w("- The preset comparisons (with and without straggler retention, the stall detector, step metrics; all_ranks and the stock\n")
	w("  file exporter it is compared with; the default preset and its 1,000-rank ceiling at saturation) differ by a few\n")
	w("  percent, less than one phase's noise: those phases run in rounds that take each in turn, each on a fresh\n")
	w("  collector, and their rows are the median round by CPU-s / M spans (every round below the tables).\n\n")

	if len(in.generators) > 0 {
		w("## Load generator versus telemetrygen\n\n")
		w("Both as fast as they go against the same ceiling collector (OTLP -> batch -> nop), counted by the collector.\n\n")
		w("| generator | spans/s accepted | generator CPU-s | generator CPU-s / M spans | collector cores | spans by its own count | command |\n|---|---:|---:|---:|---:|---:|---|\n")
		for _, g := range in.generators {
			if g.Error != "" && g.Accepted == 0 {
				w("| %s | failed: %s | | | | | `%s` |\n", g.Name, g.Error, g.Command)
				continue
			}
			w("| %s | %s | %s | %s | %s | %s | `%s` |\n", g.Name, thousands(g.SpansPerSecond), num(g.CPUSeconds), num(g.CPUPerMillion),
				num(g.CollectorAvgCores), thousands(g.Claimed), g.Command)
		}
		if len(in.generators) == 2 && in.generators[1].SpansPerSecond > 0 && in.generators[0].CPUPerMillion > 0 {
			lg, tg := in.generators[0], in.generators[1]
			w("\nbench/loadgen gets **%s** the spans/s of telemetrygen through the same collector, at **1/%s** of its CPU per span\n",
				ratio(lg.SpansPerSecond, tg.SpansPerSecond), num(tg.CPUPerMillion/lg.CPUPerMillion))
			w("(telemetrygen's own count includes the spans its SDK dropped before sending).\n")
		}
		w("\n")
	}

	table := func(title, phaseName, intro string) {
		w("## %s\n\n%s\n\n", title, intro)
		w("%s\n", scenarioTableHeader())
		w("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for i := range in.results {
			r := &in.results[i]
			p, ok := r.phase(phaseName)
			if !ok {
				continue
			}
			vsRate, vsCPU, vsRSS := "", "", ""
			if base, ok := byName[r.Baseline].phase(phaseName); ok {
				vsRate = ratio(p.SpansPerSecond, base.SpansPerSecond) + " " + r.Baseline
				vsCPU = ratio(p.CPUPerMillion, base.CPUPerMillion)
				vsRSS = ratio(p.PeakRSSMiB, base.PeakRSSMiB)
			}
			genPerM := 0.0
			if p.LoadgenAccepted > 0 {
				genPerM = p.LoadgenCPUSeconds / float64(p.LoadgenAccepted) * 1e6
			}
			bytesPerSpan := ""
			if p.BytesPerSpan > 0 {
				bytesPerSpan = thousands(p.BytesPerSpan)
			}
			w("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", r.Name, r.What, thousands(p.SpansPerSecond), vsRate,
				num(p.CPUPerMillion), vsCPU, num(p.AvgCores), num(p.PeakCores), num(p.PeakRSSMiB), vsRSS, num(p.LatencyP99Ms), bytesPerSpan,
				thousands(p.Refused), num(genPerM))
		}
		w("\n")
	}
	for _, tb := range phaseTables {
		table(tb.title, tb.phase, tb.intro)
	}

	w("%s", roundsTable(in.results))

	var pendingRows []scenarioResult
	for i := range in.results {
		if in.results[i].Status != "ok" {
			pendingRows = append(pendingRows, in.results[i])
		}
	}
	if len(pendingRows) > 0 {
		w("## Not measured in this run\n\n| scenario | pipeline | baseline | status |\n|---|---|---|---|\n")
		for i := range pendingRows {
			r := &pendingRows[i]
			w("| %s | %s | %s | %s |\n", r.Name, r.What, r.Baseline, r.Status)
		}
		w("\nA pending scenario runs as soon as its config exists under `bench/configs/` and its component is in the\n")
		w("build: the harness (`bench/scenarios_test.go`) already holds its load, baseline and phases.\n\n")
	}

	if in.soak != nil {
		w("%s", soakTable(in.soak))
	}

	w("## Goals\n\n| goal | where we stand |\n|---|---|\n")
	for _, g := range append(goals(byName), soakGoal(in.soak)) {
		w("| %s | %s |\n", g[0], g[1])
	}
	w("\n")

	w("## Go micro-benchmarks\n\n")
	if in.microPath == "" {
		w("Not run (`bench/run.sh` runs them before the scenarios).\n")
	} else if micro, err := os.ReadFile(in.microPath); err != nil {
		w("Unavailable: %v\n", err)
	} else {
		w("`go test -run '^$' -bench . -benchmem -count 6 -benchtime 200ms` (`BENCH_COUNT`, `BENCH_TIME`) over the packages that have benchmarks, summarized by benchstat:\n\n```\n%s\n```\n", strings.TrimSpace(string(micro)))
	}
	return b.String()
}

// roundsTable lists every round of the alternated phases ("" when none ran
// in rounds).
func roundsTable(results []scenarioResult) string {
	var b strings.Builder
	for _, ph := range alternatedPhases {
		for i := range results {
			p, ok := results[i].phase(ph.name)
			if !ok || len(p.CPURounds) < 2 {
				continue
			}
			if b.Len() == 0 {
				b.WriteString("## The preset comparisons, round by round\n\n")
				b.WriteString("Each round ran every scenario of a phase below in turn, in this order; the tables above show each one's median round.\n\n")
				b.WriteString("| scenario | phase | CPU-s / M spans, by round | median | peak RSS MiB, by round |\n|---|---|---|---:|---|\n")
			}
			cpu := make([]string, len(p.CPURounds))
			for j, v := range p.CPURounds {
				cpu[j] = num(v)
			}
			rss := make([]string, len(p.RSSRounds))
			for j, v := range p.RSSRounds {
				rss[j] = num(v)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", results[i].Name, ph.name, strings.Join(cpu, ", "), num(p.CPUPerMillion), strings.Join(rss, ", "))
		}
	}
	if b.Len() > 0 {
		b.WriteString("\n")
	}
	return b.String()
}

// loadRange returns the lowest and highest 1-minute load average seen at the
// start of a phase, and at the soak's start and end.
func loadRange(results []scenarioResult, soak *soakResult) (lo, hi float64) {
	var loads []string
	for i := range results {
		for j := range results[i].Phases {
			loads = append(loads, results[i].Phases[j].LoadAvg)
		}
	}
	if soak != nil {
		loads = append(loads, soak.LoadAvg, soak.LoadAvgEnd)
	}
	first := true
	for _, load := range loads {
		var v float64
		if _, err := fmt.Sscanf(load, "%g", &v); err != nil {
			continue
		}
		if first || v < lo {
			lo = v
		}
		if first || v > hi {
			hi = v
		}
		first = false
	}
	return lo, hi
}

// goals states where the measured figures stand against issue 10's goals.
func goals(byName map[string]scenarioResult) [][2]string {
	get := func(name, phase string) (phaseResult, bool) {
		r, ok := byName[name]
		if !ok || r.Status != "ok" {
			return phaseResult{}, false
		}
		return r.phase(phase)
	}
	var out [][2]string

	g1 := "1,000 ranks at 100,000 spans/s through the default preset: collector under 1 core and 500 MiB RSS"
	if p, ok := get("preset", "100k/s"); ok {
		verdict := "met"
		if p.AvgCores >= 1 || p.PeakRSSMiB >= 500 || p.SpansPerSecond < 0.95*p.TargetRate {
			verdict = "not met"
		}
		out = append(out, [2]string{g1, fmt.Sprintf("%s with configs/file.yaml as committed: %s spans/s, %s cores, %s MiB (the goal's preset is nemo_run + rank_strategy + jsonl_file; this measures whatever the preset holds)",
			verdict, thousands(p.SpansPerSecond), num(p.AvgCores), num(p.PeakRSSMiB))})
	} else {
		out = append(out, [2]string{g1, "not measured"})
	}

	g2 := "`jsonl_file` at least 3x the stock `file` exporter's spans per CPU-second"
	j, jok := get("jsonl_file", "saturation")
	f, fok := get("file", "saturation")
	if jok && fok && j.CPUPerMillion > 0 {
		x := f.CPUPerMillion / j.CPUPerMillion
		verdict := "met"
		if x < 3 {
			verdict = "not met"
		}
		out = append(out, [2]string{g2, fmt.Sprintf("%s: %.2fx (%s vs %s CPU-s / M spans)", verdict, x, num(j.CPUPerMillion), num(f.CPUPerMillion))})
	} else {
		out = append(out, [2]string{g2, "pending: jsonl_file scenario"})
	}

	g3 := "our processors together under 15% of the ceiling scenario's CPU"
	base, bok := get("ceiling_1000_ranks", "100k/s")
	var parts []string
	total, all := 0.0, bok
	for _, name := range []string{"nemo_run", "rank_strategy_single_rank"} {
		p, ok := get(name, "100k/s")
		if !ok || !bok || base.CPUPerMillion <= 0 {
			all = false
			continue
		}
		extra := p.CPUPerMillion/base.CPUPerMillion - 1
		total += extra
		parts = append(parts, fmt.Sprintf("%s %+.0f%%", name, 100*extra))
	}
	switch {
	case all:
		verdict := "met"
		if total >= 0.15 {
			verdict = "not met"
		}
		out = append(out, [2]string{g3, fmt.Sprintf("%s: %+.0f%% CPU per span over ceiling_1000_ranks at 100k/s (%s)", verdict, 100*total, strings.Join(parts, ", "))})
	default:
		out = append(out, [2]string{g3, "pending: nemo_run and rank_strategy scenarios"})
	}

	g4 := "contrib testbed floor: 10k spans/s OTLP within 20% of a core and 100 MiB"
	if p, ok := get("ceiling", "10k/s"); ok {
		verdict := "met"
		if p.AvgCores > 0.2 || p.PeakRSSMiB > 100 {
			verdict = "not met"
		}
		out = append(out, [2]string{g4, fmt.Sprintf("%s (ceiling): %s cores, %s MiB", verdict, num(p.AvgCores), num(p.PeakRSSMiB))})
	} else {
		out = append(out, [2]string{g4, "not measured"})
	}

	// ratioGoal compares one figure of a scenario with its baseline's in one
	// phase: met when the ratio is at most limit (at least, for spans/s).
	ratioGoal := func(goal, name, baseline, phase, figure string, limit float64) {
		p, ok := get(name, phase)
		b, bok := get(baseline, phase)
		if !ok || !bok {
			out = append(out, [2]string{goal, "not measured"})
			return
		}
		var x float64
		atLeast := false
		switch figure {
		case "cpu":
			x = p.CPUPerMillion / b.CPUPerMillion
		case "rss":
			x = p.PeakRSSMiB / b.PeakRSSMiB
		case "rate":
			x, atLeast = p.SpansPerSecond/b.SpansPerSecond, true
		}
		verdict := "met"
		if (atLeast && x < limit) || (!atLeast && x > limit) {
			verdict = "not met"
		}
		out = append(out, [2]string{goal, fmt.Sprintf("%s: %.2fx (%s vs %s, %s)", verdict, x, name, baseline, phase)})
	}
	// rssGoal: a scenario's peak RSS in one phase at most limit MiB; no row
	// when the phase was not measured.
	rssGoal := func(goal, name, phase string, limit float64) {
		if p, ok := get(name, phase); ok {
			verdict := "met"
			if p.PeakRSSMiB > limit {
				verdict = "not met"
			}
			out = append(out, [2]string{goal, fmt.Sprintf("%s: %s MiB", verdict, num(p.PeakRSSMiB))})
		}
	}
	ratioGoal("straggler retention on the default preset, 100k/s: CPU per span at most 1.3x stragglers off", "preset", "preset_stragglers_off", "100k/s", "cpu", 1.3)
	ratioGoal("straggler retention on the default preset, saturation: CPU per span at most 2x stragglers off", "preset", "preset_stragglers_off", "saturation", "cpu", 2)
	rssGoal("default preset with straggler retention, 100k/s: peak RSS at most 300 MiB", "preset", "100k/s", 300)
	ratioGoal("step metrics (nemo_steps) on the default preset, 100k/s: CPU per span at most 1.1x without them", "preset", "preset_no_step_metrics", "100k/s", "cpu", 1.1)
	ratioGoal("stall detector on the default preset, 100k/s: CPU per span at most 1.05x without it", "preset", "preset_no_stall_detector", "100k/s", "cpu", 1.05)
	ratioGoal("goodput on the default preset, 100k/s: CPU per span at most 1.03x without it", "preset", "preset_no_goodput", "100k/s", "cpu", 1.03)
	ratioGoal("all_ranks keeping 1% of steps, 100k/s: less CPU per span than keeping every step", "preset_all_ranks_steps_1pct", "preset_all_ranks", "100k/s", "cpu", 1)
	rssGoal("all_ranks keeping 1% of steps, 100k/s: peak RSS at most 300 MiB", "preset_all_ranks_steps_1pct", "100k/s", 300)
	ratioGoal("`single_rank` (stragglers off) no dearer than the stock `filter`, 100k/s", "rank_strategy_single_rank", "filter_single_rank", "100k/s", "cpu", 1)
	ratioGoal("`single_rank` (stragglers off) no dearer than the stock `filter`, saturation", "rank_strategy_single_rank", "filter_single_rank", "saturation", "cpu", 1)
	ratioGoal("durable default preset, all_ranks, 100k/s: CPU per span at most 1.0x the stock file exporter", "preset_all_ranks", "file_1000_ranks", "100k/s", "cpu", 1)
	ratioGoal("durable default preset, all_ranks, saturation: at least 0.8x the stock file exporter's spans/s", "preset_all_ranks", "file_1000_ranks", "saturation", "rate", 0.8)
	ratioGoal("durable default preset, all_ranks, saturation: CPU per span at most 1.0x the stock file exporter", "preset_all_ranks", "file_1000_ranks", "saturation", "cpu", 1)
	ratioGoal("durable default preset, all_ranks, saturation: peak RSS at most 1.5x the stock file exporter", "preset_all_ranks", "file_1000_ranks", "saturation", "rss", 1.5)
	if p, ok := get("preset_all_ranks", "100k/s"); ok {
		verdict := "met"
		if p.LatencyP99Ms >= 250 {
			verdict = "not met"
		}
		out = append(out, [2]string{"durable default preset, all_ranks, 100k/s: p99 acknowledgement latency under 250 ms", fmt.Sprintf("%s: %s ms", verdict, num(p.LatencyP99Ms))})
	}
	ratioGoal("run pages (nemo_view) on the default preset, 100k/s: CPU per span at most 1.03x without them", "preset", "preset_no_view", "100k/s", "cpu", 1.03)
	// The cost of the whole default preset (the house's second round).
	ratioGoal("default preset, saturation: CPU per span at most 1.6x OTLP -> batch -> nop from the same 1,000 ranks", "preset", "ceiling_1000_ranks", "saturation", "cpu", 1.6)
	rssGoal("default preset, 100k/s: peak RSS at most 250 MiB", "preset", "100k/s", 250)
	ratioGoal("default preset, 100k/s: CPU per span at most 0.70x the stock file exporter's (which writes every span)", "preset", "file_1000_ranks", "100k/s", "cpu", 0.7)
	ratioGoal("durable default preset, all_ranks, 100k/s: peak RSS at most 1.5x the stock file exporter", "preset_all_ranks", "file_1000_ranks", "100k/s", "rss", 1.5)
	return out
}
