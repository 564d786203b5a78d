// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepsamplingprocessor

import (
	"context"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/clocktest"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/spantest"
	"github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor/internal/metadata"
)

// inJob and ownRoot are the shapes of the tests that need only one: steps
// named megatron.train_step under the run-long job span, or each its own
// trace root.
var (
	inJob   = lensfixture.Shape{StepName: attrkey.MegatronTrainStep}
	ownRoot = lensfixture.Shape{StepName: attrkey.MegatronTrainStep, StepsAreRoots: true}
)

// testStep is every rank's step: the fixture's default step, its
// micro-batches spelled out so that its span count is known.
var testStep = func() lensfixture.Step {
	s := lensfixture.DefaultStep
	s.MicroBatches = 2
	return s
}()

var (
	stepSpans  = testStep.Spans()
	childCount = stepSpans - 1 // the step span's descendants
)

// ranksOf is n ranks of a run, mixing rank spellings as real fleets do.
func ranksOf(run string, n int64) []lensfixture.Rank {
	return lensfixture.Fleet(lensfixture.Rank{Run: run, WorldSize: n})
}

// jobOf is a synchronous training run of ranks whose steps arrive in shape.
func jobOf(shape lensfixture.Shape, ranks []lensfixture.Rank) lensfixture.Run {
	return lensfixture.Run{Ranks: ranks, Shape: shape, Step: testStep}
}

// appendStep appends the fixture's step of rank r.
func appendStep(dst ptrace.SpanSlice, run lensfixture.Run, r lensfixture.Rank, it int64) {
	appendStepPart(dst, run, r, it, lensfixture.WholeStep)
}

// appendStepPart appends part of the step: a rank exports the children,
// which end first, possibly in an earlier batch than their step span. A
// rank that sends its identity as strings sends its iteration as a decimal
// string too, so that both spellings are read.
func appendStepPart(dst ptrace.SpanSlice, run lensfixture.Run, r lensfixture.Rank, it int64, part lensfixture.Part) {
	at := run.AppendStepPart(dst, r, it, part)
	if at >= 0 && r.AsString {
		dst.At(at).Attributes().PutStr(attrkey.MegatronIteration, strconv.FormatInt(it, 10))
	}
}

func appendStepChildren(dst ptrace.SpanSlice, run lensfixture.Run, r lensfixture.Rank, it int64) {
	appendStepPart(dst, run, r, it, lensfixture.StepChildren)
}

func appendStepSpan(dst ptrace.SpanSlice, run lensfixture.Run, r lensfixture.Rank, it int64) {
	appendStepPart(dst, run, r, it, lensfixture.StepSpan)
}

// spanNamed is the first span named name in spans from index from on: a
// test that edits one span of a step finds it by name, not by its place in
// the export order.
func spanNamed(t *testing.T, spans ptrace.SpanSlice, from int, name string) ptrace.Span {
	t.Helper()
	for i := from; i < spans.Len(); i++ {
		if spans.At(i).Name() == name {
			return spans.At(i)
		}
	}
	require.Failf(t, "no such span", "%s after index %d", name, from)
	return ptrace.Span{}
}

// asyncIndex is the id index of appendAsyncSpan's span, past every span
// of a step's plan.
const asyncIndex = 0xfff

// appendAsyncSpan appends an asynchronous span of rank r's step it: it
// starts within its step, with the optimizer, and ends, and so is exported,
// after the step span. The fixture has no such span.
func appendAsyncSpan(dst ptrace.SpanSlice, run lensfixture.Run, r lensfixture.Rank, it int64) {
	step := run.StepOf(r.Rank, it)
	start := run.StepStart(it).Add(step.Duration() - step.Optimizer)
	s := dst.AppendEmpty()
	s.SetName("megatron.async_copy")
	s.SetTraceID(run.TraceID(r, it))
	s.SetSpanID(lensfixture.SpanID(lensfixture.KindStep, r.Rank, it, asyncIndex))
	s.SetParentSpanID(lensfixture.SpanID(lensfixture.KindStep, r.Rank, it, 0))
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(run.StepStart(it + 1)))
}

// training emulates a run: a batch per iteration with every rank's step,
// model_init first, a checkpoint after iteration 19, the job spans last.
// edit, when set, may change a rank's step spans (spans from index from on)
// before they are sent.
func training(run lensfixture.Run, iterations int64, edit func(r lensfixture.Rank, it int64, spans ptrace.SpanSlice, from int)) []ptrace.Traces {
	var out []ptrace.Traces
	for it := range iterations {
		td := ptrace.NewTraces()
		for _, r := range run.Ranks {
			spans := lensfixture.AppendResource(td, r)
			if it == 0 {
				run.AppendModelInit(spans, r)
			}
			from := spans.Len()
			appendStep(spans, run, r, it)
			if edit != nil {
				edit(r, it, spans, from)
			}
			if it == 19 {
				run.AppendCheckpoint(spans, r, it)
			}
			if it == iterations-1 {
				run.AppendJobEnd(spans, r, it)
			}
		}
		out = append(out, td)
	}
	return out
}

// seenSpan is an output span, read back from its id.
type seenSpan struct {
	kind      lensfixture.Kind
	rank, it  int64
	idx       int
	name      string
	reason    string
	hasReason bool
	attrs     int
}

func collect(sink *consumertest.TracesSink) []seenSpan {
	var out []seenSpan
	for _, td := range sink.AllTraces() {
		for _, s := range spantest.All(td) {
			id := lensfixture.ParseSpanID(s.SpanID())
			seen := seenSpan{
				kind: id.Kind, rank: id.Rank, it: id.Iteration,
				idx: id.Index, name: s.Name(), attrs: s.Attributes().Len(),
			}
			if v, ok := s.Attributes().Get(attrkey.KeptReason); ok {
				seen.reason, seen.hasReason = v.Str(), true
			}
			out = append(out, seen)
		}
	}
	return out
}

// keptSteps returns, per rank, the iterations whose spans came out, and
// checks that each came out whole (all its spans) and that every span of it
// says why it was kept.
func keptSteps(t *testing.T, seen []seenSpan, wantReason func(rank, it int64) string) map[int64][]int64 {
	t.Helper()
	count := map[[2]int64]int{}
	for _, s := range seen {
		if s.kind != lensfixture.KindStep {
			continue
		}
		count[[2]int64{s.rank, s.it}]++
		if wantReason != nil {
			require.Equal(t, wantReason(s.rank, s.it), s.reason, "rank %d iteration %d span %s", s.rank, s.it, s.name)
		}
	}
	out := map[int64][]int64{}
	for k, n := range count {
		require.Equal(t, stepSpans, n, "rank %d iteration %d must come out whole", k[0], k[1])
		out[k[0]] = append(out[k[0]], k[1])
	}
	for r := range out {
		slices.Sort(out[r])
	}
	return out
}

// jobSpans returns the names of the job-level spans that came out.
func jobSpans(seen []seenSpan) []string {
	var out []string
	for _, s := range seen {
		if s.kind == lensfixture.KindJob {
			out = append(out, s.name)
		}
	}
	slices.Sort(out)
	return out
}

type harness struct {
	tp    processor.Traces
	p     *stepSamplingProcessor
	sink  *consumertest.TracesSink
	clock *clocktest.Fake
}

func newHarness(t *testing.T, cfg *Config) *harness {
	return newHarnessWith(t, cfg, processortest.NewNopSettings(metadata.Type))
}

func newHarnessWith(t *testing.T, cfg *Config, set processor.Settings) *harness {
	t.Helper()
	require.NoError(t, cfg.Validate())
	h := &harness{sink: new(consumertest.TracesSink), clock: clocktest.NewFake()}
	var err error
	h.tp, h.p, err = newTracesProcessor(t.Context(), set, cfg, h.sink, h.clock)
	require.NoError(t, err)
	require.NoError(t, h.tp.Start(t.Context(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, h.tp.Shutdown(context.Background())) }) //nolint:usetesting // t.Context() is canceled before Cleanup runs
	return h
}

func (h *harness) send(t *testing.T, batches ...ptrace.Traces) {
	t.Helper()
	for _, td := range batches {
		require.NoError(t, h.tp.ConsumeTraces(t.Context(), td))
	}
}

// heldSpans is the spans waiting for their step span.
func (h *harness) heldSpans() int { return int(h.p.held.Load()) }

func sampledConfig(rate float64) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.SampleRate = rate
	return cfg
}
