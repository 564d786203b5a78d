// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/procstat"
)

func TestProcReaders(t *testing.T) {
	pid := os.Getpid()
	before, err := procstat.CPU(pid)
	require.NoError(t, err)
	deadline := time.Now().Add(50 * time.Millisecond)
	for x := 0; time.Now().Before(deadline); x++ {
		_ = x * x
	}
	after, err := procstat.CPU(pid)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, after, before)
	assert.Positive(t, after)

	// RSS first: the high-water mark read after it cannot be below it.
	rss, err := procstat.StatusKiB(pid, "VmRSS")
	require.NoError(t, err)
	hwm, err := procstat.StatusKiB(pid, "VmHWM")
	require.NoError(t, err)
	assert.GreaterOrEqual(t, hwm, rss)
	_, err = procstat.StatusKiB(pid, "NoSuchKey")
	assert.Error(t, err)
	_, err = procstat.CPU(-1)
	assert.Error(t, err)
}

func TestPending(t *testing.T) {
	root := t.TempDir()
	require.NoError(t, os.MkdirAll(root+"/bench/configs", 0o755))
	require.NoError(t, os.WriteFile(root+"/bench/configs/have.yaml", nil, 0o600))
	built := map[string]bool{"nop": true}
	assert.Empty(t, pending(root, scenario{config: "bench/configs/have.yaml", requires: []string{"nop"}}, built))
	assert.Equal(t, "needs bench/configs/missing.yaml", pending(root, scenario{config: "bench/configs/missing.yaml"}, built))
	assert.Equal(t, "the binary lacks weave (make build)", pending(root, scenario{config: "bench/configs/have.yaml", requires: []string{"weave"}}, built))
	assert.Contains(t, pending(root, scenario{config: "bench/configs/missing.yaml", requires: []string{"weave"}}, built), "needs weave in the build and")
}

func TestScenarioListIsConsistent(t *testing.T) {
	names := map[string]bool{}
	for _, sc := range scenarioList() {
		assert.False(t, names[sc.name], "scenario %s listed twice", sc.name)
		names[sc.name] = true
		assert.NotEmpty(t, sc.phases, sc.name)
		assert.True(t, strings.HasSuffix(sc.config, ".yaml"), sc.name)
	}
	for _, sc := range scenarioList() {
		if sc.baseline != "" {
			assert.True(t, names[sc.baseline], "%s: baseline %s is not a scenario", sc.name, sc.baseline)
		}
	}
}

func TestGoals(t *testing.T) {
	ok := func(name string, phases ...phaseResult) scenarioResult {
		return scenarioResult{Name: name, Status: "ok", Phases: phases}
	}
	byName := map[string]scenarioResult{
		"preset":     ok("preset", phaseResult{Phase: "100k/s", TargetRate: 100_000, SpansPerSecond: 99_000, AvgCores: 0.6, PeakRSSMiB: 200}),
		"file":       ok("file", phaseResult{Phase: "saturation", CPUPerMillion: 9}),
		"jsonl_file": ok("jsonl_file", phaseResult{Phase: "saturation", CPUPerMillion: 4}),
		"ceiling":    ok("ceiling", phaseResult{Phase: "10k/s", AvgCores: 0.05, PeakRSSMiB: 120}),
	}
	g := goals(byName)
	require.Len(t, g, 22)
	assert.True(t, strings.HasPrefix(g[0][1], "met"), g[0][1])
	assert.True(t, strings.HasPrefix(g[1][1], "not met: 2.25x"), g[1][1])
	assert.True(t, strings.HasPrefix(g[2][1], "pending"), g[2][1])
	assert.True(t, strings.HasPrefix(g[3][1], "not met"), g[3][1], "120 MiB is over the 100 MiB floor")

	byName["nemo_run"] = ok("nemo_run", phaseResult{Phase: "100k/s", CPUPerMillion: 3.3})
	byName["rank_strategy_single_rank"] = ok("rank_strategy_single_rank", phaseResult{Phase: "100k/s", CPUPerMillion: 3.15})
	byName["ceiling_1000_ranks"] = ok("ceiling_1000_ranks", phaseResult{Phase: "100k/s", CPUPerMillion: 3})
	g = goals(byName)
	assert.True(t, strings.HasPrefix(g[2][1], "met: +15%") || strings.HasPrefix(g[2][1], "not met: +15%"), g[2][1])
	byName["nemo_run"] = ok("nemo_run", phaseResult{Phase: "100k/s", CPUPerMillion: 3.1})
	assert.True(t, strings.HasPrefix(goals(byName)[2][1], "met: +8%"), goals(byName)[2][1])

	// The ratio goals: the figure over its baseline's, in one phase.
	assert.Equal(t, "not measured", g[4][1])
	byName["preset"] = ok("preset", phaseResult{Phase: "100k/s", CPUPerMillion: 2.6, PeakRSSMiB: 310})
	byName["preset_stragglers_off"] = ok("preset_stragglers_off", phaseResult{Phase: "100k/s", CPUPerMillion: 2})
	byName["preset_all_ranks"] = ok("preset_all_ranks", phaseResult{Phase: "saturation", SpansPerSecond: 79, CPUPerMillion: 5, PeakRSSMiB: 150})
	byName["file_1000_ranks"] = ok("file_1000_ranks", phaseResult{Phase: "saturation", SpansPerSecond: 100, CPUPerMillion: 5, PeakRSSMiB: 100})
	g = goals(byName)
	assert.Equal(t, "met: 1.30x (preset vs preset_stragglers_off, 100k/s)", g[4][1])
	assert.Equal(t, "not met: 310 MiB", g[6][1])
	assert.True(t, strings.HasPrefix(g[14][1], "not met: 0.79x"), g[14][1], "spans/s must be at least 0.8x")
	assert.True(t, strings.HasPrefix(g[15][1], "met: 1.00x"), g[15][1])
	assert.True(t, strings.HasPrefix(g[16][1], "met: 1.50x"), g[16][1])
	assert.Equal(t, "not measured", g[7][1], "step metrics: no preset_no_step_metrics")
	byName["preset_no_step_metrics"] = ok("preset_no_step_metrics", phaseResult{Phase: "100k/s", CPUPerMillion: 2.5})
	assert.Equal(t, "met: 1.04x (preset vs preset_no_step_metrics, 100k/s)", goals(byName)[7][1])

	// The stall detector: within 5% of the preset without it.
	assert.Equal(t, "not measured", goals(byName)[8][1], "no preset_no_stall_detector")
	byName["preset_no_stall_detector"] = ok("preset_no_stall_detector", phaseResult{Phase: "100k/s", CPUPerMillion: 2.5})
	assert.Equal(t, "met: 1.04x (preset vs preset_no_stall_detector, 100k/s)", goals(byName)[8][1])
	byName["preset_no_stall_detector"] = ok("preset_no_stall_detector", phaseResult{Phase: "100k/s", CPUPerMillion: 2.4})
	assert.Equal(t, "not met: 1.08x (preset vs preset_no_stall_detector, 100k/s)", goals(byName)[8][1])

	// Goodput: within 3% of the preset without it.
	assert.Equal(t, "not measured", goals(byName)[9][1], "no preset_no_goodput")
	byName["preset_no_goodput"] = ok("preset_no_goodput", phaseResult{Phase: "100k/s", CPUPerMillion: 2.55})
	assert.Equal(t, "met: 1.02x (preset vs preset_no_goodput, 100k/s)", goals(byName)[9][1])
	byName["preset_no_goodput"] = ok("preset_no_goodput", phaseResult{Phase: "100k/s", CPUPerMillion: 2.5})
	assert.Equal(t, "not met: 1.04x (preset vs preset_no_goodput, 100k/s)", goals(byName)[9][1])

	// The run pages: within 3% of the preset without them (the last goal).
	assert.Equal(t, "not measured", goals(byName)[17][1], "no preset_no_view")
	byName["preset_no_view"] = ok("preset_no_view", phaseResult{Phase: "100k/s", CPUPerMillion: 2.55})
	assert.Equal(t, "met: 1.02x (preset vs preset_no_view, 100k/s)", goals(byName)[17][1])
	byName["preset_no_view"] = ok("preset_no_view", phaseResult{Phase: "100k/s", CPUPerMillion: 2.5})
	assert.Equal(t, "not met: 1.04x (preset vs preset_no_view, 100k/s)", goals(byName)[17][1])

	// The whole default preset: against the ceiling at saturation, its peak
	// RSS, against the stock file exporter; all_ranks' RSS against it.
	assert.Equal(t, "not measured", goals(byName)[18][1], "no saturation phase of the preset")
	byName["preset"] = ok("preset",
		phaseResult{Phase: "saturation", CPUPerMillion: 2.2},
		phaseResult{Phase: "100k/s", CPUPerMillion: 2.6, PeakRSSMiB: 240})
	byName["ceiling_1000_ranks"] = ok("ceiling_1000_ranks", phaseResult{Phase: "saturation", CPUPerMillion: 1.4})
	byName["file_1000_ranks"] = ok("file_1000_ranks",
		phaseResult{Phase: "100k/s", CPUPerMillion: 4, PeakRSSMiB: 120},
		phaseResult{Phase: "saturation", SpansPerSecond: 100, CPUPerMillion: 5, PeakRSSMiB: 100})
	byName["preset_all_ranks"] = ok("preset_all_ranks", phaseResult{Phase: "100k/s", PeakRSSMiB: 190})
	g = goals(byName)
	row := func(goal string) string {
		for _, r := range g {
			if strings.HasPrefix(r[0], goal) {
				return r[1]
			}
		}
		return "no such goal: " + goal
	}
	assert.Equal(t, "met: 1.57x (preset vs ceiling_1000_ranks, saturation)", row("default preset, saturation: CPU per span at most 1.6x"))
	assert.Equal(t, "met: 240 MiB", row("default preset, 100k/s: peak RSS at most 250 MiB"))
	assert.Equal(t, "met: 0.65x (preset vs file_1000_ranks, 100k/s)", row("default preset, 100k/s: CPU per span at most 0.70x"))
	assert.Equal(t, "not met: 1.58x (preset_all_ranks vs file_1000_ranks, 100k/s)", row("durable default preset, all_ranks, 100k/s: peak RSS at most 1.5x"))
}

func TestThousands(t *testing.T) {
	for v, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567.4: "1,234,567", 100000: "100,000"} {
		assert.Equal(t, want, thousands(v))
	}
	assert.Equal(t, "n/a", ratio(1, 0))
	assert.Equal(t, "2.00x", ratio(2, 1))
	assert.Equal(t, "113x", ratio(113.27, 1))
}

// The soak's judge: a behind record, a paused record outside a pause, two
// records for one pause and a pause without one are what it reports.
func TestJudgeSoakRun(t *testing.T) {
	dir := t.TempDir()
	sec := int64(time.Second)
	step := func(it, start, end int64) string {
		return fmt.Sprintf(`{"name":"megatron.train_step","start_time_unix_nano":%d,"end_time_unix_nano":%d,"attributes":{"megatron.iteration":%d},"resource":{"nv.dl.rank":3}}`, start, end, it)
	}
	record := func(at int64, event, kind string) string {
		return fmt.Sprintf(`{"time_unix_nano":%d,"attributes":{"event.name":%q,"nemo.stall.kind":%q},"resource":{}}`, at, event, kind)
	}
	// Steps of 1 s; pauses (gaps over stall_after, 2 s) after iterations 2 and 4.
	traces := []string{step(1, 0, sec), step(2, sec, 2*sec), step(3, 10*sec, 11*sec), step(4, 11*sec, 12*sec), step(5, 20*sec, 21*sec), step(6, 21*sec, 22*sec)}
	traces = append(traces, `{"name":"megatron.train_step","start_time_unix_nano":0,"end_time_unix_nano":1,"attributes":{"megatron.iteration":9},"resource":{"nv.dl.rank":0}}`)
	logs := []string{
		record(5*sec, "nemo.run.stalled", "paused"), record(10*sec+sec/2, "nemo.run.resumed", "paused"), // the first pause
		record(6*sec, "nemo.run.stalled", "paused"),  // the first pause again
		record(30*sec, "nemo.run.stalled", "paused"), // no pause there
		record(15*sec, "nemo.run.stalled", "behind"), // in the second pause, but behind: and the pause has no paused record
	}
	writeZstd(t, filepath.Join(dir, "traces.jsonl.zst"), traces)
	writeZstd(t, filepath.Join(dir, "logs.jsonl.zst"), logs)
	r := soakRun{Run: "r", Pauses: true}
	judgeSoakRun(t, dir, &r, soakPlan{stallAfter: 2 * time.Second, world: 4})
	assert.Equal(t, 6, r.Steps, "rank 3's steps; rank 0's straggler step left out")
	assert.Equal(t, 2, r.PausesFound)
	assert.Equal(t, map[string]int{"paused": 3, "behind": 1}, r.Stalled)
	assert.Equal(t, 1, r.Resumed)
	assert.Equal(t, 1, r.Missed, "the second pause had no paused record")
	require.Len(t, r.False, 3)
	assert.Contains(t, r.False[0], "paused outside a pause")
	assert.Contains(t, r.False[1], "behind at")
	assert.Contains(t, r.False[2], "2 records for the pause")

	healthy := soakRun{Run: "h"}
	judgeSoakRun(t, dir, &healthy, soakPlan{stallAfter: 2 * time.Second, world: 4})
	assert.Len(t, healthy.False, 4, "every stalled record on a healthy run is false")
}

func writeZstd(t *testing.T, path string, lines []string) {
	t.Helper()
	enc, err := zstd.NewWriter(nil)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, enc.EncodeAll([]byte(strings.Join(lines, "\n")+"\n"), nil), 0o600))
}

// The median round is reported with every round's figures, in run order;
// the report lists them.
func TestMedianRound(t *testing.T) {
	rounds := []phaseResult{
		{Phase: fixed100k.name, CPUPerMillion: 6.5, PeakRSSMiB: 280, LoadAvg: "first"},
		{Phase: fixed100k.name, CPUPerMillion: 5.1, PeakRSSMiB: 270, LoadAvg: "second"},
		{Phase: fixed100k.name, CPUPerMillion: 5.9, PeakRSSMiB: 290, LoadAvg: "third"},
	}
	m := medianRound(rounds)
	assert.Equal(t, "third", m.LoadAvg, "the round of median CPU, whole")
	assert.InDelta(t, 5.9, m.CPUPerMillion, 1e-9)
	assert.Equal(t, []float64{6.5, 5.1, 5.9}, m.CPURounds)
	assert.Equal(t, []float64{280, 270, 290}, m.RSSRounds)

	table := roundsTable([]scenarioResult{
		{Name: "preset", Phases: []phaseResult{m}},
		{Name: "ceiling", Phases: []phaseResult{rounds[0]}},
	})
	assert.Contains(t, table, "| preset | 100k/s | 6.50, 5.10, 5.90 | 5.90 | 280, 270, 290 |")
	assert.NotContains(t, table, "ceiling", "a scenario measured once is not listed")
	assert.Empty(t, roundsTable([]scenarioResult{{Name: "ceiling", Phases: []phaseResult{rounds[0]}}}))
}
