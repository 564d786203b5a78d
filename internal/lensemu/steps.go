package lensemu // import "github.com/nemo-lens/otelcol-nemo/internal/lensemu"

import (
	"context"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// The fixed parts of a synchronous step, after the slowest rank's compute:
// the gradient all-reduce (5ms in grad_sync.start, 10ms in grad_sync.finish)
// and the optimizer.
const (
	GradSyncTime  = 15 * time.Millisecond
	OptimizerTime = 15 * time.Millisecond
	// DefaultComputeDuration makes a default step last 100ms.
	DefaultComputeDuration = 70 * time.Millisecond
	gradSyncStart          = 5 * time.Millisecond
	setupTime              = 2 * time.Second
)

// schedule is what the ranks of one run share in synchronous training: when
// the job started and every step's slowest compute.
type schedule struct {
	t0      time.Time
	slowest []time.Duration // by iteration - 1
}

// stepDuration is step it's wall duration on every rank.
func (s *schedule) stepDuration(it int) time.Duration {
	return s.slowest[it-1] + GradSyncTime + OptimizerTime
}

// newSchedule builds the schedule of ranks that train together.
func newSchedule(ranks []Rank) *schedule {
	s := &schedule{}
	for i := range ranks {
		r := ranks[i] // a copy: defaults() must not change the caller's ranks
		r.defaults()
		for it := 1; it <= r.Steps; it++ {
			if len(s.slowest) < it {
				s.slowest = append(s.slowest, 0)
			}
			s.slowest[it-1] = max(s.slowest[it-1], r.ComputeDuration(it))
		}
	}
	var total time.Duration
	for it := 1; it <= len(s.slowest); it++ {
		total += s.stepDuration(it)
	}
	s.t0 = time.Now().Add(-(total + 2*setupTime))
	return s
}

// timeline is when the rank's job started and how long each of its steps
// lasts.
func (r Rank) timeline() (time.Time, func(int) time.Duration) {
	if !r.Unsynchronised {
		return r.sched.t0, r.sched.stepDuration
	}
	var total time.Duration
	for i := 1; i <= r.Steps; i++ {
		total += r.StepDuration(i)
	}
	return time.Now().Add(-(total + 2*setupTime)), r.StepDuration
}

// emitStep emits one step subtree of a synchronous step:
// the rank computes for compute (megatron.forward_backward), starts the
// gradient all-reduce, waits in megatron.grad_sync.finish until the slowest
// rank has computed too and the all-reduce is done, then runs the optimizer.
// Children end (and so are exported) before their parents, as in a real job.
func (r Rank) emitStep(ctx context.Context, tracer trace.Tracer, it int, start time.Time, compute, slowest time.Duration) {
	at := start.Add
	ctx, step := r.startStep(ctx, tracer, it, start)
	r.emitForwardBackward(ctx, tracer, start, compute)
	syncEnd := slowest + GradSyncTime
	r.emitSpan(ctx, tracer, "megatron.grad_sync.start", at(compute), at(compute+gradSyncStart))
	r.emitSpan(ctx, tracer, "megatron.grad_sync.finish", at(compute+gradSyncStart), at(syncEnd))
	r.emitOptimizer(ctx, tracer, it, at(syncEnd), at(syncEnd+OptimizerTime))
	step.End(trace.WithTimestamp(at(syncEnd + OptimizerTime)))
}

// emitUnsynchronisedStep emits a step of d on the rank's own clock: compute
// 70%, gradient sync 15%, optimizer 15%.
func (r Rank) emitUnsynchronisedStep(ctx context.Context, tracer trace.Tracer, it int, start time.Time, d time.Duration) {
	ts := func(f float64) time.Time { return start.Add(time.Duration(f * float64(d))) }
	ctx, step := r.startStep(ctx, tracer, it, start)
	r.emitForwardBackward(ctx, tracer, start, time.Duration(0.7*float64(d)))
	r.emitSpan(ctx, tracer, "megatron.grad_sync.start", ts(0.7), ts(0.75))
	r.emitSpan(ctx, tracer, "megatron.grad_sync.finish", ts(0.75), ts(0.85))
	r.emitOptimizer(ctx, tracer, it, ts(0.85), ts(1))
	step.End(trace.WithTimestamp(ts(1)))
}

func (r Rank) startStep(ctx context.Context, tracer trace.Tracer, it int, start time.Time) (context.Context, trace.Span) {
	opts := []trace.SpanStartOption{trace.WithTimestamp(start)}
	if r.StepsAreRoots {
		opts = append(opts, trace.WithNewRoot())
	}
	return tracer.Start(ctx, r.StepSpanName, append(opts, trace.WithAttributes(
		attribute.Int("megatron.iteration", it),
		attribute.Int("megatron.num_microbatches", r.MicroBatches),
		attribute.Float64("megatron.loss", 10.0/float64(it+1)),
		attribute.Float64("megatron.grad_norm", 1.25),
		attribute.Bool("megatron.update_successful", it != r.ErrorAtIteration),
	))...)
}

// emitForwardBackward emits megatron.forward_backward lasting compute, with
// a forward (holding one layer span) and a backward per micro-batch.
func (r Rank) emitForwardBackward(ctx context.Context, tracer trace.Tracer, start time.Time, compute time.Duration) {
	ts := func(f float64) time.Time { return start.Add(time.Duration(f * float64(compute))) }
	fbCtx, fb := tracer.Start(ctx, "megatron.forward_backward", trace.WithTimestamp(start))
	per := 1 / float64(r.MicroBatches)
	for mb := 0; mb < r.MicroBatches; mb++ {
		base := float64(mb) * per
		mbAttr := trace.WithAttributes(attribute.Int("megatron.microbatch_id", mb))
		fwdCtx, fwd := tracer.Start(fbCtx, "megatron.microbatch.forward", trace.WithTimestamp(ts(base)), mbAttr)
		_, layer := tracer.Start(fwdCtx, "megatron.layer.forward", trace.WithTimestamp(ts(base)))
		layer.End(trace.WithTimestamp(ts(base + per*0.3)))
		fwd.End(trace.WithTimestamp(ts(base + per*0.4)))
		_, bwd := tracer.Start(fbCtx, "megatron.microbatch.backward", trace.WithTimestamp(ts(base+per*0.4)), mbAttr)
		bwd.End(trace.WithTimestamp(ts(base + per)))
	}
	fb.End(trace.WithTimestamp(ts(1)))
}

func (r Rank) emitOptimizer(ctx context.Context, tracer trace.Tracer, it int, from, to time.Time) {
	_, opt := tracer.Start(ctx, "megatron.optimizer_step", trace.WithTimestamp(from))
	if it == r.ErrorAtIteration {
		opt.SetStatus(codes.Error, "optimizer step failed")
	}
	opt.End(trace.WithTimestamp(to))
}

func (Rank) emitSpan(ctx context.Context, tracer trace.Tracer, name string, from, to time.Time) {
	_, s := tracer.Start(ctx, name, trace.WithTimestamp(from))
	s.End(trace.WithTimestamp(to))
}

// withSchedules returns a copy of ranks in which the synchronous ranks of
// each run share one schedule.
func withSchedules(ranks []Rank) []Rank {
	ranks = slices.Clone(ranks)
	byRun := map[string][]Rank{}
	for i := range ranks {
		if !ranks[i].Unsynchronised {
			byRun[ranks[i].RunID] = append(byRun[ranks[i].RunID], ranks[i])
		}
	}
	scheds := make(map[string]*schedule, len(byRun))
	for run, rs := range byRun {
		scheds[run] = newSchedule(rs)
	}
	for i := range ranks {
		if !ranks[i].Unsynchronised {
			ranks[i].sched = scheds[ranks[i].RunID]
		}
	}
	return ranks
}
