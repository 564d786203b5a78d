// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// Side by side: one job sent twice, through two tiers as committed (two
// agents, one per node, in front of two gateways) and to one collector
// (configs/file.yaml, the default preset); the gateway that holds the run
// must decide what the one collector decides.

// sideBySide is the two tiers and the one collector, started with the
// presets as committed.
type sideBySide struct {
	agents []*testcollector.Collector
	gws    []*gateway
	one    *testcollector.Collector
	oneDir string
}

// startSideBySide starts both with the stall and decision waits short.
func startSideBySide(t *testing.T) *sideBySide {
	t.Helper()
	env := map[string]string{"NEMO_STALL_AFTER": stallAfter.String(), "NEMO_STRAGGLER_WAIT": "2s", "NEMO_PROGRESS_INTERVAL": "500ms"}
	agents, gws := summaryTier(t, env)
	oneEnv := testEnv(t)
	asCommitted(env)(oneEnv)
	one := testcollector.Start(t, testcollector.Config(t, "file.yaml"), testcollector.Options{Env: oneEnv})
	s := &sideBySide{agents: agents, gws: gws, one: one, oneDir: oneEnv["NEMO_TELEMETRY_DIR"]}
	t.Cleanup(s.stop)
	return s
}

// viaAgents sends ranks 0 and 1 to one agent (a node), 2 and 3 to the
// other; viaOne sends every rank to the one collector.
func (s *sideBySide) viaAgents(rank int) *testcollector.Collector { return s.agents[rank/2] }
func (s *sideBySide) viaOne(int) *testcollector.Collector         { return s.one }

func (s *sideBySide) stop() {
	stopTier(s.agents, s.gws)
	s.one.Stop()
}

// gatewayOf is the directory and page port of the gateway that holds run.
func (s *sideBySide) gatewayOf(t *testing.T, run string) (dir string, viewPort int) {
	t.Helper()
	var at []int
	for i, g := range s.gws {
		if pageKey(t, g.ViewPort, run) != "" {
			at = append(at, i)
		}
	}
	if len(at) != 1 {
		t.Fatalf("%s is on the pages of gateways %v, want exactly one", run, at)
	}
	return s.gws[at[0]].dir(), s.gws[at[0]].ViewPort
}

// verdicts are what a collector decided of one run: what the tiers'
// gateway and one collector must agree on.
type verdicts struct {
	// steps holds every per-rank step point (stepGauges) by gauge, rank
	// and time, and the run's last nemo.step.stragglers count (rank -1).
	steps map[stepPoint]float64
	// kept are the steps kept as a straggler's, "rank/iteration", with
	// the number of their spans.
	kept map[string]int
	// stalls are the stall records, in order, without their lengths (the
	// collector's clock, not the job's).
	stalls []string
	// goodput is the final nemo.run.goodput record's attributes.
	goodput map[string]any
	// page is what the run page shows of the steps: ranks, rank list,
	// iterations, heatmap, step times and straggler rows.
	page map[string]any
}

type stepPoint struct {
	name string
	rank int64
	time string
}

// decided reads the verdicts of run from a collector's telemetry
// directory and page; goodput says to expect a final goodput record.
func decided(t *testing.T, dir string, viewPort int, run string, goodput bool) verdicts {
	t.Helper()
	got := readTelemetry(t, dir)
	v := verdicts{steps: map[stepPoint]float64{}, kept: map[string]int{}}
	for _, p := range got.StepPoints {
		if p.resource()["nemo.run.id"] != run {
			continue
		}
		val, _ := p["value"].(json.Number).Float64()
		switch name := p.str("name"); {
		case slices.Contains(stepGauges, name):
			r, _ := p.attributes()["nv.dl.rank"].(json.Number).Int64()
			v.steps[stepPoint{name, r, fmt.Sprint(p["time_unix_nano"])}] = val
		case name == "nemo.step.stragglers":
			k := stepPoint{name: name, rank: -1}
			v.steps[k] = max(v.steps[k], val)
		}
	}
	// A kept step is kept whole: each kept span counts for the step span
	// above it (the one with the iteration).
	parent, step := map[string]string{}, map[string]string{} // span id -> parent id, step span id -> "rank/iteration"
	var kept []record
	for _, s := range got.SpanRecords {
		if s.resource()["nemo.run.id"] != run || s.attributes()[attrkey.KeptReason] != "straggler" {
			continue
		}
		kept = append(kept, s)
		parent[s.str("span_id")] = s.str("parent_id")
		if it := s.attributes()[attrkey.MegatronIteration]; it != nil {
			step[s.str("span_id")] = fmt.Sprintf("%d/%v", s.rank(), it)
		}
	}
	for _, s := range kept {
		key := fmt.Sprintf("%d/outside a kept step (%s)", s.rank(), s.str("name"))
		for id := s.str("span_id"); id != ""; id = parent[id] {
			if k, ok := step[id]; ok {
				key = k
				break
			}
		}
		v.kept[key]++
	}
	for _, r := range got.StallRecords {
		if r.resource()["nemo.run.id"] != run {
			continue
		}
		attrs := maps.Clone(r.attributes())
		delete(attrs, "nemo.stall.seconds")
		v.stalls = append(v.stalls, fmt.Sprint(attrs))
	}
	if goodput {
		rec, ok := finalGoodputOf(got, run)
		if !ok {
			t.Fatalf("%s: no final goodput record of %s", dir, run)
		}
		v.goodput = rec.attributes()
	}
	v.page = runPage(t, viewPort, run)
	return v
}

// pageKey is run's key on the page at viewPort ("": not there).
func pageKey(t *testing.T, viewPort int, run string) string {
	t.Helper()
	var runs []struct{ Key, ID string }
	getJSON(t, fmt.Sprintf("http://127.0.0.1:%d/api/runs", viewPort), &runs)
	for _, r := range runs {
		if r.ID == run {
			return r.Key
		}
	}
	return ""
}

// runPage is what the page at viewPort shows of run's steps.
func runPage(t *testing.T, viewPort int, run string) map[string]any {
	t.Helper()
	return stepsShown(runDetail(t, viewPort, run))
}

// runDetail is run's page as /api/runs/<key> has it.
func runDetail(t *testing.T, viewPort int, run string) map[string]any {
	t.Helper()
	var page map[string]any
	getJSON(t, fmt.Sprintf("http://127.0.0.1:%d/api/runs/%s", viewPort, pageKey(t, viewPort, run)), &page)
	return page
}

// stepsShown is what a run page shows of the steps.
func stepsShown(page map[string]any) map[string]any {
	shown := map[string]any{}
	for _, k := range []string{"ranks", "rank_list", "iterations", "heatmap", "step_times", "stragglers"} {
		shown[k] = page[k]
	}
	return shown
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url) //nolint:gosec,noctx // G107: the test's own collector
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		t.Fatalf("%s: %v", url, err)
	}
}

// compareVerdicts fails the test where the tiers decided otherwise than
// one collector; wall is the run's wall time in seconds (goodput's
// tolerance is 1% of it).
func compareVerdicts(t *testing.T, tiers, one verdicts, wall float64) {
	t.Helper()
	if len(one.steps) == 0 {
		t.Fatal("one collector wrote no step points")
	}
	var diffs []string
	for k, want := range one.steps {
		got, ok := tiers.steps[k]
		switch {
		case !ok:
			diffs = append(diffs, fmt.Sprintf("%s of rank %d at %s: one collector wrote %.4f, the gateway nothing", k.name, k.rank, k.time, want))
		case math.Abs(got-want) > 0.001:
			diffs = append(diffs, fmt.Sprintf("%s of rank %d at %s: one collector %.4f, the gateway %.4f", k.name, k.rank, k.time, want, got))
		}
	}
	for k, got := range tiers.steps {
		if _, ok := one.steps[k]; !ok {
			diffs = append(diffs, fmt.Sprintf("%s of rank %d at %s: the gateway wrote %.4f, one collector nothing", k.name, k.rank, k.time, got))
		}
	}
	if len(diffs) > 0 {
		slices.Sort(diffs)
		t.Errorf("%d of %d step points differ, among them:\n%s", len(diffs), len(one.steps), strings.Join(diffs[:min(len(diffs), 10)], "\n"))
	}
	if !maps.Equal(tiers.kept, one.kept) {
		t.Errorf("straggler steps kept (rank/iteration: spans): the gateway %v, one collector %v", tiers.kept, one.kept)
	}
	if !slices.Equal(tiers.stalls, one.stalls) {
		t.Errorf("stall records:\n the gateway  %q\n one collector %q", tiers.stalls, one.stalls)
	}
	if len(one.stalls) == 0 && len(tiers.stalls) == 0 && one.goodput != nil {
		t.Error("no stall record on either")
	}
	compareGoodput(t, tiers.goodput, one.goodput, wall)
	if fmt.Sprint(tiers.page) != fmt.Sprint(one.page) {
		t.Errorf("the run pages differ:\n the gateway  %v\n one collector %v", tiers.page, one.page)
	}
	t.Logf("compared %d step points, straggler steps kept %v, stall records %q, the page's %v ranks and %d straggler rows",
		len(one.steps), one.kept, one.stalls, one.page["ranks"], len(asList(one.page["stragglers"])))
}

func asList(v any) []any { l, _ := v.([]any); return l }

// compareGoodput compares two final goodput records: every time within
// 1% of wall, the top ranks by rank and host (their seconds likewise),
// the rest equal.
func compareGoodput(t *testing.T, tiers, one map[string]any, wall float64) {
	t.Helper()
	for k, want := range one {
		got := tiers[k]
		switch {
		case strings.HasPrefix(k, "nemo.time.") || k == "nemo.run.wall_seconds":
			if g, w := number(t, got), number(t, want); math.Abs(g-w) > 0.01*wall {
				t.Errorf("goodput %s: the gateway %.3f s, one collector %.3f s (more than 1%% of %.0f s apart)", k, g, w, wall)
			}
		case k == "nemo.goodput":
			if g, w := number(t, got), number(t, want); math.Abs(g-w) > 0.01 {
				t.Errorf("goodput: the gateway %.4f, one collector %.4f", g, w)
			}
		case k == "nemo.goodput.top_ranks":
			if g, w := topRanks(t, got), topRanks(t, want); !slices.Equal(g, w) {
				t.Errorf("goodput's top ranks: the gateway %v, one collector %v", g, w)
			}
		default:
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("goodput %s: the gateway %v, one collector %v", k, got, want)
			}
		}
	}
}

// topRanks is a goodput record's top ranks as "rank@host".
func topRanks(t *testing.T, v any) []string {
	t.Helper()
	list, _ := v.([]any)
	out := make([]string, 0, len(list))
	for _, e := range list {
		m, _ := e.(map[string]any)
		out = append(out, fmt.Sprintf("%v@%v", m["rank"], m["host"]))
	}
	return out
}

// TestTwoTiersDecideAsOneCollector: goodputRun (4 ranks on two hosts, a
// straggler on iterations 3 to 8, saves, evaluations, a hang with a
// stopped rank, a relaunch with new processes) through the tiers (ranks 0
// and 1 behind one agent, 2 and 3 behind the other) and through one
// collector: the gateway writes the same step points (every rank's
// duration, busy and wait time and scores, every step), keeps the same
// straggler steps, writes the same stall records (kind, iteration,
// culprit ranks and hosts), the same goodput within 1% of the wall time in
// every category and the same top ranks (and so, like one collector's,
// within 1% of the emulator's account: checkAccount), and its run page
// shows the same ranks, heatmap, step times and straggler rows. All four
// shapes.
func TestTwoTiersDecideAsOneCollector(t *testing.T) {
	s := startSideBySide(t)
	for name, shape := range stallShapes {
		t.Run(name, func(t *testing.T) {
			run := runName("run-side", name)
			tiers1, tiers2 := goodputRunVia(s.viaAgents, run, shape)
			one1, one2 := goodputRunVia(s.viaOne, run, shape)
			for i := range one1 { // the same job: the same start
				one1[i].Start, one2[i].Start = tiers1[i].Start, tiers2[i].Start
			}
			runJob(t, tiers1)
			runJob(t, one1)
			waitFor(t, deliveryTimeout, "a stall record of "+run+" on both", s.onBoth(t, run, hasStalled))
			runJob(t, tiers2)
			runJob(t, one2)
			waitFor(t, deliveryTimeout, "the final goodput record of "+run+" on both", s.onBoth(t, run, hasFinalGoodput))
			dir, port := s.gatewayOf(t, run)
			tiers := decided(t, dir, port, run, true)
			one := decided(t, s.oneDir, s.one.ViewPort, run, true)
			truth := lensemu.Account(one1, one2)
			compareVerdicts(t, tiers, one, truth.Wall.Seconds())
			checkAccount(t, tiers.goodput, truth)
			if len(one.kept) == 0 {
				t.Error("one collector kept no straggler step: the job has a straggler")
			}
		})
	}
}

// onBoth says has holds for one collector and for a gateway.
func (s *sideBySide) onBoth(t *testing.T, run string, has func(t *testing.T, dir, run string) bool) func() bool {
	return func() bool {
		return has(t, s.oneDir, run) && slices.ContainsFunc(s.gws, func(g *gateway) bool { return has(t, g.dir(), run) })
	}
}

func hasStalled(t *testing.T, dir, run string) bool {
	return hasStallEvent(t, dir, run, "nemo.run.stalled")
}

func hasResumed(t *testing.T, dir, run string) bool {
	return hasStallEvent(t, dir, run, "nemo.run.resumed")
}

func hasStallEvent(t *testing.T, dir, run, event string) bool {
	return len(stallRecordsOf(readTelemetry(t, dir), run, event)) > 0
}

func hasFinalGoodput(t *testing.T, dir, run string) bool {
	_, ok := finalGoodputOf(readTelemetry(t, dir), run)
	return ok
}

// TestTwoTiersPauseAsOneCollector: every rank of a 4-rank job on two
// nodes (ranks 0 and 1 behind one agent, 2 and 3 behind the other) pauses
// before iteration 5 for longer than NEMO_STALL_AFTER, as a run pauses to
// save a checkpoint, then trains on. Through the tiers as through one
// collector: a stall of kind paused that names nobody, then a resumed
// record; and the same step points, kept steps and page. All four shapes.
func TestTwoTiersPauseAsOneCollector(t *testing.T) {
	s := startSideBySide(t)
	for name, shape := range stallShapes {
		t.Run(name, func(t *testing.T) {
			run := runName("run-side-pause", name)
			tiers := jobVia(s.viaAgents, run, 4, 6)
			one := jobVia(s.viaOne, run, 4, 6)
			both := slices.Concat(tiers, one) // one job (one schedule), sent twice
			for i := range both {
				both[i].PauseBefore, both[i].Pause = 5, stallAfter+4*time.Second
				if shape != nil {
					shape(&both[i])
				}
			}
			runJob(t, both)
			waitFor(t, deliveryTimeout, "a resumed record of "+run+" on both", s.onBoth(t, run, hasResumed))
			dir, port := s.gatewayOf(t, run)
			// The resumed record comes with the first step after the pause;
			// the steps after it reach the gateway through the agents' spools
			// a moment later: wait for as many step points as one collector
			// wrote before comparing them.
			var gw, single verdicts
			waitFor(t, deliveryTimeout, "the step points of "+run+" on the gateway", func() bool {
				gw, single = decided(t, dir, port, run, false), decided(t, s.oneDir, s.one.ViewPort, run, false)
				return len(gw.steps) >= len(single.steps)
			})
			compareVerdicts(t, gw, single, 0)
			if !strings.Contains(gw.stalls[0], "nemo.stall.kind:paused") || !strings.Contains(gw.stalls[0], "nemo.stall.culprit_ranks:[] ") {
				t.Errorf("an even pause: want kind paused and no culprit, the gateway wrote %s", gw.stalls[0])
			}
		})
	}
}

// TestTwoTiersDecideAsOneCollectorUnderPipelineParallelism: a job of 4
// pipeline stages x 2 data-parallel copies (the fixture's pipeline: 8
// micro-batches a step, ranks numbered stage x 2 + copy, stages 0 and 1 on
// node 0 behind one agent, 2 and 3 on node 1 behind the other) trains 4
// iterations and hangs in the 5th because the stage-2 rank of copy 1
// (rank 5) stops in the forward of its third micro-batch. Through the
// tiers and through one collector: the same step points, kept steps and
// stall record (stage 2 first, rank 5 and its host the culprit), and the
// same page. All four shapes.
func TestTwoTiersDecideAsOneCollectorUnderPipelineParallelism(t *testing.T) {
	s := startSideBySide(t)
	p := lensfixture.DefaultPipeline
	stop := lensfixture.PipelineStop{Stage: 2, Op: p.ForwardOp(2, 2)}
	for _, shape := range lensfixture.Shapes {
		t.Run(shape.String(), func(t *testing.T) {
			run := runName("run-side-pp", shape.String())
			job := lensfixture.PipelineJob{
				Run: lensfixture.Run{
					Ranks: lensfixture.PipelineRanks(lensfixture.Rank{Run: run, GPUsPerNode: 4}, p.Stages, 2),
					Shape: shape, Start: time.Now().Add(-time.Minute).Truncate(time.Second),
				},
				Pipeline: p, Replicas: 2,
			}
			batches := make([]ptrace.Traces, 0, 5)
			for it := int64(1); it <= 4; it++ {
				batches = append(batches, job.Iteration(it))
			}
			batches = append(batches, job.HungIteration(5, 1, stop))
			for _, td := range batches {
				byNode := splitByRank(td, func(rank int64) int { return int(rank) / 4 })
				for node, part := range byNode {
					sendTraces(t, s.agents[node], part)
				}
				sendTraces(t, s.one, td)
			}
			waitFor(t, deliveryTimeout, "a stall record of "+run+" on both", s.onBoth(t, run, hasStalled))
			dir, port := s.gatewayOf(t, run)
			tiers := decided(t, dir, port, run, false)
			one := decided(t, s.oneDir, s.one.ViewPort, run, false)
			compareVerdicts(t, tiers, one, 0)
			rec := stallRecords(t, dir, run, "nemo.run.stalled")[0].attributes()
			if got := ints(t, rec["nemo.stall.culprit_ranks"]); !slices.Equal(got, []int64{5}) {
				t.Errorf("the gateway's culprit ranks %v, want [5]", got)
			}
			if got := strs(rec["nemo.stall.culprit_hosts"]); !slices.Equal(got, []string{job.Run.Ranks[5].Host()}) {
				t.Errorf("the gateway's culprit hosts %v, want [%s]", got, job.Run.Ranks[5].Host())
			}
			if got := number(t, rec["nemo.stall.first_stage"]); got != 2 {
				t.Errorf("the gateway's first stage %v, want 2", got)
			}
		})
	}
}

// splitByRank splits td's resources by node(rank).
func splitByRank(td ptrace.Traces, node func(rank int64) int) map[int]ptrace.Traces {
	out := map[int]ptrace.Traces{}
	for _, rs := range td.ResourceSpans().All() {
		rank, _, _ := rankattr.Lookup(rs.Resource().Attributes(), rankattr.DefaultRankKeys)
		n := node(rank)
		if _, ok := out[n]; !ok {
			out[n] = ptrace.NewTraces()
		}
		rs.CopyTo(out[n].ResourceSpans().AppendEmpty())
	}
	return out
}

// sendTraces posts td to c's OTLP/HTTP receiver and fails the test unless
// it is accepted whole.
func sendTraces(t *testing.T, c *testcollector.Collector, td ptrace.Traces) {
	t.Helper()
	body, err := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	if status, msg := post(t, fmt.Sprintf("http://127.0.0.1:%d/v1/traces", c.HTTPPort), "application/x-protobuf", "", body); status != http.StatusOK {
		t.Fatalf("traces refused: %d %s", status, msg)
	}
}
