package rankstrategyprocessor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
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

	"github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor/internal/metadatatest"
)

// stepNode is a span of a step: its name and its parent's index, -1 for the
// step span.
type stepNode struct {
	name   string
	parent int
}

// stepTree is one rank's Megatron step: span 0 is megatron.train_step, the
// others hang below it. Only the step span carries the iteration: the
// children are tied to it through their parents.
var stepTree = []stepNode{
	{"megatron.train_step", -1},         // 0
	{"megatron.forward_backward", 0},    // 1
	{"megatron.microbatch.forward", 1},  // 2
	{"megatron.layer.forward", 2},       // 3
	{"megatron.microbatch.forward", 1},  // 4
	{"megatron.layer.forward", 4},       // 5
	{"megatron.microbatch.backward", 1}, // 6
	{"megatron.microbatch.backward", 1}, // 7
	{"megatron.grad_sync.finish", 0},    // 8
	{"megatron.optimizer_step", 0},      // 9
}

// endOrder is the order the spans of a step end in, and so the order a rank
// exports them: children before their parents, the step span last.
var endOrder = []int{3, 2, 5, 4, 6, 7, 1, 8, 9, 0}

const (
	stepPeriod  = 3 * time.Second
	lateChildN  = 20 // span number of a child sent after its step's decision
	jobSpanMark = 0xbb
	stepMark    = 0xaa
)

var runTraceID = pcommon.TraceID{0x4c, 0x65, 0x6e, 0x73, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}

func stepSpanID(rank, iteration int64, n int) pcommon.SpanID {
	return pcommon.SpanID{stepMark, byte(rank >> 8), byte(rank), byte(iteration >> 8), byte(iteration), 0, 0, byte(n + 1)}
}

// jobSpanID is the id of the rank's megatron.train span, the step spans'
// parent, which lasts the whole run.
func jobSpanID(rank int64) pcommon.SpanID {
	return pcommon.SpanID{jobSpanMark, byte(rank >> 8), byte(rank), 0, 0, 0, 0, 1}
}

// trainingRun emits the spans of one emulated Megatron run.
type trainingRun struct {
	run       string
	worldSize int64
	origin    time.Time
}

func newTrainingRun(worldSize int64) trainingRun {
	return trainingRun{run: "run-s", worldSize: worldSize, origin: time.Date(2025, 6, 15, 12, 0, 0, 0, time.UTC)}
}

// batch is one export from rank: spans ns of its step iteration, which took
// dur. Span lateChildN is an extra child of forward_backward.
func (r trainingRun) batch(rank, iteration int64, dur time.Duration, ns ...int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rankProcess{run: r.run, rank: rank, worldSize: r.worldSize, localRank: rank % 8}.fillResource(rs.Resource().Attributes())
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("megatron.core")
	ss.Scope().SetVersion("0.12.0")
	start := r.origin.Add(time.Duration(iteration) * stepPeriod)
	for _, n := range ns {
		s := ss.Spans().AppendEmpty()
		s.SetTraceID(runTraceID)
		s.SetSpanID(stepSpanID(rank, iteration, n))
		switch {
		case n == lateChildN:
			s.SetName("megatron.p2p.send_forward")
			s.SetParentSpanID(stepSpanID(rank, iteration, 1))
		case stepTree[n].parent < 0:
			s.SetName(stepTree[n].name)
			s.SetParentSpanID(jobSpanID(rank))
			s.Attributes().PutInt("megatron.iteration", iteration)
		default:
			s.SetName(stepTree[n].name)
			s.SetParentSpanID(stepSpanID(rank, iteration, stepTree[n].parent))
		}
		spanStart := start
		spanDur := dur
		if n != 0 {
			spanStart = start.Add(dur * time.Duration(n) / 40)
			spanDur = dur / 2
		}
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(spanStart))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(spanStart.Add(spanDur)))
	}
	return td
}

// jobSpan is rank's megatron.train span, a child of megatron.pretrain, in no
// step.
func (r trainingRun) jobSpan(rank int64) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rankProcess{run: r.run, rank: rank, worldSize: r.worldSize, localRank: rank % 8}.fillResource(rs.Resource().Attributes())
	s := rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty()
	s.SetName("megatron.train")
	s.SetTraceID(runTraceID)
	s.SetSpanID(jobSpanID(rank))
	s.SetParentSpanID(pcommon.SpanID{jobSpanMark, 0xff, 0xff, 0, 0, 0, 0, 1})
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(r.origin))
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(r.origin.Add(time.Hour)))
	return td
}

// stepDur is how long rank takes for a step: one second plus a millisecond
// per rank, so that ranks differ a little, times slow.
func stepDur(rank int64, slow float64) time.Duration {
	return time.Duration(float64(time.Second+time.Duration(rank)*time.Millisecond) * slow)
}

// outSpan is a span as it came out of the processor.
type outSpan struct {
	rank, iteration int64
	n               int
	keptReason      string
	ratio           float64
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
			resRank, ok := rs.Resource().Attributes().Get("nv.dl.rank")
			require.True(t, ok, "resource kept its attributes")
			run, _ := rs.Resource().Attributes().Get("nemo.run.id")
			require.Equal(t, "run-s", run.Str())
			for j := 0; j < rs.ScopeSpans().Len(); j++ {
				ss := rs.ScopeSpans().At(j)
				require.Equal(t, "megatron.core", ss.Scope().Name(), "scope kept")
				require.Equal(t, "0.12.0", ss.Scope().Version(), "scope kept")
				for k := 0; k < ss.Spans().Len(); k++ {
					s := ss.Spans().At(k)
					id := s.SpanID()
					o := outSpan{rank: int64(id[1])<<8 | int64(id[2]), iteration: int64(id[3])<<8 | int64(id[4]), n: int(id[7]) - 1}
					if id[0] == jobSpanMark {
						o = outSpan{rank: int64(id[1])<<8 | int64(id[2]), iteration: -1, n: -1}
					}
					require.Equal(t, resRank.Int(), o.rank, "span %s is under its own rank's resource", o)
					if v, ok := s.Attributes().Get(keptReasonKey); ok {
						o.keptReason = v.Str()
					}
					if v, ok := s.Attributes().Get(stragglerRatioKey); ok {
						o.ratio = v.Double()
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
	clock  *fakeClock
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
	h := &stragglerHarness{clock: newFakeClock(), sink: new(consumertest.TracesSink), tel: tel, logged: logged}
	if next == nil {
		next = h.sink
	}
	var err error
	h.tp, h.p, err = newTracesProcessor(context.Background(), set, cfg, next, h.clock)
	require.NoError(t, err)
	require.NoError(t, h.tp.Start(context.Background(), componenttest.NewNopHost()))
	t.Cleanup(func() {
		h.shutdown(t)
		require.NoError(t, tel.Shutdown(context.Background()))
	})
	return h
}

func (h *stragglerHarness) shutdown(t *testing.T) {
	if !h.down {
		h.down = true
		require.NoError(t, h.tp.Shutdown(context.Background()))
	}
}

func (h *stragglerHarness) consume(t *testing.T, td ptrace.Traces) {
	t.Helper()
	require.NoError(t, h.tp.ConsumeTraces(context.Background(), td))
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

// sendStep sends every rank's spans of one step the way ranks export them,
// in several batches: most children first; then the rest with the step
// span; then, for every fourth rank, a child that ends after the step span
// (as an async span does). Every fourth rank (another quarter) exports
// parents before children.
func sendStep(t *testing.T, h *stragglerHarness, run trainingRun, iteration int64, slow map[int64]float64) int {
	t.Helper()
	sent := 0
	var after []ptrace.Traces
	for rank := range run.worldSize {
		factor := slow[rank]
		if factor == 0 {
			factor = 1
		}
		dur := stepDur(rank, factor)
		order := slices.Clone(endOrder)
		if rank%4 == 2 {
			slices.Reverse(order)
		}
		var trailing []int
		if rank%4 == 1 {
			// grad_sync.finish arrives after its step span, in a later batch.
			order = slices.DeleteFunc(order, func(n int) bool { return n == 8 })
			trailing = []int{8}
		}
		h.consume(t, run.batch(rank, iteration, dur, order[:5]...))
		h.consume(t, run.batch(rank, iteration, dur, order[5:]...))
		sent += len(order)
		if trailing != nil {
			after = append(after, run.batch(rank, iteration, dur, trailing...))
			sent += len(trailing)
		}
	}
	for _, td := range after {
		h.consume(t, td)
	}
	return sent
}

func wholeStep(rank, iteration int64, reason string) []string {
	out := make([]string, len(stepTree))
	for n := range stepTree {
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

// 64 ranks, single_rank keeps rank 63; rank 17 is twice as slow on steps 5
// and 9. Exactly rank 17's subtrees of steps 5 and 9 come out beside
// everything of rank 63, whatever order and batches the spans came in, plus
// a late child of rank 17's step 5; a late child of a dropped step is
// dropped.
func TestStragglersKeepSlowRankSteps(t *testing.T) {
	h := newStragglerHarness(t, nil, nil)
	run := newTrainingRun(64)
	slow := map[int64]map[int64]float64{5: {17: 2}, 9: {17: 2}}

	sent := 0
	for it := int64(1); it <= 12; it++ {
		sent += sendStep(t, h, run, it, slow[it])
		h.clock.Advance(stepPeriod)
		if it == 8 {
			// Step 5 (first seen at 15s) was decided at 27s. Late children
			// follow its decision.
			require.Equal(t, int64(5), h.total(t, "stragglers_steps_decided"))
			h.consume(t, run.batch(17, 5, stepDur(17, 2), lateChildN))
			h.consume(t, run.batch(3, 5, stepDur(3, 1), lateChildN))
			sent += 2
		}
	}
	// megatron.train of a dropped rank arrives at the end: in no step, it
	// is dropped once it waited decision_wait.
	h.consume(t, run.jobSpan(5))
	sent++
	h.clock.Advance(11 * time.Second)

	var want []string
	for it := int64(1); it <= 12; it++ {
		want = append(want, wholeStep(63, it, "")...)
	}
	want = append(want, wholeStep(17, 5, "straggler")...)
	want = append(want, wholeStep(17, 9, "straggler")...)
	want = append(want, outSpan{rank: 17, iteration: 5, n: lateChildN}.String()+"straggler")
	sort.Strings(want)
	got := outputSpans(t, h.sink.AllTraces())
	assert.Equal(t, want, describe(got))

	for _, s := range got {
		if s.keptReason == "straggler" {
			// 2 x 1.017s over the median of 1.0325s.
			assert.InDelta(t, 1.970, s.ratio, 0.001, "step duration / median for %s", s)
		} else {
			assert.Zero(t, s.ratio)
		}
	}

	keptStraggler := int64(2*len(stepTree) + 1)
	assert.Equal(t, keptStraggler, h.items(t, true, reasonStraggler))
	assert.Equal(t, int64(12*len(stepTree)), h.items(t, true, reasonSelected))
	assert.Equal(t, int64(sent)-keptStraggler-int64(12*len(stepTree)), h.items(t, false, reasonNotSelected), "every held span is accounted for")
	assert.Equal(t, int64(12), h.total(t, "stragglers_steps_decided"))
	assert.Equal(t, int64(2), h.total(t, "stragglers_kept"))
	assert.Zero(t, h.total(t, "stragglers_early_decisions"))
	assert.Equal(t, int64(2), h.total(t, "stragglers_late_spans"))
	assert.Equal(t, int64(2), h.total(t, "stragglers_decision_cache_hits"))
	assert.Zero(t, h.total(t, "stragglers_spans_held"), "nothing left held")
	assert.Zero(t, h.total(t, "stragglers_send_failed"))
	assert.Empty(t, h.logged.FilterLevelExact(zapcore.WarnLevel).All())

	b := h.p.stragglers
	b.mu.Lock()
	defer b.mu.Unlock()
	assert.Empty(t, b.open)
	assert.Zero(t, b.pendingSpans())
	assert.Zero(t, b.held)
	assert.Zero(t, b.observed)
}

// A rank whose whole step arrives after the step was decided is judged
// against the decision's cutoff; max_ranks_per_step keeps the slowest.
func TestStragglersLateRankAndCap(t *testing.T) {
	h := newStragglerHarness(t, func(c *Config) { c.Stragglers.Get().MaxRanksPerStep = 2 }, nil)
	run := newTrainingRun(16)
	// Ranks 3, 4 and 5 are slow on step 1 (3x, 2.5x, 2x), rank 9 (4x)
	// arrives after the decision, rank 10 (1x) too.
	slow := map[int64]float64{3: 3, 4: 2.5, 5: 2}
	for rank := range run.worldSize {
		if rank == 9 || rank == 10 {
			continue
		}
		f := slow[rank]
		if f == 0 {
			f = 1
		}
		h.consume(t, run.batch(rank, 1, stepDur(rank, f), endOrder...))
	}
	h.clock.Advance(10 * time.Second)
	h.consume(t, run.batch(9, 1, stepDur(9, 4), endOrder...))
	h.consume(t, run.batch(10, 1, stepDur(10, 1), endOrder...))
	h.clock.Advance(time.Second)

	var want []string
	want = append(want, wholeStep(15, 1, "")...)
	want = append(want, wholeStep(3, 1, "straggler")...)
	want = append(want, wholeStep(4, 1, "straggler")...)
	sort.Strings(want)
	assert.Equal(t, want, describe(outputSpans(t, h.sink.AllTraces())), "the 2 slowest of 3 stragglers; the late one finds the step full")
	assert.Equal(t, int64(2), h.total(t, "stragglers_kept"))
	assert.Equal(t, int64(2*len(stepTree)), h.total(t, "stragglers_late_spans"))

	// With room left, a late slow rank is kept.
	h2 := newStragglerHarness(t, nil, nil)
	for rank := range run.worldSize {
		if rank != 9 {
			h2.consume(t, run.batch(rank, 1, stepDur(rank, 1), endOrder...))
		}
	}
	h2.clock.Advance(11 * time.Second)
	h2.consume(t, run.batch(9, 1, stepDur(9, 4), endOrder...))
	h2.clock.Advance(time.Second)
	want = append(wholeStep(15, 1, ""), wholeStep(9, 1, "straggler")...)
	sort.Strings(want)
	assert.Equal(t, want, describe(outputSpans(t, h2.sink.AllTraces())))
	assert.Equal(t, int64(1), h2.total(t, "stragglers_kept"))
	assert.Equal(t, int64(len(stepTree)), h2.total(t, "stragglers_decision_cache_hits"))
}

// With max_buffered_spans far below a run's volume, the oldest steps are
// decided early, counted, and the buffer never holds more than the bound;
// the stragglers are still found, since a step is only decided early once
// younger steps arrive; every span is counted kept or dropped.
func TestStragglersMemoryBound(t *testing.T) {
	const bound = 1000 // about 1.5 steps of 63 dropped ranks x 10 spans
	h := newStragglerHarness(t, func(c *Config) { c.Stragglers.Get().MaxBufferedSpans = bound }, nil)
	run := newTrainingRun(64)
	b := h.p.stragglers
	maxHeld := 0
	check := func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		maxHeld = max(maxHeld, b.held+b.out.count)
		require.LessOrEqual(t, b.held+b.out.count, bound)
		require.LessOrEqual(t, b.observed, bound)
		require.LessOrEqual(t, b.spanSteps.len(), 2*max(bound, 1024))
	}
	sent := 0
	for it := int64(1); it <= 20; it++ {
		for rank := range run.worldSize {
			f := 1.0
			if rank == 17 && (it == 5 || it == 9) {
				f = 2
			}
			h.consume(t, run.batch(rank, it, stepDur(rank, f), endOrder...))
			sent += len(endOrder)
			check()
		}
		// No time passes: only the bound makes decisions.
	}
	assert.Greater(t, maxHeld, bound/2, "the bound was reached")
	early := h.total(t, "stragglers_early_decisions")
	assert.GreaterOrEqual(t, early, int64(18), "steps decided early")
	assert.Equal(t, early, h.total(t, "stragglers_steps_decided"), "no wait ended")
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

// When no step span ever comes (a wrong step_span_name), spans waiting for
// a step are dropped oldest first at the bound, and after decision_wait
// otherwise, with one warning.
func TestStragglersWithoutStepSpans(t *testing.T) {
	const bound = 500
	h := newStragglerHarness(t, func(c *Config) {
		c.Stragglers.Get().MaxBufferedSpans = bound
		c.Stragglers.Get().StepSpanName = "megatron.step"
	}, nil)
	run := newTrainingRun(64)
	b := h.p.stragglers
	sent := 0
	for it := int64(1); it <= 3; it++ {
		for rank := range run.worldSize {
			h.consume(t, run.batch(rank, it, stepDur(rank, 1), endOrder...))
			sent += len(endOrder)
			b.mu.Lock()
			held := b.held
			b.mu.Unlock()
			require.LessOrEqual(t, held, bound)
		}
		h.clock.Advance(time.Second)
	}
	h.clock.Advance(10 * time.Second)
	assert.Equal(t, int64(sent-3*len(stepTree)), h.items(t, false, reasonNotSelected))
	assert.Zero(t, h.total(t, "stragglers_steps_decided"))
	assert.Zero(t, h.total(t, "stragglers_spans_held"))
	warnings := h.logged.FilterMessageSnippet(`no span named "megatron.step"`).All()
	require.Len(t, warnings, 1)
	assert.Contains(t, warnings[0].Message, "stragglers::step_span_name")
}

// Shutdown decides what is pending at once and passes the kept spans on
// before it returns.
func TestStragglersShutdownFlushes(t *testing.T) {
	h := newStragglerHarness(t, nil, nil)
	run := newTrainingRun(32)
	for it := int64(1); it <= 3; it++ {
		for rank := range run.worldSize {
			f := 1.0
			if it == 2 && rank == 17 {
				f = 2
			}
			h.consume(t, run.batch(rank, it, stepDur(rank, f), endOrder...))
		}
	}
	// A span still waiting for its step is dropped at shutdown.
	h.consume(t, run.batch(4, 4, stepDur(4, 1), 3))
	assert.Len(t, h.sink.AllTraces(), 3, "rank 31 passes through; nothing decided yet")
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
	assert.Zero(t, h.total(t, "stragglers_spans_held"))
	dropped := int64((3*31-1)*len(stepTree) + 1)
	assert.Equal(t, dropped, h.items(t, false, reasonNotSelected))

	// After shutdown nothing is held any more.
	require.NoError(t, h.tp.ConsumeTraces(context.Background(), run.batch(4, 5, stepDur(4, 1), endOrder...)))
	assert.Zero(t, h.total(t, "stragglers_spans_held"))
	assert.Equal(t, dropped+int64(len(stepTree)), h.items(t, false, reasonNotSelected))
}

// keep_errors passes a dropped rank's error span on at once; the buffer
// still ties its children to the step through it, and does not pass it on a
// second time when the step is kept.
func TestStragglersWithKeepErrors(t *testing.T) {
	h := newStragglerHarness(t, nil, nil)
	run := newTrainingRun(8)
	withError := func(td ptrace.Traces) ptrace.Traces {
		spans := td.ResourceSpans().At(0).ScopeSpans().At(0).Spans()
		for i := 0; i < spans.Len(); i++ {
			if spans.At(i).Name() == "megatron.forward_backward" {
				spans.At(i).Status().SetCode(ptrace.StatusCodeError)
			}
		}
		return td
	}
	for rank := range run.worldSize {
		f := 1.0
		if rank == 2 {
			f = 2
		}
		// The error span arrives with the children, before the step span.
		h.consume(t, withError(run.batch(rank, 1, stepDur(rank, f), endOrder[:7]...)))
		h.consume(t, run.batch(rank, 1, stepDur(rank, f), endOrder[7:]...))
	}
	synchronous := describe(outputSpans(t, h.sink.AllTraces()))
	var want []string
	for rank := range int64(7) {
		want = append(want, outSpan{rank: rank, iteration: 1, n: 1}.String()+"error")
	}
	want = append(want, wholeStep(7, 1, "")...)
	sort.Strings(want)
	assert.Equal(t, want, synchronous)

	h.clock.Advance(11 * time.Second)
	for _, s := range wholeStep(2, 1, "straggler") {
		if s != (outSpan{rank: 2, iteration: 1, n: 1}).String()+"straggler" {
			want = append(want, s)
		}
	}
	sort.Strings(want)
	assert.Equal(t, want, describe(outputSpans(t, h.sink.AllTraces())))
	assert.Equal(t, int64(7), h.items(t, true, reasonError))
	assert.Equal(t, int64(len(stepTree)-1), h.items(t, true, reasonStraggler))
	assert.Equal(t, int64(6*(len(stepTree)-1)), h.items(t, false, reasonNotSelected))
	assert.Zero(t, h.total(t, "stragglers_spans_held"))
}

// Errors of the next consumer on the ticker are logged and counted.
func TestStragglersSendFailure(t *testing.T) {
	h := newStragglerHarness(t, func(c *Config) { c.Strategy = StrategyRanks; c.Ranks = "0" }, consumertest.NewErr(errors.New("backend down")))
	run := newTrainingRun(8)
	for rank := int64(1); rank < run.worldSize; rank++ {
		f := 1.0
		if rank == 5 {
			f = 3
		}
		h.consume(t, run.batch(rank, 1, stepDur(rank, f), endOrder...))
	}
	h.clock.Advance(11 * time.Second)
	assert.Equal(t, int64(len(stepTree)), h.total(t, "stragglers_send_failed"))
	errs := h.logged.FilterMessageSnippet("refused kept straggler spans").All()
	require.Len(t, errs, 1)
	assert.Equal(t, "backend down", errs[0].ContextMap()["error"])
}

// ConsumeTraces is called from several goroutines while the ticker runs;
// the outcome is the same as in order. Run with -race.
func TestStragglersConcurrentBatches(t *testing.T) {
	h := newStragglerHarness(t, nil, nil)
	run := newTrainingRun(64)
	const workers = 4
	for it := int64(1); it <= 6; it++ {
		var wg sync.WaitGroup
		for w := range int64(workers) {
			wg.Go(func() {
				for rank := w; rank < run.worldSize; rank += workers {
					f := 1.0
					if rank == 17 && it%3 == 0 {
						f = 2
					}
					assert.NoError(t, h.tp.ConsumeTraces(context.Background(), run.batch(rank, it, stepDur(rank, f), endOrder[:6]...)))
					assert.NoError(t, h.tp.ConsumeTraces(context.Background(), run.batch(rank, it, stepDur(rank, f), endOrder[6:]...)))
				}
			})
		}
		// The ticker runs while the batches arrive; no step is due yet.
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
// in any order, also when a parent came before its child.
func TestStragglersResolveAnyOrder(t *testing.T) {
	run := newTrainingRun(4)
	orders := map[string][]int{
		"end order":           endOrder,
		"start order":         {0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
		"parents after steps": {1, 2, 4, 3, 5, 6, 7, 8, 9, 0},
		"one by one reversed": {9, 8, 7, 6, 5, 4, 3, 2, 1, 0},
	}
	for name, order := range orders {
		t.Run(name, func(t *testing.T) {
			for _, perBatch := range []int{1, 3, 10} {
				h := newStragglerHarness(t, nil, nil)
				for rank := range run.worldSize {
					f := 1.0
					if rank == 1 {
						f = 2
					}
					for i := 0; i < len(order); i += perBatch {
						h.consume(t, run.batch(rank, 1, stepDur(rank, f), order[i:min(i+perBatch, len(order))]...))
					}
				}
				h.clock.Advance(11 * time.Second)
				want := append(wholeStep(3, 1, ""), wholeStep(1, 1, "straggler")...)
				sort.Strings(want)
				assert.Equal(t, want, describe(outputSpans(t, h.sink.AllTraces())), "%d spans per batch", perBatch)
				b := h.p.stragglers
				b.mu.Lock()
				assert.Zero(t, b.pendingSpans(), "nothing left pending")
				b.mu.Unlock()
			}
		})
	}
}

// pendingSpans counts the spans waiting for their step; call with mu held.
func (b *stragglerBuffer) pendingSpans() int {
	n := 0
	for _, st := range b.ranks {
		n += len(st.unresolved)
	}
	return n
}

// Ranks that each carry their own run id are never compared: one warning.
func TestStragglersWarnWhenRanksDoNotShareARun(t *testing.T) {
	h := newStragglerHarness(t, nil, nil)
	for rank := range int64(4) {
		run := newTrainingRun(4)
		run.run = fmt.Sprintf("run-s-%d", rank)
		h.consume(t, run.batch(rank, 1, stepDur(rank, float64(rank+1)), endOrder...))
	}
	h.clock.Advance(11 * time.Second)
	assert.Zero(t, h.total(t, "stragglers_kept"))
	assert.Equal(t, int64(3), h.total(t, "stragglers_steps_decided"))
	warnings := h.logged.FilterMessageSnippet("decided having seen a single rank").All()
	require.Len(t, warnings, 1)
	assert.Contains(t, warnings[0].Message, "NEMO_LENS_RUN_ID")
}

func TestMedian(t *testing.T) {
	assert.Zero(t, median(nil))
	assert.Equal(t, 3.0, median([]int64{5, 1, 3}))
	assert.Equal(t, 2.5, median([]int64{4, 1, 3, 2}))
}

func TestDecisionCacheEvictsOldest(t *testing.T) {
	c := newDecisionCache(2)
	for it := range int64(3) {
		c.put(stepKey{iteration: it}, &stepDecision{median: float64(it)})
	}
	assert.Nil(t, c.get(stepKey{iteration: 0}))
	assert.NotNil(t, c.get(stepKey{iteration: 1}))
	assert.NotNil(t, c.get(stepKey{iteration: 2}))
	assert.Len(t, c.byStep, 2)
}

func TestTickInterval(t *testing.T) {
	assert.Equal(t, time.Second, tickInterval(10*time.Second))
	assert.Equal(t, 200*time.Millisecond, tickInterval(2*time.Second))
	assert.Equal(t, 10*time.Millisecond, tickInterval(time.Millisecond))
}
