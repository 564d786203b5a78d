// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"go.opentelemetry.io/otel/attribute"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// The soak: the default preset as committed, with a short stall_after,
// under synchronous jobs that train in real time for a long while, in
// both step taxonomies and trace shapes, half of them healthy (step times
// varying by ±50% from step to step) and half also pausing evenly (every
// rank finishes the same iteration, then nothing for longer than
// stall_after, as for a checkpoint save). It counts the stall records the
// preset wrote into each run's logs file and fails on a false one: any of
// kind behind, any on a healthy run, a paused one outside the pauses.

// soakName selects the soak in -only.
const soakName = "soak"

var soakLen = flag.Duration("soak", 10*time.Minute, "-full: how long the soak's jobs train")

// soakPlan is what the soak's jobs do.
type soakPlan struct {
	load time.Duration
	// stallAfter is NEMO_STALL_AFTER; compute the median compute of a
	// step, varying by ±50% from step to step; every pauseEvery steps a
	// pausing run pauses for pause.
	stallAfter, compute, pause time.Duration
	pauseEvery, world          int
}

// fullSoak and smokeSoak are the soak of a full run (-full) and of the
// smoke run (go test . in bench/): a few pauses in seconds.
var (
	fullSoak  = soakPlan{load: 10 * time.Minute, stallAfter: 3 * time.Second, compute: 170 * time.Millisecond, pause: 8 * time.Second, pauseEvery: 40, world: 4}
	smokeSoak = soakPlan{load: 8 * time.Second, stallAfter: 2 * time.Second, compute: 70 * time.Millisecond, pause: 4 * time.Second, pauseEvery: 15, world: 4}
)

// step is the plan's mean step: the compute of the slowest rank (each
// rank's varies by ±5% around the step's), the gradient sync and the
// optimizer.
func (p soakPlan) step() time.Duration {
	return p.compute*104/100 + lensemu.GradSyncTime + lensemu.OptimizerTime
}

// steps is how many steps a run trains to last about p.load.
func (p soakPlan) steps(pauses bool) int {
	if !pauses {
		return int(p.load / p.step())
	}
	cycle := time.Duration(p.pauseEvery)*p.step() + p.pause
	return max(int(p.load/cycle)*p.pauseEvery, p.pauseEvery+1)
}

// soakShapes are the four ways Megatron's steps arrive.
var soakShapes = []struct {
	name     string
	stepName string
	roots    bool
}{
	{"train_step/in_job", attrkey.MegatronTrainStep, false},
	{"train.iteration/in_job", attrkey.MegatronTrainIteration, false},
	{"train_step/own_root", attrkey.MegatronTrainStep, true},
	{"train.iteration/own_root", attrkey.MegatronTrainIteration, true},
}

// soakRun is one run's outcome.
type soakRun struct {
	Run    string `json:"run"`
	Shape  string `json:"shape"`
	Pauses bool   `json:"pausing"`
	// Steps are the steps the run completed (its last rank's step spans in
	// the traces file); PausesPlanned those it was told to pause before,
	// PausesFound the gaps between two steps longer than stall_after.
	Steps         int `json:"steps"`
	PausesPlanned int `json:"pauses_planned"`
	PausesFound   int `json:"pauses_found"`
	// LongestGap is the longest time between one step's end and the
	// next's start outside the pauses: the jobs' own jitter.
	LongestGapMs float64 `json:"longest_gap_ms_outside_pauses"`
	// Stalled counts the nemo.run.stalled records by kind, Resumed the
	// nemo.run.resumed ones.
	Stalled map[string]int `json:"stalled_records"`
	Resumed int            `json:"resumed_records"`
	// False are the stalled records that should not be there; Missed the
	// pauses without a paused record.
	False  []string `json:"false_stalls,omitempty"`
	Missed int      `json:"pauses_missed"`
}

// soakResult is the soak's outcome.
type soakResult struct {
	Plan    string  `json:"plan"`
	Seconds float64 `json:"seconds"`
	// LoadAvg and LoadAvgEnd are the machine's load at the soak's start
	// and at its end.
	LoadAvg    string    `json:"machine_load_average"`
	LoadAvgEnd string    `json:"machine_load_average_end"`
	Runs       []soakRun `json:"runs"`
	Status     string    `json:"status"`
}

// falseStalls is every false stall of the soak.
func (s *soakResult) falseStalls() int {
	n := 0
	for _, r := range s.Runs {
		n += len(r.False)
	}
	return n
}

// runSoak runs the soak against the default preset as committed.
func runSoak(t *testing.T, root string, plan soakPlan) *soakResult {
	env := map[string]string{
		"NEMO_TELEMETRY_DIR": t.TempDir(), "NEMO_QUEUE_DIR": t.TempDir(),
		"NEMO_STALL_AFTER": plan.stallAfter.String(),
	}
	c := testcollector.Start(t, filepath.Join(root, "configs/file.yaml"), testcollector.Options{Env: env})
	res := &soakResult{
		Plan: fmt.Sprintf("%s of training, NEMO_STALL_AFTER=%s, %d ranks a run, steps of %s ±50%% (median), pauses of %s every %d steps",
			plan.load, plan.stallAfter, plan.world, plan.step().Round(time.Millisecond), plan.pause, plan.pauseEvery),
		LoadAvg: loadAvg(),
	}
	var ranks []lensemu.Rank
	for _, shape := range soakShapes {
		for _, pauses := range []bool{false, true} {
			kind := "healthy"
			if pauses {
				kind = "pausing"
			}
			run := "soak-" + strings.NewReplacer("/", "-", ".", "-").Replace(shape.name) + "-" + kind
			res.Runs = append(res.Runs, soakRun{Run: run, Shape: shape.name, Pauses: pauses})
			barrier := lensemu.NewBarrier(plan.world)
			for i := range plan.world {
				r := lensemu.Rank{
					Endpoint: c.GRPCEndpoint(), Protocol: lensemu.GRPC, RunID: run,
					Rank: i, WorldSize: plan.world, LocalRank: i, Steps: plan.steps(pauses),
					StepSpanName: shape.stepName, StepsAreRoots: shape.roots, NoMetrics: true,
					Resource:        []attribute.KeyValue{attribute.String(attrkey.HostName, fmt.Sprintf("node-%d", i/2))},
					ComputeDuration: soakCompute(run, i, plan.compute),
					Barrier:         barrier,
				}
				if pauses {
					r.PauseBefore, r.PauseEvery, r.Pause = plan.pauseEvery, plan.pauseEvery, plan.pause
				}
				ranks = append(ranks, r)
			}
		}
	}
	// Bounded: the jobs end by themselves after about plan.load; this
	// only guards against a hang.
	ctx, cancel := context.WithTimeout(t.Context(), plan.load*3/2+time.Minute)
	defer cancel()
	started := time.Now()
	_, err := lensemu.Job(ctx, ranks)
	res.Seconds, res.LoadAvgEnd = time.Since(started).Seconds(), loadAvg()
	if err != nil {
		t.Errorf("soak jobs: %v", err)
	}
	if ctx.Err() != nil {
		t.Errorf("the soak's jobs did not end within %s", plan.load*3/2+time.Minute)
	}
	c.Stop() // drains: every record is in the files
	for i := range res.Runs {
		r := &res.Runs[i]
		planned := ranks[i*plan.world]
		for it := 1; it <= planned.Steps; it++ {
			if planned.PausesBefore(it) {
				r.PausesPlanned++
			}
		}
		judgeSoakRun(t, filepath.Join(env["NEMO_TELEMETRY_DIR"], r.Run), r, plan)
	}
	res.Status = "ok"
	if n := res.falseStalls(); n > 0 {
		res.Status = fmt.Sprintf("failed: %d false stalls", n)
		t.Errorf("soak: %d false stalls: %v", n, res.Runs)
	}
	for _, r := range res.Runs {
		if r.Missed > 0 || r.PausesFound != r.PausesPlanned {
			res.Status = "failed: pauses missed"
			t.Errorf("soak: run %s paused %d times (planned %d), %d without a paused record", r.Run, r.PausesFound, r.PausesPlanned, r.Missed)
		}
	}
	return res
}

// soakCompute is a rank's compute on each iteration: the run's step
// varies by ±50% from step to step (deterministically, by iteration), and
// the ranks by ±5% around it.
func soakCompute(run string, rank int, median time.Duration) func(int) time.Duration {
	return func(it int) time.Duration {
		step := 0.5 + unitHash(run, it, -1)         // [0.5, 1.5)
		jitter := 0.95 + unitHash(run, it, rank)/10 // [0.95, 1.05)
		return time.Duration(float64(median) * step * jitter)
	}
}

// unitHash is a number in [0, 1) from its arguments.
func unitHash(run string, it, rank int) float64 {
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "%s/%d/%d", run, it, rank)
	return float64(h.Sum64()%1_000_000) / 1_000_000
}

// judgeSoakRun reads one run's output: its last rank's step spans give
// the pauses, its logs file the stall records.
func judgeSoakRun(t *testing.T, dir string, r *soakRun, plan soakPlan) {
	type window struct{ from, to int64 }
	type step struct {
		it         int64
		start, end int64
	}
	var steps []step
	eachOutputLine(t, dir, "traces", func(rec map[string]any) {
		name, _ := rec["name"].(string)
		if name != attrkey.MegatronTrainStep && name != attrkey.MegatronTrainIteration {
			return
		}
		if rank, _ := rec["resource"].(map[string]any)[attrkey.DLRank].(json.Number); rank.String() != fmt.Sprint(plan.world-1) {
			return // a straggler step of another rank, kept by straggler retention
		}
		it, _ := rec["attributes"].(map[string]any)[attrkey.MegatronIteration].(json.Number).Int64()
		start, _ := rec["start_time_unix_nano"].(json.Number).Int64()
		end, _ := rec["end_time_unix_nano"].(json.Number).Int64()
		steps = append(steps, step{it, start, end})
	})
	slices.SortFunc(steps, func(a, b step) int { return int(a.it - b.it) })
	r.Steps = len(steps)
	var pauses []window
	for i := 1; i < len(steps); i++ {
		gap := time.Duration(steps[i].start - steps[i-1].end)
		if gap > plan.stallAfter {
			pauses = append(pauses, window{steps[i-1].end, steps[i].start})
			continue
		}
		r.LongestGapMs = max(r.LongestGapMs, float64(gap)/1e6)
	}
	r.PausesFound = len(pauses)
	r.Stalled = map[string]int{"behind": 0, "paused": 0}
	found := make([]int, len(pauses))
	// A record is written at the collector's tick after stall_after of
	// silence; the pause ends when the next step starts, and its last
	// spans reach the collector an export delay and a tick later.
	const slack = 3 * time.Second
	eachOutputLine(t, dir, "logs", func(rec map[string]any) {
		attrs, _ := rec["attributes"].(map[string]any)
		event, _ := attrs["event.name"].(string)
		switch event {
		case "nemo.run.resumed":
			r.Resumed++
			return
		case "nemo.run.stalled":
		default:
			return
		}
		kind, _ := attrs["nemo.stall.kind"].(string)
		at, _ := rec["time_unix_nano"].(json.Number).Int64()
		r.Stalled[kind]++
		in := slices.IndexFunc(pauses, func(w window) bool { return at > w.from && at <= w.to+int64(slack) })
		switch {
		case kind != "paused":
			r.False = append(r.False, fmt.Sprintf("%s at %s", kind, time.Unix(0, at).UTC().Format(time.RFC3339Nano)))
		case !r.Pauses || in < 0:
			r.False = append(r.False, fmt.Sprintf("paused outside a pause at %s", time.Unix(0, at).UTC().Format(time.RFC3339Nano)))
		default:
			found[in]++
		}
	})
	for i, n := range found {
		switch {
		case n == 0:
			r.Missed++
		case n > 1:
			r.False = append(r.False, fmt.Sprintf("%d records for the pause at %s", n, time.Unix(0, pauses[i].from).UTC().Format(time.RFC3339Nano)))
		}
	}
}

// eachOutputLine decodes every line of the run directory's signal files
// (zstd-compressed, as the preset writes them; rotated ones too).
func eachOutputLine(t *testing.T, dir, signal string, fn func(map[string]any)) {
	files, _ := filepath.Glob(filepath.Join(dir, signal+"*.jsonl.zst"))
	if len(files) == 0 {
		t.Errorf("%s: no %s file", dir, signal)
	}
	for _, path := range files {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		dec, err := zstd.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewReaderSize(dec, 1<<20)
		for {
			line, err := lines.ReadBytes('\n')
			if len(line) > 0 {
				d := json.NewDecoder(bytes.NewReader(line))
				d.UseNumber()
				var rec map[string]any
				if derr := d.Decode(&rec); derr != nil {
					t.Fatalf("%s: %v: %.200s", path, derr, line)
				}
				fn(rec)
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		}
		dec.Close()
	}
}

// soakTable is the soak's section of the report.
func soakTable(s *soakResult) string {
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("## Soak: stalls on healthy and pausing runs\n\n")
	w("The default preset as committed (`configs/file.yaml`) under synchronous jobs emulated with the OpenTelemetry SDK\n")
	w("(`internal/testing/lensemu`), training in real time: %s. Both step taxonomies and trace shapes; in each, one run\n", s.Plan)
	w("healthy and one also pausing evenly (every rank finishes the same iteration, then nothing, as for a checkpoint save).\n")
	w("The stall records are counted in each run's `logs.jsonl.zst`; the pauses are the gaps longer than stall_after between\n")
	w("two steps of the run's last rank in its `traces.jsonl.zst`. A false stall is a record of kind `behind`, any record on a\n")
	w("healthy run, or a `paused` one outside a pause. The jobs trained for %s (load average %s at the start, %s at the end).\n\n",
		(time.Duration(s.Seconds) * time.Second).Round(time.Second), s.LoadAvg, s.LoadAvgEnd)
	w("| run | steps | pauses (planned / found) | stalled: paused | stalled: behind | resumed | false stalls | pauses missed | longest gap outside pauses, ms |\n")
	w("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	var steps, planned, pauses, paused, behind, resumed, missed int
	for _, r := range s.Runs {
		w("| %s | %s | %d / %d | %d | %d | %d | %d | %d | %.0f |\n", r.Run, thousands(float64(r.Steps)), r.PausesPlanned, r.PausesFound,
			r.Stalled["paused"], r.Stalled["behind"], r.Resumed, len(r.False), r.Missed, r.LongestGapMs)
		steps, planned, pauses, paused, behind, resumed, missed = steps+r.Steps, planned+r.PausesPlanned, pauses+r.PausesFound,
			paused+r.Stalled["paused"], behind+r.Stalled["behind"], resumed+r.Resumed, missed+r.Missed
	}
	w("| **%d runs** | %s | %d / %d | %d | %d | %d | **%d** | %d | |\n\n", len(s.Runs), thousands(float64(steps)), planned, pauses, paused, behind, resumed, s.falseStalls(), missed)
	w("Status: %s.\n\n", s.Status)
	return b.String()
}

// soakGoal is the goal for the soak, and where the soak stands.
func soakGoal(s *soakResult) [2]string {
	goal := "zero false stalls on healthy and pausing runs over a 10-minute soak with step times varying by ±50%"
	switch {
	case s == nil:
		return [2]string{goal, "not measured"}
	case s.Status != "ok":
		return [2]string{goal, fmt.Sprintf("not met: %s (%s of training)", s.Status, (time.Duration(s.Seconds) * time.Second).Round(time.Second))}
	}
	return [2]string{goal, fmt.Sprintf("met: 0 false stalls in %s of training, every pause reported as paused", (time.Duration(s.Seconds) * time.Second).Round(time.Second))}
}
