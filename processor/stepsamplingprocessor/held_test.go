// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepsamplingprocessor

import (
	"context"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
	"github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor/internal/metadatatest"
)

// childrenOf is a batch with the children of one step of each rank, whose
// step spans have not come.
func childrenOf(ranks []lensfixture.Rank, it int64) ptrace.Traces {
	td := ptrace.NewTraces()
	run := jobOf(inJob, ranks)
	for _, r := range ranks {
		appendStepChildren(lensfixture.AppendResource(td, r), run, r, it)
	}
	return td
}

func withTelemetry(t *testing.T, cfg *Config) (*harness, *componenttest.Telemetry, *observer.ObservedLogs) {
	t.Helper()
	tel := componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, tel.Shutdown(context.Background())) }) //nolint:usetesting // t.Context() is canceled before Cleanup runs
	set := metadatatest.NewSettings(tel)
	core, logs := observer.New(zapcore.WarnLevel)
	set.Logger = zap.New(core)
	return newHarnessWith(t, cfg, set), tel, logs
}

func points(kv ...any) []metricdata.DataPoint[int64] {
	var out []metricdata.DataPoint[int64]
	for i := 0; i < len(kv); i += 3 {
		dp := metricdata.DataPoint[int64]{Value: int64(kv[i+2].(int))}
		if key := kv[i].(string); key != "" {
			dp.Attributes = attribute.NewSet(attribute.String(key, kv[i+1].(string)))
		}
		out = append(out, dp)
	}
	return out
}

func TestHeldSpansPassUndecidedAfterSpanWait(t *testing.T) {
	cfg := sampledConfig(0.1)
	cfg.SpanWait = 2 * time.Second
	h, tel, logs := withTelemetry(t, cfg)
	want := childrenOf(ranksOf(testRun, 1), 5)
	in := ptrace.NewTraces()
	want.CopyTo(in)

	h.send(t, in)
	require.Equal(t, childCount, h.heldSpans())
	h.clock.Advance(time.Second)
	require.Zero(t, h.sink.SpanCount(), "still waiting for the step span")
	h.clock.Advance(1100 * time.Millisecond)
	require.Zero(t, h.heldSpans())
	require.Len(t, h.sink.AllTraces(), 1)
	require.NoError(t, ptracetest.CompareTraces(want, h.sink.AllTraces()[0]))

	metadatatest.AssertEqualProcessorStepSamplingSpansUndecided(t, tel, points("cause", "wait_expired", childCount), metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorStepSamplingSpansHeld(t, tel, points("", "", 0), metricdatatest.IgnoreTimestamp())
	require.Equal(t, 1, logs.FilterMessageSnippet("no span named").Len(), "warns that no step span has come")
}

func TestBudgetPassesTheOldestHeldSpansOn(t *testing.T) {
	cfg := sampledConfig(0.1)
	cfg.MaxBufferedSpans = childCount + 1 // one rank's children, not two
	h, tel, _ := withTelemetry(t, cfg)
	ranks := ranksOf(testRun, 3)
	h.send(t, childrenOf(ranks[:1], 5))
	require.Equal(t, childCount, h.heldSpans())
	h.send(t, childrenOf(ranks[1:2], 5))
	require.Equal(t, childCount, h.heldSpans(), "the oldest were passed on")
	seen := collect(h.sink)
	require.Len(t, seen, childCount)
	for _, s := range seen {
		assert.Equal(t, int64(0), s.rank)
		assert.False(t, s.hasReason)
	}
	metadatatest.AssertEqualProcessorStepSamplingSpansUndecided(t, tel, points("cause", "buffer_full", childCount), metricdatatest.IgnoreTimestamp())
}

func TestShutdownPassesEverythingHeld(t *testing.T) {
	h, tel, _ := withTelemetry(t, sampledConfig(0.1))
	h.send(t, childrenOf(ranksOf(testRun, 2), 5))
	require.Zero(t, h.sink.SpanCount())
	require.NoError(t, h.tp.Shutdown(t.Context()))
	assert.Equal(t, 2*childCount, h.sink.SpanCount())
	metadatatest.AssertEqualProcessorStepSamplingSpansUndecided(t, tel, points("cause", "shutdown", 2*childCount), metricdatatest.IgnoreTimestamp())
}

func TestHeldSpansOutsideStepsPassWhenTheNextStepComes(t *testing.T) {
	h := newHarness(t, sampledConfig(0))
	r := lensfixture.Rank{Run: testRun, Rank: 0}
	run := jobOf(inJob, []lensfixture.Rank{r})
	td := ptrace.NewTraces()
	spans := lensfixture.AppendResource(td, r)
	appendStep(spans, run, r, 4)
	run.AppendCheckpoint(spans, r, 4)
	h.send(t, td)
	require.Equal(t, 1, h.heldSpans(), "the checkpoint may still belong to a step")

	next := ptrace.NewTraces()
	appendStep(lensfixture.AppendResource(next, r), run, r, 5)
	h.send(t, next)
	require.Zero(t, h.heldSpans())
	assert.Equal(t, []string{lensfixture.SaveCheckpoint}, jobSpans(collect(h.sink)))
}

// TestHeldResourceWithKeptSpans holds a resource of which some spans are
// decided (kept) and others wait: the kept ones leave at once.
func TestHeldResourceWithKeptSpans(t *testing.T) {
	h := newHarness(t, sampledConfig(0.1))
	want := expectedKept(t)[0]
	r := lensfixture.Rank{Run: testRun, Rank: 6}
	run := jobOf(inJob, []lensfixture.Rank{r})
	td := ptrace.NewTraces()
	spans := lensfixture.AppendResource(td, r)
	appendStep(spans, run, r, want)
	appendStepChildren(spans, run, r, want+1)
	h.send(t, td)
	assert.Equal(t, childCount, h.heldSpans())
	assert.Equal(t, map[int64][]int64{6: {want}}, keptSteps(t, collect(h.sink), sampled))

	step := ptrace.NewTraces()
	appendStepSpan(lensfixture.AppendResource(step, r), run, r, want+1)
	h.send(t, step)
	assert.Zero(t, h.heldSpans())
}

func TestTelemetryCountsEverySpan(t *testing.T) {
	h, tel, logs := withTelemetry(t, sampledConfig(0.1))
	run := jobOf(inJob, ranksOf(testRun, 8))
	h.send(t, training(run, 40, nil)...)
	noRank := ptrace.NewTraces()
	appendStep(noRank.ResourceSpans().AppendEmpty().ScopeSpans().AppendEmpty().Spans(), run, lensfixture.Rank{}, 1)
	h.send(t, noRank)

	kept := len(expectedKept(t))
	metadatatest.AssertEqualProcessorStepSamplingSpansKept(t, tel, points(
		"reason", "sampled_step", 8*kept*stepSpans,
		"reason", "outside_step", 8*len(wantJobSpans),
		"reason", "no_rank", stepSpans,
	), metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorStepSamplingSpansDropped(t, tel, points("", "", 8*(40-kept)*stepSpans), metricdatatest.IgnoreTimestamp())
	metadatatest.AssertEqualProcessorStepSamplingSpansHeld(t, tel, points("", "", 0), metricdatatest.IgnoreTimestamp())
	assert.Zero(t, logs.Len())
}

// TestHeldResourceExpiresWithoutItsKeptSpans: the spans of a held resource
// that were kept at once are not passed on a second time when the rest
// expires.
func TestHeldResourceExpiresWithoutItsKeptSpans(t *testing.T) {
	cfg := sampledConfig(0.1)
	cfg.SpanWait = time.Second
	h := newHarness(t, cfg)
	want := expectedKept(t)[0]
	r := lensfixture.Rank{Run: testRun, Rank: 6}
	run := jobOf(inJob, []lensfixture.Rank{r})
	td := ptrace.NewTraces()
	spans := lensfixture.AppendResource(td, r)
	appendStep(spans, run, r, want)
	appendStepChildren(spans, run, r, want+1)
	h.send(t, td)
	h.clock.Advance(1100 * time.Millisecond)
	assert.Zero(t, h.heldSpans())
	seen := collect(h.sink)
	require.Len(t, seen, stepSpans+childCount)
	for _, s := range seen {
		if s.it == want+1 {
			assert.False(t, s.hasReason, "undecided spans pass untouched")
		} else {
			assert.Equal(t, "sampled_step", s.reason)
		}
	}
}

// TestStepSpanInAnotherResourceOfTheBatch: a rank's children and its step
// span may come in separate resources of one batch (merged exports).
func TestStepSpanInAnotherResourceOfTheBatch(t *testing.T) {
	want := expectedKept(t)
	h := newHarness(t, sampledConfig(0.1))
	run := jobOf(inJob, ranksOf(testRun, 8))
	for it := range int64(40) {
		td := ptrace.NewTraces()
		for _, r := range run.Ranks {
			appendStepChildren(lensfixture.AppendResource(td, r), run, r, it)
		}
		for _, r := range run.Ranks {
			appendStepSpan(lensfixture.AppendResource(td, r), run, r, it)
		}
		h.send(t, td)
		require.Zero(t, h.heldSpans(), "iteration %d", it)
	}
	kept := keptSteps(t, collect(h.sink), sampled)
	for r := range int64(8) {
		assert.Equal(t, want, kept[r], "rank %d", r)
	}
}

func TestConcurrentBatchesAndTicks(t *testing.T) {
	cfg := sampledConfig(0.1)
	cfg.SpanWait = 50 * time.Millisecond
	h := newHarness(t, cfg)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 {
			h.clock.Advance(10 * time.Millisecond)
		}
	}()
	errs := make(chan error, 4)
	fleet := ranksOf(testRun, 4)
	for g := range fleet {
		go func() {
			ranks := fleet[g : g+1]
			run := jobOf(inJob, ranks)
			for it := range int64(40) {
				if err := h.tp.ConsumeTraces(t.Context(), childrenOf(ranks, it)); err != nil {
					errs <- err
					return
				}
				step := ptrace.NewTraces()
				appendStepSpan(lensfixture.AppendResource(step, ranks[0]), run, ranks[0], it)
				if err := h.tp.ConsumeTraces(t.Context(), step); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		require.NoError(t, <-errs)
	}
	<-done
	require.NoError(t, h.tp.Shutdown(t.Context()))
	// Depending on how the ticks fell, some children waited in vain and
	// were passed on undecided; nothing came out twice, and every span
	// marked kept is of an iteration in the sample.
	want := expectedKept(t)
	seen := map[[3]int64]bool{}
	for _, s := range collect(h.sink) {
		key := [3]int64{s.rank, s.it, int64(s.idx)}
		require.False(t, seen[key], "span %v came out twice", key)
		seen[key] = true
		if s.hasReason {
			assert.Contains(t, want, s.it)
			assert.Equal(t, "sampled_step", s.reason)
		} else {
			assert.NotZero(t, s.idx, "a step span is always decided")
		}
	}
	assert.Zero(t, h.heldSpans())
}
