package stepsamplingprocessor

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/processortest"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/clock/clocktest"
	"github.com/nemo-lens/otelcol-nemo/processor/stepsamplingprocessor/internal/metadata"
)

// shape is one way training traces arrive: the step span under a run-long
// job span or as its own trace root, named in either Megatron taxonomy.
type shape struct {
	name     string
	stepRoot bool
	stepName string
}

var shapes = []shape{
	{name: "job_root/train_step", stepName: "megatron.train_step"},
	{name: "job_root/train.iteration", stepName: "megatron.train.iteration"},
	{name: "step_root/train_step", stepRoot: true, stepName: "megatron.train_step"},
	{name: "step_root/train.iteration", stepRoot: true, stepName: "megatron.train.iteration"},
}

// rankProc is one emulated training process.
type rankProc struct {
	run      string
	rank     int64
	asString bool // rank sent as a string, as OTEL_RESOURCE_ATTRIBUTES does
}

func ranksOf(run string, n int64) []rankProc {
	out := make([]rankProc, n)
	for r := range n {
		out[r] = rankProc{run: run, rank: r, asString: r%2 == 1}
	}
	return out
}

func (r rankProc) fill(attrs pcommon.Map) {
	attrs.PutStr("service.name", "nemo")
	attrs.PutStr("nemo.run.id", r.run)
	attrs.PutStr("service.instance.id", fmt.Sprintf("%s-rank%d", r.run, r.rank))
	if r.asString {
		attrs.PutStr("dl.rank", fmt.Sprint(r.rank))
	} else {
		attrs.PutInt("nv.dl.rank", r.rank)
	}
}

// Span ids say what a span is, so that output can be read back:
// [kind, rank (2 bytes), iteration (2 bytes), child index].
const (
	kindStep byte = 1
	kindJob  byte = 2
)

const (
	childCount = 3 // children per step, plus the step span
	stepSpans  = childCount + 1
)

var t0 = time.Date(2025, 6, 15, 12, 0, 0, 0, time.UTC)

func spanID(kind byte, rank, iteration int64, idx byte) pcommon.SpanID {
	var id pcommon.SpanID
	id[0] = kind
	binary.BigEndian.PutUint16(id[1:3], uint16(rank))
	binary.BigEndian.PutUint16(id[3:5], uint16(iteration))
	id[5] = idx
	return id
}

func traceID(sh shape, rank, iteration int64) pcommon.TraceID {
	var id pcommon.TraceID
	binary.BigEndian.PutUint16(id[0:2], uint16(rank)+1)
	if sh.stepRoot && iteration >= 0 {
		binary.BigEndian.PutUint16(id[2:4], uint16(iteration)+1)
	}
	return id
}

func stepStart(iteration int64) time.Time {
	return t0.Add(10*time.Second + time.Duration(iteration)*time.Second)
}

func setSpan(s ptrace.Span, name string, tid pcommon.TraceID, id, parent pcommon.SpanID, start, end time.Time) {
	s.SetName(name)
	s.SetTraceID(tid)
	s.SetSpanID(id)
	s.SetParentSpanID(parent)
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(start))
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(end))
}

// trainSpanID is megatron.train's span id, the step spans' parent in the
// job-rooted shape.
func trainSpanID(rank int64) pcommon.SpanID { return spanID(kindJob, rank, 0, 1) }

// appendStepChildren appends the step's children in the order they end.
func appendStepChildren(dst ptrace.SpanSlice, sh shape, r rankProc, it int64) {
	start := stepStart(it)
	tid := traceID(sh, r.rank, it)
	step := spanID(kindStep, r.rank, it, 0)
	children := []struct {
		name     string
		from, to time.Duration
	}{
		{"megatron.forward_backward", 10 * time.Millisecond, 600 * time.Millisecond},
		{"megatron.grad_sync.finish", 600 * time.Millisecond, 800 * time.Millisecond},
		{"megatron.optimizer_step", 800 * time.Millisecond, 890 * time.Millisecond},
	}
	for i, c := range children {
		setSpan(dst.AppendEmpty(), c.name, tid, spanID(kindStep, r.rank, it, byte(i+1)), step, start.Add(c.from), start.Add(c.to))
	}
}

func appendStepSpan(dst ptrace.SpanSlice, sh shape, r rankProc, it int64) {
	start := stepStart(it)
	parent := trainSpanID(r.rank)
	if sh.stepRoot {
		parent = pcommon.SpanID{}
	}
	s := dst.AppendEmpty()
	setSpan(s, sh.stepName, traceID(sh, r.rank, it), spanID(kindStep, r.rank, it, 0), parent, start, start.Add(900*time.Millisecond))
	if r.asString {
		s.Attributes().PutStr("megatron.iteration", fmt.Sprint(it))
	} else {
		s.Attributes().PutInt("megatron.iteration", it)
	}
}

func appendStep(dst ptrace.SpanSlice, sh shape, r rankProc, it int64) {
	appendStepChildren(dst, sh, r, it)
	appendStepSpan(dst, sh, r, it)
}

// appendModelInit appends megatron.model_init, a child of the job span
// that ends before the first step starts.
func appendModelInit(dst ptrace.SpanSlice, sh shape, r rankProc) {
	setSpan(dst.AppendEmpty(), "megatron.model_init", traceID(sh, r.rank, -1), spanID(kindJob, r.rank, 0, 2), spanID(kindJob, r.rank, 0, 0),
		t0.Add(time.Second), t0.Add(4*time.Second))
}

// appendCheckpoint appends megatron.save_checkpoint, between step it and
// the next.
func appendCheckpoint(dst ptrace.SpanSlice, sh shape, r rankProc, it int64) {
	end := stepStart(it).Add(900 * time.Millisecond)
	setSpan(dst.AppendEmpty(), "megatron.save_checkpoint", traceID(sh, r.rank, -1), spanID(kindJob, r.rank, it, 3), trainSpanID(r.rank),
		end.Add(20*time.Millisecond), end.Add(80*time.Millisecond))
}

// appendJobEnd appends megatron.train and the root megatron.pretrain, which
// end, and so are exported, last.
func appendJobEnd(dst ptrace.SpanSlice, sh shape, r rankProc) {
	tid := traceID(sh, r.rank, -1)
	setSpan(dst.AppendEmpty(), "megatron.train", tid, trainSpanID(r.rank), spanID(kindJob, r.rank, 0, 0), t0.Add(5*time.Second), t0.Add(time.Hour))
	setSpan(dst.AppendEmpty(), "megatron.pretrain", tid, spanID(kindJob, r.rank, 0, 0), pcommon.SpanID{}, t0, t0.Add(time.Hour))
}

// resourceFor appends a resource for the rank to td and returns its spans.
func resourceFor(td ptrace.Traces, r rankProc) ptrace.SpanSlice {
	rs := td.ResourceSpans().AppendEmpty()
	r.fill(rs.Resource().Attributes())
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName("nemo_lens")
	return ss.Spans()
}

// training emulates a run: a batch per iteration with every rank's step,
// model_init first, a checkpoint after iteration 19, the job spans last.
// edit, when set, may change a rank's step spans (spans from index from on)
// before they are sent.
func training(sh shape, ranks []rankProc, iterations int64, edit func(r rankProc, it int64, spans ptrace.SpanSlice, from int)) []ptrace.Traces {
	var out []ptrace.Traces
	for it := range iterations {
		td := ptrace.NewTraces()
		for _, r := range ranks {
			spans := resourceFor(td, r)
			if it == 0 {
				appendModelInit(spans, sh, r)
			}
			from := spans.Len()
			appendStep(spans, sh, r, it)
			if edit != nil {
				edit(r, it, spans, from)
			}
			if it == 19 {
				appendCheckpoint(spans, sh, r, it)
			}
			if it == iterations-1 {
				appendJobEnd(spans, sh, r)
			}
		}
		out = append(out, td)
	}
	return out
}

// seenSpan is an output span, read back from its id.
type seenSpan struct {
	kind      byte
	rank, it  int64
	idx       byte
	name      string
	reason    string
	hasReason bool
	attrs     int
}

func collect(sink *consumertest.TracesSink) []seenSpan {
	var out []seenSpan
	for _, td := range sink.AllTraces() {
		rss := td.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			sss := rss.At(i).ScopeSpans()
			for j := 0; j < sss.Len(); j++ {
				spans := sss.At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					s := spans.At(k)
					id := s.SpanID()
					seen := seenSpan{
						kind: id[0], rank: int64(binary.BigEndian.Uint16(id[1:3])), it: int64(binary.BigEndian.Uint16(id[3:5])),
						idx: id[5], name: s.Name(), attrs: s.Attributes().Len(),
					}
					if v, ok := s.Attributes().Get(attrkey.KeptReason); ok {
						seen.reason, seen.hasReason = v.Str(), true
					}
					out = append(out, seen)
				}
			}
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
		if s.kind != kindStep {
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
		if s.kind == kindJob {
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

func (h *harness) heldSpans() int {
	h.p.mu.Lock()
	defer h.p.mu.Unlock()
	return h.p.held.count
}

func sampledConfig(rate float64) *Config {
	cfg := createDefaultConfig().(*Config)
	cfg.SampleRate = rate
	return cfg
}

// requireSameTraces fails unless got is want, exactly: same resources,
// scopes, spans and attributes, in the same order.
func requireSameTraces(t *testing.T, want, got ptrace.Traces) {
	t.Helper()
	var m ptrace.JSONMarshaler
	w, err := m.MarshalTraces(want)
	require.NoError(t, err)
	g, err := m.MarshalTraces(got)
	require.NoError(t, err)
	require.JSONEq(t, string(w), string(g))
}
