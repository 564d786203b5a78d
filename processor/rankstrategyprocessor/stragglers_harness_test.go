// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/clocktest"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
	"github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor/internal/metadatatest"
)

// The straggler tests' synchronous step (lensfixture.Step): every rank
// computes for its own time (compute), with a pipeline receive of recvWait
// inside; then it waits in the gradient sync until the slowest rank has
// computed and syncWork more has passed; then it runs the optimizer for
// optimizerTime. All ranks' steps start and end together; busy time is
// compute - recvWait + optimizerTime (Step.Busy).
const (
	stepPeriod    = 3 * time.Second
	recvWait      = 20 * time.Millisecond
	syncWork      = 100 * time.Millisecond
	optimizerTime = 150 * time.Millisecond
	// lateChildN is the span index of a child of forward_backward sent after
	// its step's decision, beyond the indexes of the step's plans.
	lateChildN = 1000
	// scopeVersion is set on every batch (the fixture sets none) so that
	// outputSpans can check that a kept span's scope came out whole.
	scopeVersion = "0.12.0"
)

var (
	stragglerStep = lensfixture.Step{RecvWait: recvWait, GradSync: syncWork, Optimizer: optimizerTime, MicroBatches: 2}
	spansPerStep  = stragglerStep.Spans()
	// endOrder is the plan indexes of a step's spans in the order a rank
	// exports them: children before their parents, the step span last. It
	// is the same on every rank.
	endOrder = lensfixture.ExportOrder(newTrainingRun(1, nil).StepOf(0, 1).Plans(attrkey.MegatronTrainStep))
	// Plan indexes of the spans the tests single out.
	forwardBackward = lensfixture.ForwardBackwardIndex
	layerForward    = planIndex(lensfixture.LayerForward)
	gradSyncFinish  = planIndex(lensfixture.GradSyncFinish)
)

func planIndex(name string) int {
	return slices.IndexFunc(stragglerStep.Plans(attrkey.MegatronTrainStep), func(p lensfixture.Plan) bool { return p.Name == name })
}

// compute is how long rank computes on a step: 700ms plus a millisecond per
// rank, so that ranks differ a little, times slow (0 means 1).
func compute(rank int64, slow float64) time.Duration {
	if slow == 0 {
		slow = 1
	}
	return time.Duration(float64(700*time.Millisecond+time.Duration(rank)*time.Millisecond) * slow)
}

// trainingRun is the emulated Megatron run of the straggler tests; its
// StepOf(rank, iteration).Busy() is what the processor should measure.
type trainingRun struct{ lensfixture.Run }

// newTrainingRun is a run of worldSize ranks in which the ranks in
// slow[iteration] compute that many times longer on that iteration. Every
// rank sends nv.dl.* integers (not lensfixture.Fleet's mix of spellings):
// outputSpans reads a kept span's rank back from its resource's nv.dl.rank.
func newTrainingRun(worldSize int64, slow map[int64]map[int64]float64) trainingRun {
	ranks := make([]lensfixture.Rank, worldSize)
	for r := range ranks {
		ranks[r] = lensfixture.Rank{Run: "run-s", Rank: int64(r), WorldSize: worldSize}
	}
	return trainingRun{lensfixture.Run{
		Ranks:   ranks,
		Period:  stepPeriod,
		Step:    stragglerStep,
		Compute: func(rank, iteration int64) time.Duration { return compute(rank, slow[iteration][rank]) },
	}}
}

func (r trainingRun) worldSize() int64 { return int64(len(r.Ranks)) }

// newBatch is an empty export from rank: its resource and scope.
func (r trainingRun) newBatch(rank int64) (ptrace.Traces, ptrace.SpanSlice) {
	td := ptrace.NewTraces()
	spans := lensfixture.AppendResource(td, r.Ranks[rank])
	td.ResourceSpans().At(0).ScopeSpans().At(0).Scope().SetVersion(scopeVersion)
	return td, spans
}

// batch is one export from rank: the spans of its step iteration whose plan
// indexes are ns, in that order. Span lateChildN is an extra child of
// forward_backward, within it, which the fixture's step does not have.
func (r trainingRun) batch(rank, iteration int64, ns ...int) ptrace.Traces {
	step := ptrace.NewSpanSlice()
	r.AppendStep(step, r.Ranks[rank], iteration)
	byIndex := make(map[int]ptrace.Span, step.Len())
	for i := range step.Len() {
		byIndex[lensfixture.ParseSpanID(step.At(i).SpanID()).Index] = step.At(i)
	}
	td, spans := r.newBatch(rank)
	for _, n := range ns {
		if n != lateChildN {
			byIndex[n].CopyTo(spans.AppendEmpty())
			continue
		}
		fb := byIndex[forwardBackward]
		late := spans.AppendEmpty()
		fb.CopyTo(late)
		late.SetName(lensfixture.SendForward)
		late.SetSpanID(lensfixture.SpanID(lensfixture.KindStep, rank, iteration, lateChildN))
		late.SetParentSpanID(fb.SpanID())
		mid := fb.StartTimestamp() + (fb.EndTimestamp()-fb.StartTimestamp())/2
		late.SetStartTimestamp(mid)
		late.SetEndTimestamp(mid + pcommon.Timestamp(time.Millisecond))
	}
	return td
}

// jobSpan is rank's megatron.train span, the parent of its steps, in no
// step: AppendJobEnd's span of that name, without the root it also appends.
func (r trainingRun) jobSpan(rank int64) ptrace.Traces {
	end := ptrace.NewSpanSlice()
	r.AppendJobEnd(end, r.Ranks[rank], 12) // after the 12 steps the longest test sends
	td, spans := r.newBatch(rank)
	for i := range end.Len() {
		if end.At(i).Name() == lensfixture.Train {
			end.At(i).CopyTo(spans.AppendEmpty())
		}
	}
	return td
}

// outSpan is a span as it came out of the processor.
type outSpan struct {
	rank, iteration       int64
	n                     int
	keptReason            string
	relative, individual  float64
	hasRelative, hasIndiv bool
}

func (o outSpan) String() string { return fmt.Sprintf("r%d/i%d/n%d", o.rank, o.iteration, o.n) }

// outputSpans decodes every span the sink received, and checks that each
// kept straggler span came with its rank's resource and scope.
func outputSpans(t *testing.T, batches []ptrace.Traces) []outSpan {
	t.Helper()
	var out []outSpan
	for _, td := range batches {
		for i := 0; i < td.ResourceSpans().Len(); i++ {
			rs := td.ResourceSpans().At(i)
			resRank, ok := rs.Resource().Attributes().Get(attrkey.DLRank)
			require.True(t, ok, "resource kept its attributes")
			run, _ := rs.Resource().Attributes().Get(attrkey.RunID)
			require.Contains(t, run.Str(), "run-s")
			for j := 0; j < rs.ScopeSpans().Len(); j++ {
				ss := rs.ScopeSpans().At(j)
				require.Equal(t, lensfixture.ScopeName, ss.Scope().Name(), "scope kept")
				require.Equal(t, scopeVersion, ss.Scope().Version(), "scope kept")
				for k := 0; k < ss.Spans().Len(); k++ {
					s := ss.Spans().At(k)
					id := lensfixture.ParseSpanID(s.SpanID())
					o := outSpan{rank: id.Rank, iteration: id.Iteration, n: id.Index}
					if id.Kind == lensfixture.KindJob {
						o = outSpan{rank: id.Rank, iteration: -1, n: -1}
					}
					require.Equal(t, resRank.Int(), o.rank, "span %s is under its own rank's resource", o)
					if v, ok := s.Attributes().Get(attrkey.KeptReason); ok {
						o.keptReason = v.Str()
					}
					if v, ok := s.Attributes().Get(attrkey.RelativeScore); ok {
						o.relative, o.hasRelative = v.Double(), true
					}
					if v, ok := s.Attributes().Get(attrkey.IndividualScore); ok {
						o.individual, o.hasIndiv = v.Double(), true
					}
					out = append(out, o)
				}
			}
		}
	}
	return out
}

// stragglerHarness is a traces processor with stragglers enabled on a fake
// clock.
type stragglerHarness struct {
	tp     processor.Traces
	p      *rankStrategyProcessor
	clock  *clocktest.Fake
	sink   *consumertest.TracesSink
	tel    *componenttest.Telemetry
	logged *observer.ObservedLogs
	down   bool
}

func newStragglerHarness(t *testing.T, edit func(*Config), next consumer.Traces) *stragglerHarness {
	t.Helper()
	cfg := createDefaultConfig().(*Config)
	sc := cfg.Stragglers.GetOrInsertDefault()
	require.Equal(t, defaultStragglersConfig(), *sc)
	if edit != nil {
		edit(cfg)
	}
	require.NoError(t, cfg.Validate())
	require.NoError(t, cfg.Stragglers.Get().Validate())

	core, logged := observer.New(zapcore.DebugLevel)
	tel := componenttest.NewTelemetry()
	set := metadatatest.NewSettings(tel)
	set.Logger = zap.New(core)
	h := &stragglerHarness{clock: clocktest.NewFake(), sink: new(consumertest.TracesSink), tel: tel, logged: logged}
	if next == nil {
		next = h.sink
	}
	var err error
	h.tp, h.p, err = newTracesProcessor(t.Context(), set, cfg, next, h.clock)
	require.NoError(t, err)
	require.NoError(t, h.tp.Start(t.Context(), componenttest.NewNopHost()))
	t.Cleanup(func() {
		h.shutdown(t)
		require.NoError(t, tel.Shutdown(context.Background())) //nolint:usetesting // t.Context() is canceled before Cleanup runs
	})
	return h
}

func (h *stragglerHarness) shutdown(t *testing.T) {
	if !h.down {
		h.down = true
		require.NoError(t, h.tp.Shutdown(context.Background())) //nolint:usetesting // also runs in Cleanup, when t.Context() is already canceled
	}
}

func (h *stragglerHarness) consume(t *testing.T, td ptrace.Traces) {
	t.Helper()
	require.NoError(t, h.tp.ConsumeTraces(t.Context(), td))
}

// total sums a counter's data points that carry all of attrs; 0 when the
// counter was never recorded.
func (h *stragglerHarness) total(t *testing.T, name string, attrs ...attribute.KeyValue) int64 {
	t.Helper()
	m, err := h.tel.GetMetric("otelcol_processor_rank_strategy_" + name)
	if err != nil {
		return 0
	}
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is an int sum", name)
	var n int64
	for _, dp := range sum.DataPoints {
		match := true
		for _, a := range attrs {
			v, ok := dp.Attributes.Value(a.Key)
			match = match && ok && v == a.Value
		}
		if match {
			n += dp.Value
		}
	}
	return n
}

func (h *stragglerHarness) items(t *testing.T, kept bool, r reason) int64 {
	name := "items_dropped"
	if kept {
		name = "items_kept"
	}
	return h.total(t, name, attribute.String("otel.signal", "traces"), attribute.String("reason", r.String()))
}

// sendStep sends every rank's spans of one synchronous step the way ranks
// export them, in several batches: most children first; then the rest with
// the step span; then, for every fourth rank, a child that ends after the
// step span (as an async span does). Every fourth rank (another quarter)
// exports parents before children.
func sendStep(t *testing.T, h *stragglerHarness, run trainingRun, iteration int64) int {
	t.Helper()
	sent := 0
	half := len(endOrder) / 2
	var after []ptrace.Traces
	for rank := range run.worldSize() {
		order := slices.Clone(endOrder)
		if rank%4 == 2 {
			slices.Reverse(order)
		}
		var trailing []int
		if rank%4 == 1 {
			// grad_sync.finish, a wait, arrives after its step span, in a
			// later batch.
			order = slices.DeleteFunc(order, func(n int) bool { return n == gradSyncFinish })
			trailing = []int{gradSyncFinish}
		}
		h.consume(t, run.batch(rank, iteration, order[:half]...))
		h.consume(t, run.batch(rank, iteration, order[half:]...))
		sent += len(order)
		if trailing != nil {
			after = append(after, run.batch(rank, iteration, trailing...))
			sent += len(trailing)
		}
	}
	for _, td := range after {
		h.consume(t, td)
	}
	return sent
}

func wholeStep(rank, iteration int64, reason string) []string {
	out := make([]string, spansPerStep)
	for n := range spansPerStep {
		out[n] = outSpan{rank: rank, iteration: iteration, n: n}.String() + reason
	}
	return out
}

func describe(spans []outSpan) []string {
	out := make([]string, len(spans))
	for i, s := range spans {
		out[i] = s.String() + s.keptReason
	}
	sort.Strings(out)
	return out
}
