// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package steps

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
	"github.com/nemo-lens/otelcol-nemo/internal/stepsummary"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/clocktest"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
)

// recorder is a holder that writes down what the engine tells it: every
// span placed and resolved as "rank/name kind iteration" (and whether it
// was held), every decision.
type recorder struct {
	Base[int]
	// mode is how consume walks: Walk (""), "watch" or "hold".
	mode      string
	placed    []string
	held      int
	decisions []*Decision[int]
	ticks     int
	stats     Stats
}

func (r *recorder) Placed(res *Resource, s SpanRef, at Placement[int]) {
	r.placed = append(r.placed, describe(res.Rank.Rank, s.Span.Name(), at))
	if s.Held.IsHeld() {
		r.held++
	}
}

func (r *recorder) Resolved(rank Rank, h Held, at Placement[int]) {
	r.placed = append(r.placed, describe(rank.Rank, h.Span().Name(), at)+" (waited)")
	if h.IsHeld() {
		r.held++
	}
}

func (r *recorder) Decided(d *Decision[int]) {
	cp := *d
	cp.Ranks = slices.Clone(d.Ranks)
	*d.Value++ // counts the step's decisions
	r.decisions = append(r.decisions, &cp)
}

func (r *recorder) Tick(time.Time, bool) { r.ticks++ }

func (r *recorder) Send(st *Stats, _ bool) error {
	for i, v := range st.Skipped {
		r.stats.Skipped[i] += v
	}
	for i, v := range st.Decided {
		r.stats.Decided[i] += v
	}
	for i, v := range st.Expired {
		r.stats.Expired[i] += v
	}
	r.stats.RanksMissing += st.RanksMissing
	r.stats.Waiting += st.Waiting
	return nil
}

var kindNames = map[Kind]string{KindStep: "step", KindCompute: "compute", KindWait: "wait", KindOutside: "outside", KindExpired: "expired"}

func describe(rank int64, name string, at Placement[int]) string {
	s := fmt.Sprintf("%d/%s %s", rank, name, kindNames[at.Kind])
	if at.InStep() {
		s += fmt.Sprintf(" %d", at.Iteration)
	}
	return s
}

// testEngine is an engine of rec on a fake clock, scoring steps.
func testEngine(t *testing.T, rec *recorder, edit func(*Config)) (*Engine[int], *clocktest.Fake) {
	t.Helper()
	cfg := Config{Spans: DefaultSpans(), WaitSpans: DefaultWaitSpans(), Waits: DefaultWaits(), Scores: true, History: DefaultHistory}
	if edit != nil {
		edit(&cfg)
	}
	clk := clocktest.NewFake()
	e, err := New(cfg, rec, clk, zap.NewNop())
	require.NoError(t, err)
	e.Start(time.Second)
	t.Cleanup(func() { require.NoError(t, e.Shutdown()) })
	return e, clk
}

// reader reads the ranks of every test: one seed, so that one run is one
// group from batch to batch.
var reader = func() *Reader {
	k := DefaultKeys()
	return NewReader(k.RankKeys, k.WorldSizeKeys, k.GroupKeys)
}()

// consume walks every resource of td, kept as rec says.
func consume(t *testing.T, e *Engine[int], rec *recorder, td ptrace.Traces) {
	t.Helper()
	st, ok := e.Consume(func(b *Batch[int]) {
		for _, rs := range td.ResourceSpans().All() {
			id, status := reader.Read(rs.Resource().Attributes())
			require.Equal(t, rankattr.Valid, status)
			switch rec.mode {
			case "watch":
				b.Watch(rs, id)
			case "hold":
				b.Hold(rs, id, nil)
			default:
				b.Walk(rs, id)
			}
		}
	})
	require.True(t, ok)
	require.NoError(t, rec.Send(&st, false))
}

// job is a synchronous job of world ranks in shape: every rank computes
// 100ms, rank 1 300ms on iteration 2, and the others wait for it.
func job(shape lensfixture.Shape, world int64) lensfixture.Run {
	return lensfixture.Run{
		Ranks: lensfixture.Fleet(lensfixture.Rank{Run: "engine", WorldSize: world}),
		Shape: shape,
		Step:  lensfixture.Step{GradSync: 20 * time.Millisecond, Optimizer: 30 * time.Millisecond, MicroBatches: 1},
		Compute: func(rank, iteration int64) time.Duration {
			if rank == 1 && iteration == 2 {
				return 300 * time.Millisecond
			}
			return 100 * time.Millisecond
		},
	}
}

// Every span of a kept resource is placed once, in its rank's step (the
// step span, compute, wait) or outside: a step's spans come before its step
// span in the batch and are placed after it. In the four shapes.
func TestEnginePlacesEverySpanInItsStep(t *testing.T) {
	for _, shape := range lensfixture.Shapes {
		t.Run(shape.String(), func(t *testing.T) {
			rec := &recorder{mode: "watch"}
			e, _ := testEngine(t, rec, nil)
			run := job(shape, 1)
			td := ptrace.NewTraces()
			spans := lensfixture.AppendResource(td, run.Ranks[0])
			run.AppendModelInit(spans, run.Ranks[0])
			run.AppendStep(spans, run.Ranks[0], 1)
			consume(t, e, rec, td)
			assert.Zero(t, e.counts.Waiting)
			assert.Zero(t, rec.held, "nothing waits: the resource stays in its batch")
			assert.Equal(t, run.StepOf(0, 1).Spans()+1, td.SpanCount())
			kinds := map[string]int{}
			for _, p := range rec.placed {
				kinds[strings.SplitN(p, " ", 2)[1]]++
			}
			step := run.StepOf(0, 1)
			assert.Equal(t, 1, kinds["step 1"])
			assert.Equal(t, 2, kinds["wait 1"], "grad_sync.start and .finish")
			assert.Equal(t, step.Spans()-3, kinds["compute 1"])
			assert.Equal(t, 1, kinds["outside"], "model_init, before the first step")
			assert.Len(t, rec.placed, step.Spans()+1)
		})
	}
}

// Spans whose step span comes in a later batch wait for it, held by the
// engine, then Resolved in their step; the waits count in the rank's busy
// time.
func TestEngineSpansWaitForTheirStepSpan(t *testing.T) {
	rec := &recorder{mode: "watch"}
	e, clk := testEngine(t, rec, nil)
	run := job(lensfixture.Shapes[0], 1)
	rank := run.Ranks[0]
	children, stepSpan := ptrace.NewTraces(), ptrace.NewTraces()
	run.AppendStepPart(lensfixture.AppendResource(children, rank), rank, 1, lensfixture.StepChildren)
	run.AppendStepPart(lensfixture.AppendResource(stepSpan, rank), rank, 1, lensfixture.StepSpan)
	consume(t, e, rec, children)
	n := run.StepOf(0, 1).Spans() - 1
	assert.Equal(t, n, e.counts.Waiting, "every child waits")
	assert.Equal(t, int64(n), rec.stats.Waiting, "held by the engine")
	assert.Empty(t, rec.placed)
	assert.Zero(t, children.SpanCount(), "the resource left its batch, held")
	consume(t, e, rec, stepSpan)
	assert.Len(t, rec.placed, n+1)
	assert.Equal(t, n, rec.held, "the children, held; the step span stays in its batch")
	assert.Zero(t, rec.stats.Waiting)
	assert.Contains(t, rec.placed, "0/megatron.grad_sync.finish wait 1 (waited)")
	clk.Advance(time.Second)
	require.Len(t, rec.decisions, 1, "one rank of a world of one: complete")
	d := rec.decisions[0]
	assert.Equal(t, Complete, d.Cause)
	assert.Equal(t, run.StepOf(0, 1).Busy().Nanoseconds(), d.Ranks[0].Score.Busy, "the waits that waited count")
}

// A synchronous step of four ranks is decided at the tick after its last
// rank reported; busy time tells the slow rank (the others wait for it in
// grad sync), and the relative score is the fastest over the rank's.
func TestEngineScoresOnBusyTime(t *testing.T) {
	rec := &recorder{}
	e, clk := testEngine(t, rec, nil)
	run := job(lensfixture.Shapes[2], 4)
	consume(t, e, rec, run.Iteration(1))
	consume(t, e, rec, run.Iteration(2))
	clk.Advance(time.Second)
	require.Len(t, rec.decisions, 2)
	d := rec.decisions[1]
	assert.Equal(t, int64(2), d.Step.Iteration)
	require.Len(t, d.Ranks, 4)
	fast, slow := run.StepOf(0, 2).Busy(), run.StepOf(1, 2).Busy()
	assert.Equal(t, fast.Nanoseconds(), d.Fastest)
	for _, r := range d.Ranks {
		assert.Equal(t, run.StepOf(0, 2).Duration().Nanoseconds(), r.End-r.Start, "every step span lasts as long")
	}
	assert.InDelta(t, float64(fast)/float64(slow), d.Ranks[1].Score.Relative, 1e-9)
	assert.InDelta(t, float64(fast)/float64(slow), d.Ranks[1].Score.Individual, 1e-9, "its own iteration 1 was fast")
	assert.Equal(t, 1.0, d.Ranks[0].Score.Relative)
	assert.Zero(t, rec.stats.RanksMissing)
	assert.Equal(t, int64(2), rec.stats.Decided[Complete])
}

// A step a rank never reports is decided decision_wait after its first
// step span, the rank counted missing; when its step span comes late it
// reopens the step until the next tick and is scored against the first
// decision's fastest; the listener's value follows.
func TestEngineLateRankReopensItsStep(t *testing.T) {
	rec := &recorder{}
	e, clk := testEngine(t, rec, nil)
	run := job(lensfixture.Shapes[0], 3)
	td := ptrace.NewTraces()
	for _, rank := range run.Ranks[:2] {
		run.AppendStep(lensfixture.AppendResource(td, rank), rank, 2)
	}
	consume(t, e, rec, td)
	clk.Advance(5 * time.Second)
	assert.Empty(t, rec.decisions, "incomplete, before decision_wait")
	clk.Advance(5 * time.Second)
	require.Len(t, rec.decisions, 1)
	assert.Equal(t, AtWait, rec.decisions[0].Cause)
	assert.Equal(t, int64(1), rec.decisions[0].Missing())

	late := ptrace.NewTraces()
	run.AppendStep(lensfixture.AppendResource(late, run.Ranks[2]), run.Ranks[2], 2)
	consume(t, e, rec, late)
	clk.Advance(time.Second)
	require.Len(t, rec.decisions, 2)
	d := rec.decisions[1]
	assert.True(t, d.Reopened)
	assert.Equal(t, int64(3), d.Reported)
	require.Len(t, d.Ranks, 1)
	assert.Equal(t, int64(2), d.Ranks[0].Score.Rank)
	assert.Equal(t, run.StepOf(0, 2).Busy().Nanoseconds(), d.Fastest, "the first decision's fastest")
	assert.Equal(t, 2, *d.Value, "the value of the first decision, decided twice")
	assert.Equal(t, int64(1), rec.stats.Decided[AtWait], "a reopened step is counted once")
}

// Spans whose step span never comes give up at span_wait (a wait span
// counted skipped), and a step span ending before it starts is skipped.
func TestEngineExpiresWhatWaitsTooLong(t *testing.T) {
	rec := &recorder{mode: "watch"}
	e, clk := testEngine(t, rec, func(c *Config) { c.Waits.SpanWait = 2 * time.Second })
	run := job(lensfixture.Shapes[0], 1)
	rank := run.Ranks[0]
	td := ptrace.NewTraces()
	run.AppendStepPart(lensfixture.AppendResource(td, rank), rank, 1, lensfixture.StepChildren)
	consume(t, e, rec, td)
	clk.Advance(time.Second)
	assert.Empty(t, rec.placed)
	clk.Advance(time.Second)
	n := run.StepOf(0, 1).Spans() - 1
	assert.Len(t, rec.placed, n)
	for _, p := range rec.placed {
		assert.Contains(t, p, " expired")
	}
	assert.Equal(t, int64(n), rec.stats.Expired[ExpiredWait])
	assert.Equal(t, int64(2), rec.stats.Skipped[SkipWaitExpired], "the two grad_sync spans")
}

// Over budget, the engine decides the oldest open step early, or gives up
// the resource that waited longest, until the budget is kept.
func TestEngineKeepsItsBudget(t *testing.T) {
	rec := &recorder{mode: "watch"}
	e, _ := testEngine(t, rec, func(c *Config) {
		c.OverBudget = func(n Counts) bool { return n.OpenRankSteps > 2 || n.Waiting > 10 }
	})
	run := job(lensfixture.Shapes[0], 8)
	for it := int64(1); it <= 2; it++ {
		td := ptrace.NewTraces()
		for _, rank := range run.Ranks[:2] {
			run.AppendStep(lensfixture.AppendResource(td, rank), rank, it)
		}
		consume(t, e, rec, td)
	}
	require.Len(t, rec.decisions, 1, "three rank steps open: the oldest step decided early")
	assert.Equal(t, Early, rec.decisions[0].Cause)
	assert.Equal(t, int64(1), rec.decisions[0].Step.Iteration)

	rec.placed = nil
	for _, rank := range run.Ranks[2:4] {
		td := ptrace.NewTraces()
		run.AppendStepPart(lensfixture.AppendResource(td, rank), rank, 3, lensfixture.StepChildren)
		consume(t, e, rec, td)
	}
	n := run.StepOf(0, 3).Spans() - 1
	require.Len(t, rec.placed, n, "the first resource to wait gave up, whole")
	for _, p := range rec.placed {
		assert.True(t, strings.HasPrefix(p, "2/") && strings.Contains(p, " expired"), p)
	}
	assert.Equal(t, int64(n), rec.stats.Expired[ExpiredBudget])
}

// Shutdown decides every open step, gives up every waiting span, ticks a
// last time; later batches are not walked.
func TestEngineShutdown(t *testing.T) {
	rec := &recorder{mode: "watch"}
	cfg := Config{Spans: DefaultSpans(), WaitSpans: DefaultWaitSpans(), Waits: DefaultWaits(), Scores: true, History: DefaultHistory}
	e, err := New(cfg, rec, clocktest.NewFake(), zap.NewNop())
	require.NoError(t, err)
	e.Start(time.Second)
	run := job(lensfixture.Shapes[0], 2)
	td := ptrace.NewTraces()
	run.AppendStep(lensfixture.AppendResource(td, run.Ranks[0]), run.Ranks[0], 1)
	run.AppendStepPart(lensfixture.AppendResource(td, run.Ranks[1]), run.Ranks[1], 2, lensfixture.StepChildren)
	consume(t, e, rec, td)
	require.NoError(t, e.Shutdown())
	require.Len(t, rec.decisions, 1)
	assert.Equal(t, AtShutdown, rec.decisions[0].Cause)
	assert.Equal(t, int64(run.StepOf(1, 2).Spans()-1), rec.stats.Expired[ExpiredShutdown])
	assert.Equal(t, 1, rec.ticks)
	_, ok := e.Consume(func(*Batch[int]) { t.Fatal("walked after shutdown") })
	assert.False(t, ok)
	require.NoError(t, e.Shutdown(), "a second Shutdown does nothing")
}

// A batch sent twice reports its step spans once.
func TestEngineStepSpanSentTwiceCountsOnce(t *testing.T) {
	rec := &recorder{}
	e, clk := testEngine(t, rec, nil)
	run := job(lensfixture.Shapes[0], 2)
	td := ptrace.NewTraces()
	run.AppendStep(lensfixture.AppendResource(td, run.Ranks[0]), run.Ranks[0], 1)
	consume(t, e, rec, td)
	consume(t, e, rec, td)
	clk.Advance(10 * time.Second)
	require.Len(t, rec.decisions, 1)
	assert.Len(t, rec.decisions[0].Ranks, 1)
}

// TakeWaiting hands a listener's Decided the spans a rank has waiting.
func TestEngineTakeWaiting(t *testing.T) {
	rec := &takeRecorder{}
	rec.mode = "watch"
	cfg := Config{Spans: DefaultSpans(), WaitSpans: DefaultWaitSpans(), Waits: DefaultWaits(), Scores: true, History: DefaultHistory}
	e, err := New(cfg, rec, clocktest.NewFake(), zap.NewNop())
	require.NoError(t, err)
	rec.e = e
	run := job(lensfixture.Shapes[0], 2)
	td := ptrace.NewTraces()
	run.AppendStep(lensfixture.AppendResource(td, run.Ranks[0]), run.Ranks[0], 1)
	run.AppendStepPart(lensfixture.AppendResource(td, run.Ranks[1]), run.Ranks[1], 1, lensfixture.StepChildren)
	consume(t, e, &rec.recorder, td)
	require.NoError(t, e.Shutdown())
	assert.Len(t, rec.taken, run.StepOf(1, 1).Spans()-1, "rank 1's spans, taken at the decision")
	assert.Zero(t, rec.stats.Expired[ExpiredShutdown], "nothing left to expire")
}

type takeRecorder struct {
	recorder
	e     *Engine[int]
	taken []string
}

func (r *takeRecorder) Decided(d *Decision[int]) {
	r.e.TakeWaiting(Rank{Group: d.Step.Group, Rank: 1}, func(h Held, _ int64) bool {
		r.taken = append(r.taken, h.Span().Name())
		h.Release()
		return true
	})
}

// summarize turns every resource of td into the summaries an agent would
// send of it: its step spans with their ranks' wait times (known here from
// the fixture), its spans outside the steps as envelopes.
func summarize(td ptrace.Traces, wait int64, version string) ptrace.Traces {
	out := ptrace.NewTraces()
	for _, rs := range td.ResourceSpans().All() {
		dst := out.ResourceSpans().AppendEmpty()
		rs.Resource().CopyTo(dst.Resource())
		summaries := stepsummary.NewScope(dst)
		dst.ScopeSpans().At(0).Scope().SetVersion(version)
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				if it, ok := s.Attributes().Get(attrkey.MegatronIteration); ok {
					stepsummary.WriteStep(summaries.AppendEmpty(), s, it.Int(), wait, 0)
				}
			}
		}
	}
	return out
}

// A rank summarized by an agent is decided and scored as if its spans had
// come; summaries of another contract version are refused, counted.
func TestSummariesAreStepsAndVersioned(t *testing.T) {
	run := lensfixture.Run{Ranks: lensfixture.Fleet(lensfixture.Rank{Run: "run-sum", WorldSize: 2})}
	wait := int64(lensfixture.DefaultStep.GradSync)
	for _, tc := range []struct {
		version   string
		decisions int
	}{{stepsummary.Version, 1}, {"2", 0}} {
		rec := &recorder{}
		e, clk := testEngine(t, rec, nil)
		consume(t, e, rec, summarize(run.Iteration(1), wait, tc.version))
		clk.Advance(time.Second)
		require.Len(t, rec.decisions, tc.decisions, "version %s", tc.version)
		if tc.decisions == 0 {
			assert.Equal(t, int64(2), rec.stats.Skipped[SkipSummaryVersion])
			continue
		}
		d := rec.decisions[0]
		assert.Equal(t, Complete, d.Cause)
		require.Len(t, d.Ranks, 2)
		for _, r := range d.Ranks {
			assert.Equal(t, int64(lensfixture.DefaultStep.Compute+lensfixture.DefaultStep.Optimizer), r.Score.Busy)
		}
	}
}

// observer is an Observer that writes down what the engine tells it.
type observer struct {
	seen      []string
	decisions int
}

func (o *observer) Resource(r *Resource) {
	o.seen = append(o.seen, fmt.Sprintf("resource %d", r.Rank.Rank))
}

func (o *observer) Arrived(r *Resource, s ptrace.Span, _ StepSpan) {
	o.seen = append(o.seen, fmt.Sprintf("%d/%s", r.Rank.Rank, s.Name()))
}

func (o *observer) Decided(*Decision[int]) { o.decisions++ }
func (*observer) Tick(time.Time, bool)     {}
func (*observer) Send(*Stats, bool) error  { return nil }

// An Observer is told of each resource once, before its spans, of every
// span in batch order, and of every step decided (at the tick after its
// last rank reported); it holds nothing. In the four shapes.
func TestObserverSeesEveryResourceAndSpan(t *testing.T) {
	for _, shape := range lensfixture.Shapes {
		t.Run(shape.String(), func(t *testing.T) {
			o := &observer{}
			cfg := Config{Spans: DefaultSpans(), WaitSpans: DefaultWaitSpans(), Waits: DefaultWaits(), Scores: true, History: DefaultHistory}
			clk := clocktest.NewFake()
			e, err := Observe[int](cfg, o, clk, zap.NewNop())
			require.NoError(t, err)
			e.Start(time.Second)
			run := job(shape, 2)
			td := run.Iteration(1)
			var want []string
			for _, rs := range td.ResourceSpans().All() {
				id, _ := reader.Read(rs.Resource().Attributes())
				want = append(want, fmt.Sprintf("resource %d", id.Rank.Rank))
				for _, ss := range rs.ScopeSpans().All() {
					for _, s := range ss.Spans().All() {
						want = append(want, fmt.Sprintf("%d/%s", id.Rank.Rank, s.Name()))
					}
				}
			}
			_, ok := e.Consume(func(b *Batch[int]) {
				for _, rs := range td.ResourceSpans().All() {
					id, _ := reader.Read(rs.Resource().Attributes())
					b.Walk(rs, id)
				}
			})
			require.True(t, ok)
			assert.Equal(t, want, o.seen)
			clk.Advance(time.Second)
			assert.Equal(t, 1, o.decisions, "both ranks reported: decided at the next tick")
			assert.Equal(t, 2, td.ResourceSpans().Len(), "nothing held")
			require.NoError(t, e.Shutdown())
		})
	}
}

// Hold moves the resource out of its batch and holds every span for the
// holder, but those notHeld says; a chunk whose spans were all let go while
// it was walked is freed at once.
func TestEngineHoldHoldsEverySpan(t *testing.T) {
	rec := &recorder{}
	e, _ := testEngine(t, rec, nil)
	run := job(lensfixture.Shapes[1], 1)
	td := ptrace.NewTraces()
	spans := lensfixture.AppendResource(td, run.Ranks[0])
	run.AppendModelInit(spans, run.Ranks[0])
	run.AppendStep(spans, run.Ranks[0], 1)
	n := td.SpanCount()
	isInit := func(s ptrace.Span) bool { return s.Name() == "megatron.model_init" }
	var c *Chunk
	var emptied bool
	_, ok := e.Consume(func(b *Batch[int]) {
		id, _ := reader.Read(td.ResourceSpans().At(0).Resource().Attributes())
		c, emptied = b.Hold(td.ResourceSpans().At(0), id, isInit)
	})
	require.True(t, ok)
	assert.Zero(t, td.SpanCount(), "moved out of its batch")
	assert.Equal(t, n, c.Len())
	assert.Len(t, rec.placed, n)
	assert.Equal(t, n-1, rec.held, "every span but model_init")
	assert.Equal(t, n-1, c.Held())
	assert.False(t, emptied)
}

// releaser lets every span go as soon as it is placed.
type releaser struct{ recorder }

func (*releaser) Placed(_ *Resource, s SpanRef, _ Placement[int]) { s.Held.Release() }

func TestEngineHoldFreesAChunkLetGoWhileWalked(t *testing.T) {
	rec := &releaser{}
	cfg := Config{Spans: DefaultSpans(), WaitSpans: DefaultWaitSpans(), Waits: DefaultWaits(), Scores: true, History: DefaultHistory}
	e, err := New(cfg, rec, clocktest.NewFake(), zap.NewNop())
	require.NoError(t, err)
	run := job(lensfixture.Shapes[1], 1)
	td := ptrace.NewTraces()
	run.AppendStep(lensfixture.AppendResource(td, run.Ranks[0]), run.Ranks[0], 1)
	var emptied bool
	_, ok := e.Consume(func(b *Batch[int]) {
		id, _ := reader.Read(td.ResourceSpans().At(0).Resource().Attributes())
		_, emptied = b.Hold(td.ResourceSpans().At(0), id, nil)
	})
	require.True(t, ok)
	assert.True(t, emptied)
	require.NoError(t, e.Shutdown())
}

// A new step makes room at once for the world its first rank reports, but
// a payload claiming a huge world gets no more than maxPresizedRanks: the
// step grows as its ranks come.
func TestEngineOpenStepRoomIsBounded(t *testing.T) {
	for _, shape := range lensfixture.Shapes {
		for _, world := range []int64{4, 1 << 40} {
			rec := &recorder{}
			e, _ := testEngine(t, rec, nil)
			run := job(shape, 2)
			run.Ranks[0].WorldSize = world
			td := ptrace.NewTraces()
			run.AppendStep(lensfixture.AppendResource(td, run.Ranks[0]), run.Ranks[0], 1)
			consume(t, e, rec, td)
			o := e.open.Oldest()
			require.NotNil(t, o, "%v, world %d: the step is open", shape, world)
			assert.Equal(t, min(world, maxPresizedRanks), int64(cap(o.Value.ranks)), "%v, world %d", shape, world)
			assert.Equal(t, world, o.WorldSize)
		}
	}
}
