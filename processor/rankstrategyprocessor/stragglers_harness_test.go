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
	"github.com/nemo-lens/otelcol-nemo/internal/clock/clocktest"
	"github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor/internal/metadatatest"
)

// stepNode is a span of a step: its name and its parent's index, -1 for the
// step span.
type stepNode struct {
	name   string
	parent int
}

// stepTree is one rank's Megatron step: span 0 is the step span, the others
// hang below it. Only the step span carries the iteration: the children are
// tied to it through their parents. The wait spans are a pipeline receive
// under forward_backward (5) and the gradient sync under the step (8).
var stepTree = []stepNode{
	{"megatron.train_step", -1},         // 0
	{"megatron.forward_backward", 0},    // 1
	{"megatron.microbatch.forward", 1},  // 2
	{"megatron.layer.forward", 2},       // 3
	{"megatron.microbatch.forward", 1},  // 4
	{"megatron.p2p.recv_forward", 1},    // 5
	{"megatron.microbatch.backward", 1}, // 6
	{"megatron.microbatch.backward", 1}, // 7
	{"megatron.grad_sync.finish", 0},    // 8
	{"megatron.optimizer_step", 0},      // 9
}

// endOrder is the order the spans of a step end in, and so the order a rank
// exports them: children before their parents, the step span last.
var endOrder = []int{3, 2, 5, 4, 6, 7, 1, 8, 9, 0}

// The synchronous step: every rank computes (forward_backward) for its own
// time, with a pipeline receive of recvWait inside; then it waits in
// grad_sync.finish until the slowest rank has computed and syncWork more has
// passed; then every rank runs the optimizer for optimizerTime. All ranks'
// steps start and end together; busy time = compute - recvWait + optimizer.
const (
	stepPeriod    = 3 * time.Second
	recvWait      = 20 * time.Millisecond
	syncWork      = 100 * time.Millisecond
	optimizerTime = 150 * time.Millisecond
	lateChildN    = 20 // span number of a child sent after its step's decision
	jobSpanMark   = 0xbb
	stepMark      = 0xaa
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
	// stepName is the step span's name: megatron.train_step, or
	// megatron.train.iteration in the newer taxonomy.
	stepName string
	// stepsAreRoots makes every step its own trace root instead of a child
	// of the run-long job span.
	stepsAreRoots bool
}

func newTrainingRun(worldSize int64) trainingRun {
	return trainingRun{run: "run-s", worldSize: worldSize, origin: time.Date(2025, 6, 15, 12, 0, 0, 0, time.UTC), stepName: "megatron.train_step"}
}

// compute is how long rank computes on a step: 700ms plus a millisecond per
// rank, so that ranks differ a little, times slow (0 means 1).
func compute(rank int64, slow float64) time.Duration {
	if slow == 0 {
		slow = 1
	}
	return time.Duration(float64(700*time.Millisecond+time.Duration(rank)*time.Millisecond) * slow)
}

// stepTiming is one rank's compute time and the slowest rank's on a step.
type stepTiming struct{ compute, slowest time.Duration }

// busy is what the processor should measure for the rank.
func (tm stepTiming) busy() time.Duration { return tm.compute - recvWait + optimizerTime }

// timing returns every rank's timing on a step where the ranks in slow are
// that many times slower.
func (r trainingRun) timing(slow map[int64]float64) func(rank int64) stepTiming {
	var slowest time.Duration
	for rank := range r.worldSize {
		slowest = max(slowest, compute(rank, slow[rank]))
	}
	return func(rank int64) stepTiming { return stepTiming{compute: compute(rank, slow[rank]), slowest: slowest} }
}

func (r trainingRun) traceID(iteration int64) pcommon.TraceID {
	id := runTraceID
	if r.stepsAreRoots {
		id[14], id[15] = byte(iteration>>8), byte(iteration)
	}
	return id
}

// span returns node n's name, parent and interval on a synchronous step
// that starts at start.
func (r trainingRun) span(n int, rank, iteration int64, start time.Time, tm stepTiming) (string, pcommon.SpanID, time.Time, time.Time) {
	c := tm.compute
	at := start.Add
	syncEnd := tm.slowest + syncWork
	if n == lateChildN {
		return "megatron.p2p.send_forward", stepSpanID(rank, iteration, 1), at(c / 2), at(c/2 + time.Millisecond)
	}
	var from, to time.Time
	switch n {
	case 0:
		from, to = at(0), at(syncEnd+optimizerTime)
	case 1:
		from, to = at(0), at(c)
	case 2:
		from, to = at(0), at(c/4)
	case 3:
		from, to = at(0), at(c/8)
	case 4:
		from, to = at(c/2), at(3*c/4)
	case 5:
		from, to = at(c/2), at(c/2+recvWait)
	case 6:
		from, to = at(c/4), at(c/2)
	case 7:
		from, to = at(3*c/4), at(c)
	case 8:
		from, to = at(c), at(syncEnd)
	case 9:
		from, to = at(syncEnd), at(syncEnd+optimizerTime)
	}
	if stepTree[n].parent < 0 {
		parent := jobSpanID(rank)
		if r.stepsAreRoots {
			parent = pcommon.SpanID{}
		}
		return r.stepName, parent, from, to
	}
	return stepTree[n].name, stepSpanID(rank, iteration, stepTree[n].parent), from, to
}

// batch is one export from rank: spans ns of its step iteration. Span
// lateChildN is an extra child of forward_backward.
func (r trainingRun) batch(rank, iteration int64, tm stepTiming, ns ...int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rankProcess{run: r.run, rank: rank, worldSize: r.worldSize, localRank: rank % 8}.fillResource(rs.Resource().Attributes())
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("megatron.core")
	ss.Scope().SetVersion("0.12.0")
	start := r.origin.Add(time.Duration(iteration) * stepPeriod)
	for _, n := range ns {
		s := ss.Spans().AppendEmpty()
		s.SetTraceID(r.traceID(iteration))
		s.SetSpanID(stepSpanID(rank, iteration, n))
		name, parent, from, to := r.span(n, rank, iteration, start, tm)
		s.SetName(name)
		s.SetParentSpanID(parent)
		if n == 0 {
			s.Attributes().PutInt("megatron.iteration", iteration)
		}
		s.SetStartTimestamp(pcommon.NewTimestampFromTime(from))
		s.SetEndTimestamp(pcommon.NewTimestampFromTime(to))
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
			resRank, ok := rs.Resource().Attributes().Get("nv.dl.rank")
			require.True(t, ok, "resource kept its attributes")
			run, _ := rs.Resource().Attributes().Get("nemo.run.id")
			require.Contains(t, run.Str(), "run-s")
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
func sendStep(t *testing.T, h *stragglerHarness, run trainingRun, iteration int64, slow map[int64]float64) int {
	t.Helper()
	sent := 0
	timing := run.timing(slow)
	var after []ptrace.Traces
	for rank := range run.worldSize {
		tm := timing(rank)
		order := slices.Clone(endOrder)
		if rank%4 == 2 {
			slices.Reverse(order)
		}
		var trailing []int
		if rank%4 == 1 {
			// grad_sync.finish, a wait, arrives after its step span, in a
			// later batch.
			order = slices.DeleteFunc(order, func(n int) bool { return n == 8 })
			trailing = []int{8}
		}
		h.consume(t, run.batch(rank, iteration, tm, order[:5]...))
		h.consume(t, run.batch(rank, iteration, tm, order[5:]...))
		sent += len(order)
		if trailing != nil {
			after = append(after, run.batch(rank, iteration, tm, trailing...))
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

// pendingSpans counts the spans waiting for their step; call with mu held.
func (b *stragglerBuffer) pendingSpans() int {
	n := 0
	for _, st := range b.ranks {
		n += len(st.unresolved)
	}
	return n
}
