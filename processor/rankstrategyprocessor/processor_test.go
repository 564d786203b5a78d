// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pipeline"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
	"github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor/internal/metadatatest"
)

// mixedFleet is two runs and two NeMo-RL worker groups in one batch: a
// 4096-rank group (ranks 0..4095, the range of the reference vectors), a
// 48-rank group of the same run, the same group name in another run, and a
// Megatron run without worker groups.
func mixedFleet() []lensfixture.Rank {
	return slices.Concat(
		lensfixture.Fleet(lensfixture.Rank{Run: "run-a", Group: "policy", WorldSize: 4096}),
		lensfixture.Fleet(lensfixture.Rank{Run: "run-a", Group: "generation", WorldSize: 48}),
		lensfixture.Fleet(lensfixture.Rank{Run: "run-b", Group: "policy", WorldSize: 100}),
		lensfixture.Fleet(lensfixture.Rank{Run: "run-c", WorldSize: 16}),
	)
}

func TestStrategiesOverFleet(t *testing.T) {
	vectors := loadLensVectors(t)
	sampledKept := map[float64]map[int64]bool{}
	for _, c := range vectors.Cases {
		require.Equal(t, [2]int64{0, 4095}, c.RanksChecked)
		kept := map[int64]bool{}
		for _, r := range c.Kept {
			kept[r] = true
		}
		sampledKept[c.Rate] = kept
	}

	type strategyCase struct {
		name string
		edit func(*Config)
		keep func(p lensfixture.Rank) bool
	}
	cases := []strategyCase{
		{"single_rank last", nil, func(p lensfixture.Rank) bool { return p.Rank == p.WorldSize-1 }},
		{"single_rank 0", func(c *Config) { c.ExportRank = 0 }, func(p lensfixture.Rank) bool { return p.Rank == 0 }},
		{"single_rank 47", func(c *Config) { c.ExportRank = 47 }, func(p lensfixture.Rank) bool { return p.Rank == 47 }},
		{"all_ranks", func(c *Config) { c.Strategy = StrategyAllRanks }, func(lensfixture.Rank) bool { return true }},
		{"first_rank_per_node", func(c *Config) { c.Strategy = StrategyFirstRankPerNode }, func(p lensfixture.Rank) bool { return p.LocalRank() == 0 }},
		{"ranks", func(c *Config) { c.Strategy = StrategyRanks; c.Ranks = "0,7,64-71" }, func(p lensfixture.Rank) bool {
			return p.Rank == 0 || p.Rank == 7 || (p.Rank >= 64 && p.Rank <= 71)
		}},
	}
	for _, c := range vectors.Cases {
		rate := c.Rate
		cases = append(cases, strategyCase{
			fmt.Sprintf("sampled %v", rate),
			func(cfg *Config) { cfg.Strategy = StrategySampled; cfg.SampleRate = rate },
			func(p lensfixture.Rank) bool { return sampledKept[rate][p.Rank] },
		})
	}

	procs := mixedFleet()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var want []string
			for _, p := range procs {
				if tc.keep(p) {
					want = append(want, rankName(p))
				}
			}
			h := newHarness(t, tc.edit)
			ctx := t.Context()
			require.NoError(t, h.traces.ConsumeTraces(ctx, tracesFor(procs)))
			require.NoError(t, h.metrics.ConsumeMetrics(ctx, metricsFor(procs)))
			require.NoError(t, h.logs.ConsumeLogs(ctx, logsFor(procs)))

			assert.Equal(t, want, spanNames(h.tsink.AllTraces()))
			assert.Equal(t, want, metricNames(h.msink.AllMetrics()))
			assert.Equal(t, want, logBodies(h.lsink.AllLogs()))
			if len(want) == 0 {
				// Nothing kept: nothing is passed on, not even an empty batch.
				assert.Empty(t, h.tsink.AllTraces())
				assert.Empty(t, h.msink.AllMetrics())
				assert.Empty(t, h.lsink.AllLogs())
			}
		})
	}
}

// The sampled decision for a rank is the same whether the rank arrives as an
// int or a string, under either spelling.
func TestSampledRankEncodingDoesNotMatter(t *testing.T) {
	const rate = 0.1
	h := newHarness(t, func(c *Config) { c.Strategy = StrategySampled; c.SampleRate = rate })
	var procs []lensfixture.Rank
	for r := range int64(4096) {
		for _, enc := range []struct{ str, old bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
			// The rank alone: no world size, local rank or host.
			procs = append(procs, lensfixture.Rank{
				Run: fmt.Sprintf("str=%v,old=%v", enc.str, enc.old), Rank: r, NoLocalRank: true, NoHost: true, AsString: enc.str, LegacyKeys: enc.old,
			})
		}
	}
	require.NoError(t, h.traces.ConsumeTraces(t.Context(), tracesFor(procs)))

	var want []string
	for _, c := range loadLensVectors(t).Cases {
		if c.Rate != rate {
			continue
		}
		for _, r := range c.Kept {
			for _, p := range procs[4*r : 4*r+4] {
				want = append(want, rankName(p))
			}
		}
	}
	require.NotEmpty(t, want)
	assert.Equal(t, want, spanNames(h.tsink.AllTraces()))
}

func TestOnMissingRank(t *testing.T) {
	noRank := func(td ptrace.Traces, name string, set func(pcommon.Map)) {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("service.name", "not-training")
		set(rs.Resource().Attributes())
		rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName(name)
	}
	build := func() ptrace.Traces {
		td := tracesFor([]lensfixture.Rank{{Run: "r", Rank: 1, WorldSize: 2}, {Run: "r", Rank: 0, WorldSize: 2}})
		noRank(td, "no rank", func(pcommon.Map) {})
		noRank(td, "garbage rank", func(m pcommon.Map) { m.PutStr(attrkey.DLRank, "rank-three") })
		noRank(td, "no world size", func(m pcommon.Map) { m.PutInt(attrkey.DLRank, 5) })
		return td
	}
	for _, tc := range []struct {
		action MissingRankAction
		want   []string
	}{
		{MissingRankKeep, []string{"r//1", "no rank", "garbage rank", "no world size"}},
		{MissingRankDrop, []string{"r//1"}},
	} {
		t.Run(string(tc.action), func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.OnMissingRank = tc.action })
			require.NoError(t, h.traces.ConsumeTraces(t.Context(), build()))
			assert.Equal(t, tc.want, spanNames(h.tsink.AllTraces()))

			missing := []metricdata.DataPoint[int64]{
				{Attributes: itemAttrs("traces", reasonMissingRank), Value: 1},
				{Attributes: itemAttrs("traces", reasonInvalidRank), Value: 1},
				{Attributes: itemAttrs("traces", reasonMissingWorldSize), Value: 1},
			}
			kept := []metricdata.DataPoint[int64]{{Attributes: itemAttrs("traces", reasonSelected), Value: 1}}
			dropped := []metricdata.DataPoint[int64]{{Attributes: itemAttrs("traces", reasonNotSelected), Value: 1}}
			if tc.action == MissingRankKeep {
				kept = append(kept, missing...)
			} else {
				dropped = append(dropped, missing...)
			}
			metadatatest.AssertEqualProcessorRankStrategyItemsKept(t, h.tel, kept, metricdatatest.IgnoreTimestamp())
			metadatatest.AssertEqualProcessorRankStrategyItemsDropped(t, h.tel, dropped, metricdatatest.IgnoreTimestamp())
		})
	}
}

func itemAttrs(signal string, r reason) attribute.Set {
	return attribute.NewSet(attribute.String("otel.signal", signal), attribute.String("reason", r.String()))
}

func TestMissingWorldSizeWarnsOnce(t *testing.T) {
	h := newHarness(t, nil)
	procs := []lensfixture.Rank{{Run: "r", Rank: 3}, {Run: "r", Rank: 2}}
	for range 5 {
		require.NoError(t, h.traces.ConsumeTraces(t.Context(), tracesFor(procs)))
	}
	warnings := h.logged.FilterMessageSnippet("export_rank is -1").All()
	require.Len(t, warnings, 1, "one warning for the traces pipeline, not one per batch")
	fields := warnings[0].ContextMap()
	assert.Equal(t, []any{"nv.dl.world_size", "dl.world_size"}, fields["world_size_keys"])
	assert.Equal(t, "keep", fields["on_missing_rank"])
	// Kept per on_missing_rank=keep.
	assert.Len(t, spanNames(h.tsink.AllTraces()), 10)
}

// erroredTraces is one batch from two ranks of a 2-rank run: rank 1 (kept by
// single_rank) and rank 0 (dropped), each with a normal span, an ERROR span, a
// truncated span (bool) and a truncated span set through an env var (string).
func erroredTraces() ptrace.Traces {
	td := ptrace.NewTraces()
	for _, rank := range []int64{1, 0} {
		rs := td.ResourceSpans().AppendEmpty()
		lensfixture.Rank{Run: "r", Rank: rank, WorldSize: 2}.PutResource(rs.Resource().Attributes())
		named := func(span string) string { return fmt.Sprintf("rank%d %s", rank, span) }
		steps := rs.ScopeSpans().AppendEmpty()
		steps.Scope().SetName("megatron")
		ok := steps.Spans().AppendEmpty()
		ok.SetName(named(attrkey.MegatronTrainStep))
		failed := steps.Spans().AppendEmpty()
		failed.SetName(named(lensfixture.Optimizer))
		failed.Status().SetCode(ptrace.StatusCodeError)
		failed.Status().SetMessage("NaN in grad norm")

		shutdown := rs.ScopeSpans().AppendEmpty()
		shutdown.Scope().SetName("nemo.lens")
		truncated := shutdown.Spans().AppendEmpty()
		truncated.SetName(named(lensfixture.Train))
		truncated.Attributes().PutBool(attrkey.SpanTruncated, true)
		truncatedStr := shutdown.Spans().AppendEmpty()
		truncatedStr.SetName(named(lensfixture.Pretrain))
		truncatedStr.Attributes().PutStr(attrkey.SpanTruncated, "true")
		notTruncated := shutdown.Spans().AppendEmpty()
		notTruncated.SetName(named("megatron.evaluate"))
		notTruncated.Attributes().PutBool(attrkey.SpanTruncated, false)

		// A scope with nothing worth keeping disappears from a dropped rank.
		other := rs.ScopeSpans().AppendEmpty()
		other.Spans().AppendEmpty().SetName(named(lensfixture.LayerForward))
	}
	return td
}

func TestKeepErrorsFromDroppedRanks(t *testing.T) {
	h := newHarness(t, nil)
	require.NoError(t, h.traces.ConsumeTraces(t.Context(), erroredTraces()))
	require.Len(t, h.tsink.AllTraces(), 1)

	want := erroredTraces()
	dropped := want.ResourceSpans().At(1)
	dropped.ScopeSpans().RemoveIf(func(ss ptrace.ScopeSpans) bool {
		ss.Spans().RemoveIf(func(s ptrace.Span) bool {
			switch s.Name() {
			case "rank0 " + lensfixture.Optimizer:
				s.Attributes().PutStr(attrkey.KeptReason, "error")
				return false
			case "rank0 " + lensfixture.Train, "rank0 " + lensfixture.Pretrain:
				s.Attributes().PutStr(attrkey.KeptReason, "truncated")
				return false
			}
			return true
		})
		return ss.Spans().Len() == 0
	})
	require.NoError(t, ptracetest.CompareTraces(want, h.tsink.AllTraces()[0]), "exactly the input, in its order")

	metadatatest.AssertEqualProcessorRankStrategyItemsKept(t, h.tel, []metricdata.DataPoint[int64]{
		{Attributes: itemAttrs("traces", reasonSelected), Value: 6},
		{Attributes: itemAttrs("traces", reasonError), Value: 1},
		{Attributes: itemAttrs("traces", reasonTruncated), Value: 2},
	}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorRankStrategyItemsDropped(t, h.tel, []metricdata.DataPoint[int64]{
		{Attributes: itemAttrs("traces", reasonNotSelected), Value: 3},
	}, metricdatatest.IgnoreTimestamp())
}

func TestKeepErrorsOff(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.KeepErrors = false })
	require.NoError(t, h.traces.ConsumeTraces(t.Context(), erroredTraces()))
	names := spanNames(h.tsink.AllTraces())
	assert.Len(t, names, 6)
	for _, n := range names {
		assert.Contains(t, n, "rank1 ")
	}
	metadatatest.AssertEqualProcessorRankStrategyItemsDropped(t, h.tel, []metricdata.DataPoint[int64]{
		{Attributes: itemAttrs("traces", reasonNotSelected), Value: 6},
	}, metricdatatest.IgnoreTimestamp())
}

// severeLogs is one batch from ranks 1 (kept) and 0 (dropped) of a 2-rank run
// with a record at each severity of interest.
func severeLogs() plog.Logs {
	ld := plog.NewLogs()
	for _, rank := range []int64{1, 0} {
		rl := ld.ResourceLogs().AppendEmpty()
		lensfixture.Rank{Run: "r", Rank: rank, WorldSize: 2}.PutResource(rl.Resource().Attributes())
		records := rl.ScopeLogs().AppendEmpty().LogRecords()
		add := func(body string, sn plog.SeverityNumber, text string) {
			lr := records.AppendEmpty()
			lr.Body().SetStr(fmt.Sprintf("rank%d %s", rank, body))
			lr.SetSeverityNumber(sn)
			lr.SetSeverityText(text)
		}
		add("info", plog.SeverityNumberInfo, "INFO")
		add("warn", plog.SeverityNumberWarn, "WARNING")
		add("error", plog.SeverityNumberError, "ERROR")
		add("fatal", plog.SeverityNumberFatal2, "CRITICAL")
		add("error by text only", plog.SeverityNumberUnspecified, "ERROR")
		add("unspecified", plog.SeverityNumberUnspecified, "")
	}
	return ld
}

func TestKeepSevereLogsFromDroppedRanks(t *testing.T) {
	for _, tc := range []struct {
		severity string
		want     []string
	}{
		{"ERROR", []string{"rank0 error", "rank0 fatal", "rank0 error by text only"}},
		{"WARN", []string{"rank0 warn", "rank0 error", "rank0 fatal", "rank0 error by text only"}},
		{"FATAL", []string{"rank0 fatal"}},
	} {
		t.Run(tc.severity, func(t *testing.T) {
			h := newHarness(t, func(c *Config) { c.KeepLogSeverity = tc.severity })
			require.NoError(t, h.logs.ConsumeLogs(t.Context(), severeLogs()))
			require.Len(t, h.lsink.AllLogs(), 1)
			out := h.lsink.AllLogs()[0]
			require.Equal(t, 2, out.ResourceLogs().Len())

			kept := out.ResourceLogs().At(0).ScopeLogs().At(0).LogRecords()
			require.Equal(t, 6, kept.Len(), "the selected rank keeps everything")
			for i := 0; i < kept.Len(); i++ {
				_, marked := kept.At(i).Attributes().Get(attrkey.KeptReason)
				assert.False(t, marked, "records of a selected rank are not marked")
			}

			rescued := out.ResourceLogs().At(1).ScopeLogs().At(0).LogRecords()
			var bodies []string
			for i := 0; i < rescued.Len(); i++ {
				bodies = append(bodies, rescued.At(i).Body().Str())
				v, ok := rescued.At(i).Attributes().Get(attrkey.KeptReason)
				require.True(t, ok)
				assert.Equal(t, "severity", v.Str())
			}
			assert.Equal(t, tc.want, bodies)

			metadatatest.AssertEqualProcessorRankStrategyItemsKept(t, h.tel, []metricdata.DataPoint[int64]{
				{Attributes: itemAttrs("logs", reasonSelected), Value: 6},
				{Attributes: itemAttrs("logs", reasonSeverity), Value: int64(len(tc.want))},
			}, metricdatatest.IgnoreTimestamp())
			metadatatest.AssertEqualProcessorRankStrategyItemsDropped(t, h.tel, []metricdata.DataPoint[int64]{
				{Attributes: itemAttrs("logs", reasonNotSelected), Value: int64(6 - len(tc.want))},
			}, metricdatatest.IgnoreTimestamp())
		})
	}
}

func TestKeepErrorsOffDropsSevereLogs(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.KeepErrors = false })
	require.NoError(t, h.logs.ConsumeLogs(t.Context(), severeLogs()))
	bodies := logBodies(h.lsink.AllLogs())
	assert.Len(t, bodies, 6)
	for _, b := range bodies {
		assert.Contains(t, b, "rank1 ")
	}
}

func TestMetricsDroppedWholeAndCountedInDataPoints(t *testing.T) {
	h := newHarness(t, nil)
	md := metricsFor(lensfixture.Fleet(lensfixture.Rank{Run: "r", WorldSize: 4}))
	// Give every resource a histogram with three points too: five data points each.
	for i := 0; i < md.ResourceMetrics().Len(); i++ {
		ms := md.ResourceMetrics().At(i).ScopeMetrics().At(0).Metrics()
		hist := ms.AppendEmpty()
		hist.SetName(lensfixture.StepDurationMetric)
		dps := hist.SetEmptyHistogram().DataPoints()
		for range 3 {
			dps.AppendEmpty().SetCount(1)
		}
		sum := ms.AppendEmpty()
		sum.SetName(lensfixture.SkippedItersMetric)
		sum.SetEmptySum().DataPoints().AppendEmpty().SetIntValue(0)
	}
	require.NoError(t, h.metrics.ConsumeMetrics(t.Context(), md))
	assert.Equal(t, []string{"r//3", lensfixture.StepDurationMetric, lensfixture.SkippedItersMetric}, metricNames(h.msink.AllMetrics()))

	metadatatest.AssertEqualProcessorRankStrategyItemsKept(t, h.tel, []metricdata.DataPoint[int64]{
		{Attributes: itemAttrs("metrics", reasonSelected), Value: 5},
	}, metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorRankStrategyItemsDropped(t, h.tel, []metricdata.DataPoint[int64]{
		{Attributes: itemAttrs("metrics", reasonNotSelected), Value: 15},
	}, metricdatatest.IgnoreTimestamp())
}

// Resources of dropped ranks go whole and cost no allocation, however many
// there are.
func TestDroppedResourcesDoNotAllocate(t *testing.T) {
	for _, keepErrors := range []bool{true, false} {
		cfg := createDefaultConfig().(*Config)
		cfg.KeepErrors = keepErrors
		p, err := newRankStrategyProcessor(nopSettings(), cfg, pipeline.SignalTraces)
		require.NoError(t, err)
		input := tracesFor(lensfixture.Fleet(lensfixture.Rank{Run: "r", Group: "g", WorldSize: 1000}))
		batches := make([]ptrace.Traces, 102)
		for i := range batches {
			batches[i] = ptrace.NewTraces()
			input.CopyTo(batches[i])
		}
		i := 0
		allocs := testing.AllocsPerRun(100, func() {
			out, err := p.processTraces(t.Context(), batches[i])
			i++
			if err != nil || out.ResourceSpans().Len() != 1 {
				panic(fmt.Sprintf("want the last rank only, got %d resources, err %v", out.ResourceSpans().Len(), err))
			}
		})
		assert.Zero(t, allocs, "keep_errors=%v", keepErrors)
	}
}

func TestProcessorsReportMutatesData(t *testing.T) {
	h := newHarness(t, nil)
	assert.True(t, h.traces.Capabilities().MutatesData)
	assert.True(t, h.metrics.Capabilities().MutatesData)
	assert.True(t, h.logs.Capabilities().MutatesData)
}

// The collector may call one processor from several receivers' goroutines
// at once; the world-size memory and the sampled memo are shared.
func TestConcurrentBatches(t *testing.T) {
	procs := slices.Concat(
		lensfixture.Fleet(lensfixture.Rank{Run: "run-a", Group: "policy", WorldSize: 64}),
		lensfixture.Fleet(lensfixture.Rank{Run: "run-a", Group: "generation", WorldSize: 8}),
	)
	// Half the resources carry no world size: they rely on the memory.
	withoutWorldSize := slices.Clone(procs)
	for i := range withoutWorldSize {
		if withoutWorldSize[i].Rank != withoutWorldSize[i].WorldSize-1 {
			withoutWorldSize[i].WorldSize = 0
		}
	}
	h := newHarness(t, nil)
	// Teach the memory first, so that every later decision is determined.
	require.NoError(t, h.traces.ConsumeTraces(t.Context(), tracesFor(procs)))

	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 25 {
				assert.NoError(t, h.traces.ConsumeTraces(t.Context(), tracesFor(procs)))
				assert.NoError(t, h.traces.ConsumeTraces(t.Context(), tracesFor(withoutWorldSize)))
			}
		})
	}
	wg.Wait()
	names := spanNames(h.tsink.AllTraces())
	assert.Len(t, names, 2*(1+4*25*2))
	for _, n := range names {
		assert.Contains(t, []string{"run-a/policy/63", "run-a/generation/7"}, n)
	}
}
