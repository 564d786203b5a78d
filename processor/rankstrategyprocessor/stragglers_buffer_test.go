// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
)

// With max_buffered_spans far below a run's volume, the oldest steps are
// decided early, counted, and the buffer never holds more than the bound;
// the stragglers are still found, since a step is only decided early once
// younger steps arrive; every span is counted kept or dropped.
func TestStragglersMemoryBound(t *testing.T) {
	bound := 63 * spansPerStep * 3 / 2 // 1.5 steps of the 63 dropped ranks
	h := newStragglerHarness(t, func(c *Config) { c.Stragglers.Get().MaxBufferedSpans = bound }, nil)
	run := newTrainingRun(64, map[int64]map[int64]float64{5: {17: 2}, 9: {17: 2}})
	maxHeld := int64(0)
	check := func() {
		held := h.total(t, "stragglers_spans_held")
		maxHeld = max(maxHeld, held)
		require.LessOrEqual(t, held, int64(bound))
	}
	sent := 0
	for it := int64(1); it <= 20; it++ {
		for rank := range run.worldSize() {
			h.consume(t, run.batch(rank, it, endOrder...))
			sent += len(endOrder)
			check()
		}
		// No time passes: only the bound makes decisions.
	}
	assert.Greater(t, maxHeld, int64(bound/2), "the bound was reached")
	early := h.total(t, "stragglers_early_decisions")
	assert.GreaterOrEqual(t, early, int64(18), "steps decided early")
	assert.Equal(t, early, h.total(t, "stragglers_steps_decided"), "no tick came")
	h.clock.Advance(11 * time.Second)

	var want []string
	for it := int64(1); it <= 20; it++ {
		want = append(want, wholeStep(63, it, "")...)
	}
	want = append(want, wholeStep(17, 5, "straggler")...)
	want = append(want, wholeStep(17, 9, "straggler")...)
	sort.Strings(want)
	assert.Equal(t, want, describe(outputSpans(t, h.sink.AllTraces())))
	assert.Equal(t, int64(sent), h.items(t, true, reasonSelected)+h.items(t, true, reasonStraggler)+h.items(t, false, reasonNotSelected))
	assert.Zero(t, h.total(t, "stragglers_spans_held"))
}

// When no step span ever comes (wrong step_span_names), spans waiting for a
// step are dropped oldest first at the bound, and after decision_wait
// otherwise, with one warning.
func TestStragglersWithoutStepSpans(t *testing.T) {
	const bound = 500
	h := newStragglerHarness(t, func(c *Config) {
		c.Stragglers.Get().MaxBufferedSpans = bound
		c.Stragglers.Get().StepSpanNames = []string{"megatron.step"}
	}, nil)
	run := newTrainingRun(64, nil)
	sent := 0
	for it := int64(1); it <= 3; it++ {
		for rank := range run.worldSize() {
			h.consume(t, run.batch(rank, it, endOrder...))
			sent += len(endOrder)
			require.LessOrEqual(t, h.total(t, "stragglers_spans_held"), int64(bound))
		}
		h.clock.Advance(time.Second)
	}
	h.clock.Advance(10 * time.Second)
	assert.Equal(t, int64(sent-3*spansPerStep), h.items(t, false, reasonNotSelected))
	assert.Zero(t, h.total(t, "stragglers_steps_decided"))
	assert.Zero(t, h.total(t, "stragglers_spans_held"))
	warnings := h.logged.FilterMessageSnippet("no span named").All()
	require.Len(t, warnings, 1)
	fields := warnings[0].ContextMap()
	assert.Equal(t, []any{"megatron.step"}, fields["step_span_names"])
	assert.Contains(t, fields["fix"], "stragglers::step_span_names")
}

// span_wait, not decision_wait, bounds how long a span waits for its step
// span.
func TestStragglersSpanWait(t *testing.T) {
	h := newStragglerHarness(t, func(c *Config) {
		sc := c.Stragglers.Get()
		sc.StepSpanNames = []string{"megatron.step"}
		sc.DecisionWait = time.Minute
		sc.SpanWait = 2 * time.Second
	}, nil)
	run := newTrainingRun(4, nil)
	sent := 0
	for rank := range run.worldSize() {
		h.consume(t, run.batch(rank, 1, endOrder...))
		sent += len(endOrder)
	}
	h.clock.Advance(time.Second)
	assert.Zero(t, h.items(t, false, reasonNotSelected), "within span_wait: still waiting")
	h.clock.Advance(2 * time.Second)
	assert.Equal(t, int64(sent-spansPerStep), h.items(t, false, reasonNotSelected), "span_wait is over, decision_wait is not")
}

// Shutdown decides what is pending at once and passes the kept spans on
// before it returns.
func TestStragglersShutdownFlushes(t *testing.T) {
	h := newStragglerHarness(t, nil, nil)
	run := newTrainingRun(32, map[int64]map[int64]float64{2: {17: 2}})
	for it := int64(1); it <= 3; it++ {
		for rank := range run.worldSize() {
			h.consume(t, run.batch(rank, it, endOrder...))
		}
	}
	// A span still waiting for its step is dropped at shutdown.
	h.consume(t, run.batch(4, 4, layerForward))
	assert.Len(t, h.sink.AllTraces(), 3, "rank 31 passes through; no tick came, nothing decided yet")
	h.shutdown(t)

	var want []string
	for it := int64(1); it <= 3; it++ {
		want = append(want, wholeStep(31, it, "")...)
	}
	want = append(want, wholeStep(17, 2, "straggler")...)
	sort.Strings(want)
	assert.Equal(t, want, describe(outputSpans(t, h.sink.AllTraces())))
	assert.Equal(t, int64(3), h.total(t, "stragglers_steps_decided"))
	assert.Zero(t, h.total(t, "stragglers_early_decisions"))
	assert.Zero(t, h.total(t, "stragglers_ranks_missing"), "a step cut off by shutdown counts no missing rank")
	assert.Zero(t, h.total(t, "stragglers_spans_held"))
	dropped := int64((3*31-1)*spansPerStep + 1)
	assert.Equal(t, dropped, h.items(t, false, reasonNotSelected))

	// After shutdown nothing is held any more.
	require.NoError(t, h.tp.ConsumeTraces(t.Context(), run.batch(4, 5, endOrder...)))
	assert.Zero(t, h.total(t, "stragglers_spans_held"))
	assert.Equal(t, dropped+int64(spansPerStep), h.items(t, false, reasonNotSelected))
}

// keep_errors passes a dropped rank's error span on at once; the buffer
// still ties its children to the step through it, and does not pass it on a
// second time when the step is kept.
func TestStragglersWithKeepErrors(t *testing.T) {
	h := newStragglerHarness(t, nil, nil)
	run := newTrainingRun(8, map[int64]map[int64]float64{1: {2: 2}})
	withError := func(td ptrace.Traces) ptrace.Traces {
		spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
		for i := 0; i < spans.Len(); i++ {
			if spans.At(i).Name() == lensfixture.ForwardBackward {
				spans.At(i).Status().SetCode(ptrace.StatusCodeError)
			}
		}
		return td
	}
	// The error span arrives with its children, before the step span.
	fbSubtree := slices.Index(endOrder, forwardBackward) + 1
	for rank := range run.worldSize() {
		h.consume(t, withError(run.batch(rank, 1, endOrder[:fbSubtree]...)))
		h.consume(t, run.batch(rank, 1, endOrder[fbSubtree:]...))
	}
	synchronous := describe(outputSpans(t, h.sink.AllTraces()))
	var want []string
	for rank := range int64(7) {
		want = append(want, outSpan{rank: rank, iteration: 1, n: forwardBackward}.String()+"error")
	}
	want = append(want, wholeStep(7, 1, "")...)
	sort.Strings(want)
	assert.Equal(t, want, synchronous)

	h.clock.Advance(time.Second)
	for _, s := range wholeStep(2, 1, "straggler") {
		if s != (outSpan{rank: 2, iteration: 1, n: forwardBackward}).String()+"straggler" {
			want = append(want, s)
		}
	}
	sort.Strings(want)
	assert.Equal(t, want, describe(outputSpans(t, h.sink.AllTraces())))
	assert.Equal(t, int64(7), h.items(t, true, reasonError))
	assert.Equal(t, int64(spansPerStep-1), h.items(t, true, reasonStraggler))
	assert.Equal(t, int64(6*(spansPerStep-1)), h.items(t, false, reasonNotSelected))
	assert.Zero(t, h.total(t, "stragglers_spans_held"))
}

// flakyTraces refuses every batch while down, then passes them to sink.
type flakyTraces struct {
	sink *consumertest.TracesSink
	down atomic.Bool
}

func (*flakyTraces) Capabilities() consumer.Capabilities { return consumer.Capabilities{} }

func (f *flakyTraces) ConsumeTraces(ctx context.Context, td ptrace.Traces) error {
	if f.down.Load() {
		return errors.New("backend down")
	}
	return f.sink.ConsumeTraces(ctx, td)
}

// The kept spans were acknowledged when they arrived: when the next
// consumer refuses them they are logged, counted and sent again at every
// tick until it takes them, exactly once; at shutdown with the consumer
// still down, Shutdown says so.
func TestStragglersSendFailure(t *testing.T) {
	next := &flakyTraces{sink: new(consumertest.TracesSink)}
	next.down.Store(true)
	h := newStragglerHarness(t, func(c *Config) { c.Strategy = StrategyRanks; c.Ranks = "0" }, next)
	run := newTrainingRun(8, map[int64]map[int64]float64{1: {5: 3}, 2: {5: 3}})
	for rank := int64(1); rank < run.worldSize(); rank++ {
		h.consume(t, run.batch(rank, 1, endOrder...))
	}
	h.clock.Advance(11 * time.Second)
	h.clock.Advance(time.Second)
	assert.Equal(t, int64(2*spansPerStep), h.total(t, "stragglers_send_failed"), "refused at two ticks")
	assert.Equal(t, int64(1), h.total(t, "stragglers_ranks_missing"), "rank 0 never reported")
	errs := h.logged.FilterMessageSnippet("refused kept straggler spans").All()
	require.Len(t, errs, 2)
	assert.Equal(t, "backend down", errs[0].ContextMap()["error"])
	assert.Zero(t, next.sink.SpanCount())

	next.down.Store(false)
	h.clock.Advance(time.Second)
	want := wholeStep(5, 1, "straggler")
	sort.Strings(want)
	assert.Equal(t, want, describe(outputSpans(t, next.sink.AllTraces())), "sent once the consumer takes it")
	h.clock.Advance(time.Second)
	assert.Equal(t, spansPerStep, next.sink.SpanCount(), "and only once")

	// Rank 5 is kept again, and the consumer is down at shutdown: Shutdown
	// says so.
	for rank := int64(1); rank < run.worldSize(); rank++ {
		h.consume(t, run.batch(rank, 2, endOrder...))
	}
	next.down.Store(true)
	h.down = true
	require.ErrorContains(t, h.tp.Shutdown(context.Background()), "backend down") //nolint:usetesting // a second Shutdown in Cleanup is skipped
}

// ConsumeTraces is called from several goroutines while the ticker runs;
// the outcome is the same as in order. Run with -race.
func TestStragglersConcurrentBatches(t *testing.T) {
	h := newStragglerHarness(t, nil, nil)
	run := newTrainingRun(64, map[int64]map[int64]float64{3: {17: 2}, 6: {17: 2}})
	const workers = 4
	half := len(endOrder) / 2
	for it := int64(1); it <= 6; it++ {
		var wg sync.WaitGroup
		for w := range int64(workers) {
			wg.Go(func() {
				for rank := w; rank < run.worldSize(); rank += workers {
					assert.NoError(t, h.tp.ConsumeTraces(t.Context(), run.batch(rank, it, endOrder[:half]...)))
					assert.NoError(t, h.tp.ConsumeTraces(t.Context(), run.batch(rank, it, endOrder[half:]...)))
				}
			})
		}
		// The ticker runs while the batches arrive.
		wg.Go(func() {
			for range 5 {
				h.clock.Advance(200 * time.Millisecond)
			}
		})
		wg.Wait()
	}
	h.clock.Advance(11 * time.Second)
	var want []string
	for it := int64(1); it <= 6; it++ {
		want = append(want, wholeStep(63, it, "")...)
	}
	want = append(want, wholeStep(17, 3, "straggler")...)
	want = append(want, wholeStep(17, 6, "straggler")...)
	sort.Strings(want)
	assert.Equal(t, want, describe(outputSpans(t, h.sink.AllTraces())))
	assert.Equal(t, int64(6), h.total(t, "stragglers_steps_decided"))
	assert.Zero(t, h.total(t, "stragglers_spans_held"))
}

// Pending children reach their step through any number of generations and
// in any order, also when a parent came before its child; wait spans count
// whatever the order.
func TestStragglersResolveAnyOrder(t *testing.T) {
	run := newTrainingRun(4, map[int64]map[int64]float64{1: {1: 2}})
	startOrder := make([]int, spansPerStep) // Step.Plans: parents before children
	for n := range startOrder {
		startOrder[n] = n
	}
	reversed := slices.Clone(startOrder)
	slices.Reverse(reversed)
	orders := map[string][]int{
		"end order":           endOrder,
		"start order":         startOrder,
		"parents after steps": append(slices.Clone(startOrder[1:]), 0),
		"one by one reversed": reversed,
	}
	for name, order := range orders {
		t.Run(name, func(t *testing.T) {
			for _, perBatch := range []int{1, 3, spansPerStep} {
				h := newStragglerHarness(t, nil, nil)
				for rank := range run.worldSize() {
					for i := 0; i < len(order); i += perBatch {
						h.consume(t, run.batch(rank, 1, order[i:min(i+perBatch, len(order))]...))
					}
				}
				h.clock.Advance(time.Second)
				want := append(wholeStep(3, 1, ""), wholeStep(1, 1, "straggler")...)
				sort.Strings(want)
				got := outputSpans(t, h.sink.AllTraces())
				assert.Equal(t, want, describe(got), "%d spans per batch", perBatch)
				checkScores(t, got, map[[2]int64][2]float64{{1, 1}: {score(run.StepOf(0, 1).Busy(), run.StepOf(1, 1).Busy()), 1}})
				assert.Zero(t, h.total(t, "stragglers_spans_held"), "nothing left waiting")
			}
		})
	}
}

// Ranks that each carry their own run id are never compared: one warning.
func TestStragglersWarnWhenRanksDoNotShareARun(t *testing.T) {
	h := newStragglerHarness(t, nil, nil)
	for rank := range int64(4) {
		run := newTrainingRun(4, map[int64]map[int64]float64{1: {rank: float64(rank + 1)}})
		run.Period = 4 * time.Second // rank 3's step, computing 4x, lasts 3.06s
		for i := range run.Ranks {
			run.Ranks[i].Run = fmt.Sprintf("run-s-%d", rank)
		}
		h.consume(t, run.batch(rank, 1, endOrder...))
	}
	h.clock.Advance(11 * time.Second)
	assert.Zero(t, h.total(t, "stragglers_kept"))
	assert.Equal(t, int64(3), h.total(t, "stragglers_steps_decided"))
	warnings := h.logged.FilterMessageSnippet("decided having seen a single rank").All()
	require.Len(t, warnings, 1)
	assert.Contains(t, warnings[0].ContextMap()["fix"], "NEMO_LENS_RUN_ID")
}
