// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoviewexporter

import (
	"cmp"
	"encoding/base64"
	"path/filepath"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/golden"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/nemo-lens/otelcol-nemo/internal/runrecords"
)

// The page reads what nemo_steps writes: these tests feed nemo_steps' own
// golden outputs (processor/nemostepsprocessor/testdata), not an imitation
// of them, so that a change to either side of the contract
// (internal/runrecords) that the other does not follow fails here.

// nemoStepsGolden is one of nemo_steps' golden cases.
func nemoStepsGolden(name string) string {
	return filepath.Join("..", "..", "processor", "nemostepsprocessor", "testdata", name)
}

// nemoStepsShapes are the four Megatron shapes of nemo_steps' cases.
var nemoStepsShapes = []string{"train_step_in_job", "train_iteration_in_job", "train_step_own_root", "train_iteration_own_root"}

// TestNemoStepsStepMetricsMakeThePage: nemo_steps' step metrics of its
// golden job (2 ranks, iterations 1-3, rank 1 computing twice as long on
// iteration 2: busy 0.23 s against 0.13 s, relative score 0.565) make the
// heatmap, the straggler list and the step times, in all four shapes.
func TestNemoStepsStepMetricsMakeThePage(t *testing.T) {
	for _, shape := range nemoStepsShapes {
		t.Run(shape, func(t *testing.T) {
			md, err := golden.ReadMetrics(filepath.Join(nemoStepsGolden(shape), "expected.yaml"))
			require.NoError(t, err)
			s := testStore(10, 10, 10)
			s.addMetrics(md)

			d, ok := s.detail("golden-run")
			require.True(t, ok, "the run's page, under its nemo.run.id")
			assert.Equal(t, []int64{1, 2, 3}, d.Iterations)
			require.Len(t, d.RankList, 2, "rank 1 sent dl.rank as a string: one row all the same")
			assert.Equal(t, int64(0), d.RankList[0].Rank)
			assert.Equal(t, int64(1), d.RankList[1].Rank)
			assert.NotEmpty(t, d.RankList[1].Host)

			require.Len(t, d.Stragglers, 1)
			st := d.Stragglers[0]
			assert.Equal(t, int64(1), st.Rank)
			assert.Equal(t, int64(2), st.Iteration)
			assert.InDelta(t, 0.565, st.Relative, 0.001)
			assert.InDelta(t, 0.23, st.Busy, 1e-9)

			require.Len(t, d.Heatmap, 3)
			row, err := base64.StdEncoding.DecodeString(d.Heatmap[1])
			require.NoError(t, err)
			assert.Equal(t, []byte{255, quantize(st.Relative)}, row, "iteration 2: rank 1's cell")
			steps := d.StepTimes[1]
			assert.Equal(t, int64(1), steps.SlowestRank)
			assert.InDelta(t, 0.23, steps.SlowestBusy, 1e-9)
			assert.Equal(t, 2, steps.Ranks)
		})
	}
}

// TestNemoStepsStallRecordsShowOnThePage: nemo_steps' stall records of
// each of its stall cases (their step metrics first, then the stalled
// record, then the rest) show the stall while it lasts, naming whom the
// record names, and as over once resumed.
func TestNemoStepsStallRecordsShowOnThePage(t *testing.T) {
	cases := []struct {
		dir, run  string
		kind      string
		state     string // the run's while the stall lasts
		ranks     []int64
		lostHosts []string
		stage     *int64
	}{
		{dir: "stall_behind_train_step_in_job", kind: "behind", ranks: []int64{2}},
		{dir: "stall_behind_train_iteration_in_job", kind: "behind", ranks: []int64{2}},
		{dir: "stall_behind_train_step_own_root", kind: "behind", ranks: []int64{2}},
		{dir: "stall_behind_train_iteration_own_root", kind: "behind", ranks: []int64{2}},
		{dir: "stall_lost_host", kind: "behind", ranks: []int64{0, 1}, lostHosts: []string{"node000"}},
		{dir: "stall_paused", kind: "paused", state: "paused", ranks: []int64{}},
		{dir: "stall_pipeline_stage", run: "golden-pp", kind: "behind", ranks: []int64{5}, stage: new(int64(2))},
	}
	for _, tc := range cases {
		t.Run(tc.dir, func(t *testing.T) {
			md, err := golden.ReadMetrics(filepath.Join(nemoStepsGolden(tc.dir), "expected.yaml"))
			require.NoError(t, err)
			ld, err := golden.ReadLogs(filepath.Join(nemoStepsGolden(tc.dir), "expected_logs.yaml"))
			require.NoError(t, err)
			stalled, rest := splitRecords(ld, runrecords.EventStalled)
			require.Equal(t, 1, stalled.LogRecordCount(), "one stalled record per stall")

			s := testStore(10, 10, 10)
			s.addMetrics(md)
			s.addLogs(stalled)
			run := cmp.Or(tc.run, "golden-stall")
			d, ok := s.detail(run)
			require.True(t, ok)
			assert.Equal(t, cmp.Or(tc.state, "stalled"), d.State)
			assert.Equal(t, tc.kind, d.StallKind)
			require.Len(t, d.Stalls, 1)
			st := d.Stalls[0]
			assert.True(t, st.Ongoing)
			assert.Equal(t, int64(5), st.Iteration)
			assert.Equal(t, tc.ranks, st.Ranks)
			assert.Len(t, st.Hosts, min(len(tc.ranks), 1), "the culprits' host")
			assert.Equal(t, tc.lostHosts, st.LostHosts)
			assert.Equal(t, tc.stage, st.Stage)
			assert.Contains(t, st.Message, "run "+run+" ")
			assert.Contains(t, st.Message, " at iteration 5 ")

			s.addLogs(rest)
			d, _ = s.detail(run)
			require.Len(t, d.Stalls, 1)
			assert.False(t, d.Stalls[0].Ongoing, "resumed")
			assert.Positive(t, d.Stalls[0].Seconds)
			assert.NotEqual(t, "stalled", d.State)
		})
	}
}

// splitRecords splits ld into the records of event name and the others,
// each under its resource.
func splitRecords(ld plog.Logs, name string) (matching, rest plog.Logs) {
	matching, rest = plog.NewLogs(), plog.NewLogs()
	ld.CopyTo(matching)
	ld.CopyTo(rest)
	keep := func(want bool) func(plog.LogRecord) bool {
		return func(rec plog.LogRecord) bool {
			v, _ := rec.Attributes().Get(runrecords.EventName)
			return (v.Str() == name) != want
		}
	}
	for _, out := range []struct {
		ld   plog.Logs
		want bool
	}{{matching, true}, {rest, false}} {
		for _, rl := range out.ld.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				sl.LogRecords().RemoveIf(keep(out.want))
			}
		}
	}
	return matching, rest
}
