// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package lensfixture

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/stepbusy"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

func TestRankAttributes(t *testing.T) {
	got := pcommon.NewMap()
	Rank{Run: "run-a", Rank: 9, WorldSize: 16}.PutResource(got)
	assert.Equal(t, map[string]any{
		"service.name": "nemo", "service.instance.id": "run-a-rank9", "nemo.run.id": "run-a",
		"nv.dl.rank": int64(9), "nv.dl.world_size": int64(16), "nv.dl.local_rank": int64(1),
		"host.name": "node001", "process.pid": int64(10009),
	}, got.AsRaw())

	got = pcommon.NewMap()
	Rank{Rank: 3, AsString: true, LegacyKeys: true, NoLocalRank: true, NoHost: true, Group: "policy"}.PutResource(got)
	assert.Equal(t, map[string]any{
		"service.name": "nemo", "service.instance.id": "norun-rank3", "rl.worker_group": "policy", "dl.rank": "3",
	}, got.AsRaw())
}

func TestFleetMixesSpellings(t *testing.T) {
	ranks := Fleet(Rank{Run: "r", WorldSize: 4})
	require.Len(t, ranks, 4)
	var spellings []string
	for _, r := range ranks {
		m := pcommon.NewMap()
		r.PutResource(m)
		for _, k := range []string{attrkey.DLRank, attrkey.LegacyDLRank} {
			if v, ok := m.Get(k); ok {
				spellings = append(spellings, k+"="+v.Type().String())
			}
		}
	}
	assert.Equal(t, []string{"nv.dl.rank=Int", "nv.dl.rank=Str", "dl.rank=Int", "dl.rank=Str"}, spellings)
}

// TestStepIsSynchronous checks the rule every test relies on: every rank's
// step starts and ends together, and the busy time the product measures
// from the wait spans is the rank's own compute plus optimizer.
func TestStepIsSynchronous(t *testing.T) {
	for _, shape := range Shapes {
		t.Run(shape.String(), func(t *testing.T) {
			run := Run{
				Ranks: Fleet(Rank{Run: "sync", WorldSize: 4}), Shape: shape,
				Step:    Step{GradSync: 30 * time.Millisecond, Optimizer: 20 * time.Millisecond, RecvWait: 5 * time.Millisecond, MicroBatches: 3},
				Compute: func(rank, _ int64) time.Duration { return time.Duration(100+100*rank) * time.Millisecond },
			}
			waits, err := steps.ParsePatterns(steps.DefaultWaitSpans())
			require.NoError(t, err)
			td := run.Iteration(7)
			require.Equal(t, 4, td.ResourceSpans().Len())
			var ends []pcommon.Timestamp
			for i := range td.ResourceSpans().Len() {
				spans := td.ResourceSpans().At(i).ScopeSpans().At(0).Spans()
				require.Equal(t, SpansPerStep(3, true), spans.Len())
				step := spans.At(spans.Len() - 1) // exported last
				require.Equal(t, shape.StepName, step.Name())
				iteration, _ := step.Attributes().Get(attrkey.MegatronIteration)
				assert.Equal(t, int64(7), iteration.Int())
				assert.Equal(t, shape.StepsAreRoots, step.ParentSpanID().IsEmpty())
				ends = append(ends, step.EndTimestamp())

				rank := int64(i)
				var intervals []stepbusy.Interval
				seen := map[pcommon.SpanID]bool{}
				for k := range spans.Len() {
					s := spans.At(k)
					assert.Equal(t, step.TraceID(), s.TraceID())
					assert.False(t, seen[s.SpanID()], "a parent is exported after its children")
					seen[s.SpanID()] = true
					if k < spans.Len()-1 {
						assert.LessOrEqual(t, s.EndTimestamp(), step.EndTimestamp())
					}
					info := ParseSpanID(s.SpanID())
					assert.Equal(t, SpanInfo{Kind: KindStep, Rank: rank, Iteration: 7, Index: info.Index}, info)
					if waits.Match(s.Name()) {
						intervals = append(intervals, stepbusy.Interval{Start: int64(s.StartTimestamp()), End: int64(s.EndTimestamp())})
					}
				}
				want := run.StepOf(rank, 7)
				assert.Equal(t, want.Busy(), time.Duration(stepbusy.Busy(int64(step.StartTimestamp()), int64(step.EndTimestamp()), intervals)))
				assert.Equal(t, 400*time.Millisecond+50*time.Millisecond, want.Duration())
			}
			for _, e := range ends {
				assert.Equal(t, ends[0], e, "every rank's step ends together")
			}
		})
	}
}

func TestTraceShapes(t *testing.T) {
	rank := Rank{Run: "r", Rank: 2}
	inJob := Run{Ranks: []Rank{rank}}
	roots := Run{Ranks: []Rank{rank}, Shape: Shape{StepName: attrkey.MegatronTrainIteration, StepsAreRoots: true}}
	assert.Equal(t, inJob.TraceID(rank, 1), inJob.TraceID(rank, 2), "one trace per rank for the whole job")
	assert.Equal(t, inJob.TraceID(rank, 1), inJob.TraceID(rank, -1))
	assert.NotEqual(t, roots.TraceID(rank, 1), roots.TraceID(rank, 2), "a trace per step")
	assert.NotEqual(t, inJob.TraceID(rank, 1), inJob.TraceID(Rank{Run: "other", Rank: 2}, 1))

	spans := ptrace.NewSpanSlice()
	inJob.AppendModelInit(spans, rank)
	inJob.AppendStep(spans, rank, 0)
	inJob.AppendCheckpoint(spans, rank, 0)
	inJob.AppendJobEnd(spans, rank, 0)
	byID := map[pcommon.SpanID]ptrace.Span{}
	for i := range spans.Len() {
		byID[spans.At(i).SpanID()] = spans.At(i)
	}
	for i := range spans.Len() {
		s := spans.At(i)
		if s.Name() == Pretrain {
			assert.True(t, s.ParentSpanID().IsEmpty())
			continue
		}
		parent, ok := byID[s.ParentSpanID()]
		require.True(t, ok, "%s has its parent in the job", s.Name())
		assert.True(t, parent.StartTimestamp() <= s.StartTimestamp() && s.EndTimestamp() <= parent.EndTimestamp(), "%s within %s", s.Name(), parent.Name())
	}
}

func TestExportOrder(t *testing.T) {
	plans := DefaultStep.Plans(attrkey.MegatronTrainStep)
	order := ExportOrder(plans)
	require.Len(t, order, SpansPerStep(2, false))
	assert.Equal(t, 0, order[len(order)-1], "the step span ends last")
	at := map[int]int{}
	for pos, i := range order {
		at[i] = pos
	}
	for i, p := range plans {
		if p.Parent >= 0 {
			assert.Less(t, at[i], at[p.Parent], "%s before its parent %s", p.Name, plans[p.Parent].Name)
		}
	}
}

func TestMetricsAndLogs(t *testing.T) {
	run := Run{Ranks: []Rank{{Run: "m", Rank: 0}}}
	ms := pmetric.NewMetricSlice()
	run.AppendMetrics(ms, run.Ranks[0], 3)
	require.Equal(t, MetricsPerStep, ms.Len())
	names := map[string]bool{}
	for i := range ms.Len() {
		names[ms.At(i).Name()] = true
		assert.Equal(t, 1, dataPoints(ms.At(i)), ms.At(i).Name())
	}
	assert.Len(t, names, MetricsPerStep)
	logs := plog.NewLogRecordSlice()
	lr := run.AppendLog(logs, run.Ranks[0], 3, plog.SeverityNumberError, "optimizer step failed")
	assert.Equal(t, "ERROR", lr.SeverityText())
	it, _ := lr.Attributes().Get(attrkey.MegatronIteration)
	assert.Equal(t, int64(3), it.Int())
}

func dataPoints(m pmetric.Metric) int {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return m.Gauge().DataPoints().Len()
	case pmetric.MetricTypeHistogram:
		return m.Histogram().DataPoints().Len()
	case pmetric.MetricTypeSum:
		return m.Sum().DataPoints().Len()
	}
	return 0
}

func TestAppendStepPartsAndSpans(t *testing.T) {
	rank := Rank{Run: "p", Rank: 1, HostName: "dgx-07", PID: 42}
	run := Run{Ranks: []Rank{{Run: "p", Rank: 0}, rank}, Compute: func(r, _ int64) time.Duration { return time.Duration(r+1) * 50 * time.Millisecond }}
	whole := ptrace.NewSpanSlice()
	at := run.AppendStep(whole, rank, 3)
	children, step := ptrace.NewSpanSlice(), ptrace.NewSpanSlice()
	assert.Equal(t, -1, run.AppendStepPart(children, rank, 3, StepChildren))
	assert.Equal(t, 0, run.AppendStepPart(step, rank, 3, StepSpan))
	require.Equal(t, whole.Len(), children.Len()+step.Len())
	assert.Equal(t, whole.At(at).SpanID(), step.At(0).SpanID())
	assert.Equal(t, DefaultStep.Spans(), whole.Len())

	spans := ptrace.NewSpanSlice()
	run.AppendSpans(spans, rank, 25)
	require.Equal(t, 25, spans.Len(), "cut wherever a step is")
	assert.Equal(t, int64(2), ParseSpanID(spans.At(24).SpanID()).Iteration)

	memo := run.Memoized()
	for it := range int64(3) {
		assert.Equal(t, run.StepOf(0, it), memo.StepOf(0, it))
		assert.Equal(t, run.StepOf(1, it), memo.StepOf(1, it), "remembered")
	}
	m := pcommon.NewMap()
	rank.PutResource(m)
	host, _ := m.Get("host.name")
	pid, _ := m.Get("process.pid")
	assert.Equal(t, "dgx-07", host.Str())
	assert.Equal(t, int64(42), pid.Int())
}

func TestOverlappingStepsAreAMistake(t *testing.T) {
	run := Run{Ranks: []Rank{{Rank: 0}}, Period: 100 * time.Millisecond} // DefaultStep lasts 100ms
	assert.PanicsWithValue(t, "lensfixture: iteration 1 lasts 100ms, not less than the run's Period 100ms: raise Run.Period", func() {
		run.AppendStep(ptrace.NewSpanSlice(), run.Ranks[0], 1)
	})
}
