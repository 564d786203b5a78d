// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package lensemu

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/otlpsink"
)

// stepSpan is one span of a rank's step as the backend received it.
type stepSpan struct {
	rank, iteration int64
	name            string
	start, end      time.Time
	trace           [16]byte
	root            bool
}

// runAgainstSink runs ranks (traces only) against a fake OTLP/HTTP
// backend and returns it with what it acknowledged of each rank.
func runAgainstSink(t *testing.T, ranks []Rank) (*otlpsink.Sink, []Result) {
	t.Helper()
	sink, err := otlpsink.Start(nil)
	require.NoError(t, err)
	t.Cleanup(func() { _ = sink.Close() })
	for i := range ranks {
		ranks[i].Endpoint = strings.TrimPrefix(sink.URL, "http://")
		ranks[i].Protocol = HTTP
		ranks[i].NoMetrics, ranks[i].NoLogs = true, true
	}
	results, err := Job(t.Context(), ranks)
	require.NoError(t, err)
	return sink, results
}

// sendJob runs ranks against a fake backend, checks that every rank sent
// its whole job, and returns the step spans and their direct children by
// rank and iteration, keyed by name.
func sendJob(t *testing.T, ranks []Rank) map[[2]int64]map[string]stepSpan {
	t.Helper()
	sink, results := runAgainstSink(t, ranks)

	steps := map[[2]int64]map[string]stepSpan{}
	iterOf := map[[2]any]int64{} // (rank, step span id) -> iteration
	var children []struct {
		rank   int64
		parent [8]byte
		s      stepSpan
	}
	received := 0
	for _, req := range sink.Requests() {
		if req.Signal != otlpsink.Traces {
			continue
		}
		received += req.Traces.SpanCount()
		for i := 0; i < req.Traces.ResourceSpans().Len(); i++ {
			rs := req.Traces.ResourceSpans().At(i)
			rv, _ := rs.Resource().Attributes().Get(attrkey.DLRank)
			rank := rv.Int()
			forEachSpan(rs, func(s ptrace.Span) {
				ss := stepSpan{
					rank: rank, name: s.Name(), start: s.StartTimestamp().AsTime(), end: s.EndTimestamp().AsTime(),
					trace: s.TraceID(), root: s.ParentSpanID().IsEmpty(),
				}
				if _, isStep := s.Attributes().Get("megatron.num_microbatches"); isStep {
					it, _ := s.Attributes().Get(attrkey.MegatronIteration)
					ss.iteration = it.Int()
					iterOf[[2]any{rank, [8]byte(s.SpanID())}] = it.Int()
					put(steps, ss)
					return
				}
				children = append(children, struct {
					rank   int64
					parent [8]byte
					s      stepSpan
				}{rank, [8]byte(s.ParentSpanID()), ss})
			})
		}
	}
	for _, c := range children {
		if it, ok := iterOf[[2]any{c.rank, c.parent}]; ok {
			c.s.iteration = it
			put(steps, c.s)
		}
	}
	assert.Equal(t, Sum(results).Spans, int64(received), "every acknowledged span arrived")
	want := 0
	for i := range ranks {
		want += JobSpans + ranks[i].Steps*SpansPerStep(2)
	}
	assert.Equal(t, want, received, "span counts per step are unchanged")
	return steps
}

func put(steps map[[2]int64]map[string]stepSpan, s stepSpan) {
	k := [2]int64{s.rank, s.iteration}
	if steps[k] == nil {
		steps[k] = map[string]stepSpan{}
	}
	steps[k][s.name] = s
}

func forEachSpan(rs ptrace.ResourceSpans, f func(ptrace.Span)) {
	for i := 0; i < rs.ScopeSpans().Len(); i++ {
		spans := rs.ScopeSpans().At(i).Spans()
		for j := 0; j < spans.Len(); j++ {
			f(spans.At(j))
		}
	}
}

func job(worldSize int, edit func(r *Rank)) []Rank {
	ranks := make([]Rank, worldSize)
	for i := range ranks {
		ranks[i] = Rank{RunID: "run-sync", Rank: i, WorldSize: worldSize, LocalRank: i % 8, Steps: 3}
		if edit != nil {
			edit(&ranks[i])
		}
	}
	return ranks
}

func dur(s stepSpan) time.Duration { return s.end.Sub(s.start) }

// In a synchronous job every rank's step starts and ends together; the slow
// rank's forward_backward is longer and every other rank waits the
// difference in grad_sync.finish.
func TestJobIsSynchronous(t *testing.T) {
	const slowRank = 2
	ranks := job(4, func(r *Rank) {
		if r.Rank == slowRank {
			r.ComputeDuration = func(it int) time.Duration {
				if it == 2 {
					return 3 * DefaultComputeDuration
				}
				return DefaultComputeDuration
			}
		}
	})
	steps := sendJob(t, ranks)
	require.Len(t, steps, 4*3)
	for it := int64(1); it <= 3; it++ {
		ref := steps[[2]int64{0, it}][attrkey.MegatronTrainStep]
		wantStep := 100 * time.Millisecond
		if it == 2 {
			wantStep = 3*DefaultComputeDuration + GradSyncTime + OptimizerTime
		}
		assert.Equal(t, wantStep, dur(ref), "iteration %d", it)
		for rank := range int64(4) {
			s := steps[[2]int64{rank, it}]
			assert.Equal(t, ref.start, s[attrkey.MegatronTrainStep].start, "steps start together")
			assert.Equal(t, ref.end, s[attrkey.MegatronTrainStep].end, "steps end together")
			compute, wait := DefaultComputeDuration, 10*time.Millisecond
			if it == 2 {
				if rank == slowRank {
					compute = 3 * DefaultComputeDuration
				} else {
					wait += 2 * DefaultComputeDuration
				}
			}
			assert.Equal(t, compute, dur(s[lensfixture.ForwardBackward]), "rank %d iteration %d", rank, it)
			assert.Equal(t, wait, dur(s[lensfixture.GradSyncFinish]), "rank %d iteration %d", rank, it)
			assert.Equal(t, 5*time.Millisecond, dur(s[lensfixture.GradSyncStart]))
			assert.Equal(t, OptimizerTime, dur(s[lensfixture.Optimizer]))
			assert.Equal(t, ref.end, s[lensfixture.Optimizer].end)
		}
	}
}

// Unsynchronised ranks keep their own step durations.
func TestJobUnsynchronised(t *testing.T) {
	ranks := job(2, func(r *Rank) {
		r.Unsynchronised = true
		if r.Rank == 1 {
			r.StepDuration = func(int) time.Duration { return 200 * time.Millisecond }
		}
	})
	steps := sendJob(t, ranks)
	assert.Equal(t, 100*time.Millisecond, dur(steps[[2]int64{0, 1}][attrkey.MegatronTrainStep]))
	assert.Equal(t, 200*time.Millisecond, dur(steps[[2]int64{1, 1}][attrkey.MegatronTrainStep]))
	assert.Equal(t, 140*time.Millisecond, dur(steps[[2]int64{1, 1}][lensfixture.ForwardBackward]))
}

func TestTimingFieldsMustAgree(t *testing.T) {
	_, err := Rank{StepDuration: func(int) time.Duration { return time.Second }}.Run(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "set Unsynchronised, or set ComputeDuration")
	_, err = Rank{Unsynchronised: true, ComputeDuration: func(int) time.Duration { return time.Second }}.Run(t.Context())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "an Unsynchronised rank's step lasts StepDuration")
}

// The newer taxonomy's step span name, and steps as their own trace roots.
func TestStepSpanNameAndRoots(t *testing.T) {
	ranks := job(2, func(r *Rank) {
		r.StepSpanName = attrkey.MegatronTrainIteration
		r.StepsAreRoots = true
	})
	steps := sendJob(t, ranks)
	traces := map[[16]byte]bool{}
	for it := int64(1); it <= 3; it++ {
		s, ok := steps[[2]int64{0, it}][attrkey.MegatronTrainIteration]
		require.True(t, ok, "iteration %d", it)
		assert.True(t, s.root, "a trace root")
		traces[s.trace] = true
		assert.Equal(t, s.trace, steps[[2]int64{0, it}][lensfixture.ForwardBackward].trace, "children share the step's trace")
	}
	assert.Len(t, traces, 3, "one trace per step")
}

// The resource is the fixture's rank identity with the launcher's local rank
// and the world size as given (0 too), and Resource's keys win.
func TestResourceAttributes(t *testing.T) {
	asMap := func(r Rank) map[string]any {
		m := map[string]any{}
		for _, kv := range r.ResourceAttributes() {
			m[string(kv.Key)] = kv.Value.AsInterface()
		}
		return m
	}
	assert.Equal(t, map[string]any{
		"service.name": "nemo", "service.instance.id": "run-a-rank9", "nemo.run.id": "run-a",
		"nv.dl.rank": int64(9), "nv.dl.world_size": int64(16), "nv.dl.local_rank": int64(3),
		"host.name": "node001", "process.pid": int64(10009), "slurm.job.id": "42",
	}, asMap(Rank{RunID: "run-a", Rank: 9, WorldSize: 16, LocalRank: 3, Resource: []attribute.KeyValue{attribute.String("slurm.job.id", "42")}}))
	assert.Equal(t, map[string]any{
		"service.name": "svc", "service.instance.id": "norun-rank3",
		"dl.rank": "3", "dl.local_rank": "0", "host.name": "gpu-box", "process.pid": int64(10003),
	}, asMap(Rank{ServiceName: "svc", Rank: 3, LegacyKeys: true, RankAsString: true, NoWorldSize: true, Resource: []attribute.KeyValue{attribute.String("host.name", "gpu-box")}}))
	assert.Equal(t, int64(0), asMap(Rank{Rank: 1})["nv.dl.world_size"])
}

// spanNames counts the span names each rank's collector received.
func spanNames(t *testing.T, ranks []Rank) map[int64]map[string]int {
	t.Helper()
	sink, _ := runAgainstSink(t, ranks)
	names := map[int64]map[string]int{}
	for _, req := range sink.Requests() {
		if req.Signal != otlpsink.Traces {
			continue
		}
		for _, rs := range req.Traces.ResourceSpans().All() {
			v, _ := rs.Resource().Attributes().Get(attrkey.DLRank)
			rank := v.Int()
			if names[rank] == nil {
				names[rank] = map[string]int{}
			}
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					names[rank][s.Name()]++
				}
			}
		}
	}
	return names
}

// A hang as a synchronous job has it: at iteration 3 rank 1 stops in its
// forward, rank 2's process is gone, and the others finish their compute
// and block in the gradient all-reduce. What ended is exported; the open
// spans (the blocked ranks' grad_sync.finish, optimizer and step, the job
// spans) never are.
func TestHang(t *testing.T) {
	ranks := make([]Rank, 4)
	for i := range ranks {
		ranks[i] = Rank{RunID: "run-hang", Rank: i, WorldSize: 4, Steps: 5, HangAt: 3}
	}
	ranks[1].HangRole, ranks[2].HangRole = Stopped, Dead
	names := spanNames(t, ranks)
	const done = 2 // iterations completed before the hang, 2 micro-batches each
	for rank, want := range map[int64]map[string]int{
		0: {attrkey.MegatronTrainStep: done, lensfixture.ForwardBackward: done + 1, lensfixture.MicrobatchBack: 2 * (done + 1), lensfixture.GradSyncStart: done + 1, lensfixture.GradSyncFinish: done, lensfixture.Optimizer: done},
		1: {attrkey.MegatronTrainStep: done, lensfixture.ForwardBackward: done, lensfixture.MicrobatchForward: 2*done + 1, lensfixture.MicrobatchBack: 2 * done, lensfixture.GradSyncStart: done},
		2: {attrkey.MegatronTrainStep: done, lensfixture.ForwardBackward: done, lensfixture.MicrobatchForward: 2 * done, lensfixture.GradSyncStart: done},
	} {
		for name, n := range want {
			assert.Equal(t, n, names[rank][name], "rank %d: %s", rank, name)
		}
		assert.Zero(t, names[rank][lensfixture.Train], "rank %d's job span ended", rank)
		assert.Zero(t, names[rank][lensfixture.Pretrain], "rank %d's job span ended", rank)
	}
	assert.Equal(t, names[0], names[3], "the blocked ranks send alike")
}

// An even pause: every rank stops for the same time before one iteration
// and then goes on; nothing is lost.
func TestPause(t *testing.T) {
	ranks := make([]Rank, 2)
	for i := range ranks {
		ranks[i] = Rank{RunID: "run-pause", Rank: i, WorldSize: 2, Steps: 3, PauseBefore: 2, Pause: 300 * time.Millisecond}
	}
	start := time.Now()
	names := spanNames(t, ranks)
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	for rank := range int64(2) {
		assert.Equal(t, 3, names[rank][attrkey.MegatronTrainStep])
		assert.Equal(t, 1, names[rank][lensfixture.Pretrain])
	}
}

// memBarrier is NewBarrier(world) that fails at iteration failAt, as a
// rank told to stop in the all-reduce.
func memBarrier(world, failAt int) func(context.Context, int) error {
	barrier := NewBarrier(world)
	return func(ctx context.Context, it int) error {
		if it == failAt {
			return errors.New("stopped")
		}
		return barrier(ctx, it)
	}
}

// With a Barrier the ranks train in real time and wait for each other for
// real: the slow rank's longer compute shows as the others' longer
// grad_sync.finish, measured, and the steps end together.
func TestBarrierWaitsForTheSlowestRank(t *testing.T) {
	barrier := memBarrier(2, 0)
	ranks := job(2, func(r *Rank) {
		r.Barrier = barrier
		if r.Rank == 1 {
			r.ComputeDuration = func(it int) time.Duration { return time.Duration(1+2*btoi(it == 2)) * DefaultComputeDuration }
		}
	})
	steps := sendJob(t, ranks)
	fast, slow := steps[[2]int64{0, 2}], steps[[2]int64{1, 2}]
	assert.Equal(t, DefaultComputeDuration, dur(fast[lensfixture.ForwardBackward]))
	assert.Equal(t, 3*DefaultComputeDuration, dur(slow[lensfixture.ForwardBackward]))
	// The fast rank waited at least the difference of the computes.
	assert.GreaterOrEqual(t, dur(fast[lensfixture.GradSyncFinish]), 2*DefaultComputeDuration)
	assert.Less(t, dur(slow[lensfixture.GradSyncFinish]), dur(fast[lensfixture.GradSyncFinish]))
	// Both leave the all-reduce when the slow rank arrives: the steps end
	// within the barrier's reaction of each other, not a compute apart.
	gap := fast[attrkey.MegatronTrainStep].end.Sub(slow[attrkey.MegatronTrainStep].end).Abs()
	assert.Less(t, gap, DefaultComputeDuration, "the steps end together")
}

// A Barrier that fails (the rank was stopped in the all-reduce) leaves the
// rank hung there: it ended its compute and grad_sync.start, nothing after.
func TestBarrierStopped(t *testing.T) {
	ranks := job(1, func(r *Rank) { r.Barrier = memBarrier(1, 2) })
	names := spanNames(t, ranks)
	assert.Equal(t, 1, names[0][attrkey.MegatronTrainStep])
	assert.Equal(t, 2, names[0][lensfixture.GradSyncStart])
	assert.Equal(t, 1, names[0][lensfixture.GradSyncFinish])
	assert.Zero(t, names[0][lensfixture.Train], "the job span ended")
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// Repeated even pauses in real time (a checkpoint every 2 iterations):
// every rank finishes the iteration, nothing of the next starts for the
// pause, then the ranks train on together.
func TestRepeatedPausesInRealTime(t *testing.T) {
	const pause = 300 * time.Millisecond
	barrier := NewBarrier(2)
	ranks := job(2, func(r *Rank) {
		r.Steps, r.PauseBefore, r.PauseEvery, r.Pause, r.Barrier = 5, 2, 2, pause, barrier
	})
	assert.Equal(t, []bool{false, true, false, true, false}, []bool{
		ranks[0].PausesBefore(1), ranks[0].PausesBefore(2), ranks[0].PausesBefore(3), ranks[0].PausesBefore(4), ranks[0].PausesBefore(5),
	})
	steps := sendJob(t, ranks)
	for rank := range int64(2) {
		for it := int64(2); it <= 5; it++ {
			prev, cur := steps[[2]int64{rank, it - 1}][attrkey.MegatronTrainStep], steps[[2]int64{rank, it}][attrkey.MegatronTrainStep]
			gap := cur.start.Sub(prev.end)
			if it%2 == 0 {
				assert.GreaterOrEqual(t, gap, pause, "rank %d pauses before iteration %d", rank, it)
			} else {
				assert.Less(t, gap, pause, "rank %d trains on into iteration %d", rank, it)
			}
		}
	}
	gap := steps[[2]int64{0, 5}][attrkey.MegatronTrainStep].end.Sub(steps[[2]int64{1, 5}][attrkey.MegatronTrainStep].end).Abs()
	assert.Less(t, gap, DefaultComputeDuration, "the steps end together after the pauses")
}

// TestProducedCountsWhatNoCollectorTook: a rank at SDKDefaults whose
// collector is gone records every span it ended in Produced, none in its
// result: Produced is what the job made, not what was acknowledged. (Over
// OTLP/HTTP, which does not retry a refused connection, so the test is
// quick.) StepEvery paces it in real time.
func TestProducedCountsWhatNoCollectorTook(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close()) // nothing listens there now
	produced := NewAckLog()
	r := Rank{
		Endpoint: addr, Protocol: HTTP, RunID: "run-gone", WorldSize: 1, Steps: 3,
		NoMetrics: true, NoLogs: true, SDKDefaults: true, Produced: produced, StepEvery: 50 * time.Millisecond,
	}
	start := time.Now()
	res, err := r.Run(t.Context())
	require.Error(t, err, "no collector: the export fails")
	assert.Zero(t, res.Spans)
	assert.Len(t, produced.IDs(), JobSpans+3*SpansPerStep(2), "every span the rank ended")
	assert.GreaterOrEqual(t, time.Since(start), 100*time.Millisecond, "three steps 50 ms apart")
}
