// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package lensemu // import "github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"

import (
	"context"
	"math"
	"slices"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
)

// The parts of a synchronous step, from the fixture's default step: the
// gradient all-reduce after the slowest rank's compute (its first third in
// grad_sync.start, the rest in grad_sync.finish) and the optimizer.
var (
	GradSyncTime  = lensfixture.DefaultStep.GradSync
	OptimizerTime = lensfixture.DefaultStep.Optimizer
	// DefaultComputeDuration makes a default step last 100ms.
	DefaultComputeDuration = lensfixture.DefaultStep.Compute
)

const setupTime = 2 * time.Second

// schedule is what the ranks of one run share in synchronous training: when
// the job started and every step's slowest compute.
type schedule struct {
	t0      time.Time
	slowest []time.Duration // by iteration - 1
}

// step is step it of a rank of the run that computes for compute.
func (s *schedule) step(it int, compute time.Duration, microBatches int) lensfixture.Step {
	step := lensfixture.DefaultStep
	step.Compute, step.Slowest, step.MicroBatches = compute, s.slowest[it-1], microBatches
	return step
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
		total += s.step(it, 0, 0).Duration()
	}
	s.t0 = time.Now().Add(-(total + 2*setupTime))
	if len(ranks) > 0 && !ranks[0].Start.IsZero() {
		s.t0 = ranks[0].Start
	}
	return s
}

// emitBetweenSteps emits what the rank does after iteration it, from
// cursor on: a checkpoint save, then an evaluation, as its SaveEvery and
// EvalEvery say. It returns where the next step starts.
func (r Rank) emitBetweenSteps(ctx context.Context, tracer trace.Tracer, it int, t0 time.Time, cursor time.Duration) time.Duration {
	for _, between := range []struct {
		every int
		d     time.Duration
		name  string
	}{{r.SaveEvery, r.SaveDuration, lensfixture.SaveCheckpoint}, {r.EvalEvery, r.EvalDuration, lensfixture.Evaluate}} {
		if between.every <= 0 || it%between.every != 0 {
			continue
		}
		_, span := tracer.Start(ctx, between.name, trace.WithTimestamp(t0.Add(cursor)))
		cursor += between.d
		span.End(trace.WithTimestamp(t0.Add(cursor)))
	}
	return cursor
}

// stepOf is the rank's step it. A synchronous rank computes for its own
// ComputeDuration and waits for the run's slowest; an Unsynchronised one
// has the default step's shares (70% compute, 15% gradient sync, 15%
// optimizer) of its StepDuration and waits for nobody.
func (r Rank) stepOf(it int) lensfixture.Step {
	if !r.Unsynchronised {
		return r.sched.step(it, r.ComputeDuration(it), r.MicroBatches)
	}
	d, def := r.StepDuration(it), lensfixture.DefaultStep
	share := func(part time.Duration) time.Duration {
		return time.Duration(math.Round(float64(d) * float64(part) / float64(def.Duration())))
	}
	compute, gradSync := share(def.Compute), share(def.GradSync)
	return lensfixture.Step{
		Compute: compute, Slowest: compute, GradSync: gradSync,
		Optimizer:    d - compute - gradSync, // the step lasts d exactly
		MicroBatches: r.MicroBatches,
	}
}

// jobStart is when the rank's job started: its run's, or for an
// Unsynchronised rank early enough that its last step ends about now.
func (r Rank) jobStart() time.Time {
	if r.Barrier != nil {
		return time.Now().Add(-setupTime) // real time: the first step starts now
	}
	if !r.Unsynchronised {
		return r.sched.t0
	}
	var total time.Duration
	for i := 1; i <= r.Steps; i++ {
		total += r.StepDuration(i)
	}
	return time.Now().Add(-(total + 2*setupTime))
}

// emitStep replays the fixture's span tree of step (lensfixture.Step.Plans)
// through the SDK, from start: every span is started under its parent, so
// parents first, and they are ended in lensfixture.ExportOrder, children
// before parents, as a real rank exports them. Spans that would end after
// cutoff (from start) are never ended: a hung step's open spans.
func (r Rank) emitStep(ctx context.Context, tracer trace.Tracer, it int, start time.Time, step lensfixture.Step, cutoff time.Duration) {
	plans := step.Plans(r.StepSpanName)
	spans := r.startSpans(ctx, tracer, it, start, plans)
	for _, i := range lensfixture.ExportOrder(plans) {
		if plans[i].To <= cutoff {
			spans[i].End(trace.WithTimestamp(start.Add(plans[i].To)))
		}
	}
}

// startSpans starts the spans of plans under their parents, parents first.
func (r Rank) startSpans(ctx context.Context, tracer trace.Tracer, it int, start time.Time, plans []lensfixture.Plan) []trace.Span {
	ctxs := make([]context.Context, len(plans))
	spans := make([]trace.Span, len(plans))
	microbatch := -1
	for i, p := range plans {
		parent := ctx
		if p.Parent >= 0 {
			parent = ctxs[p.Parent]
		}
		if p.Name == lensfixture.MicrobatchForward {
			microbatch++ // its backward follows it
		}
		opts := append(r.spanOptions(p, it, microbatch), trace.WithTimestamp(start.Add(p.From)))
		ctxs[i], spans[i] = tracer.Start(parent, p.Name, opts...)
		if p.Name == lensfixture.Optimizer && it == r.ErrorAtIteration {
			spans[i].SetStatus(codes.Error, "optimizer step failed")
		}
	}
	return spans
}

// emitRealStep is emitStep in real time with the run's all-reduce
// (Rank.Barrier) after grad_sync.start: every span ends when its plan says,
// those after the barrier later by the time the rank waited there beyond
// its own schedule. It returns how long the step lasted, or blocked when
// the barrier failed: the spans still open then are never ended.
func (r Rank) emitRealStep(ctx, trainCtx context.Context, tracer trace.Tracer, it int, start time.Time, step lensfixture.Step) (time.Duration, bool) {
	plans := step.Plans(r.StepSpanName)
	spans := r.startSpans(trainCtx, tracer, it, start, plans)
	var waited time.Duration
	for _, i := range lensfixture.ExportOrder(plans) {
		at := start.Add(plans[i].To + waited)
		time.Sleep(time.Until(at))
		spans[i].End(trace.WithTimestamp(at))
		if plans[i].Name != lensfixture.GradSyncStart {
			continue
		}
		if err := r.Barrier(ctx, it); err != nil {
			return 0, true
		}
		waited = max(0, time.Since(at))
	}
	return step.Duration() + waited, false
}

// spanOptions are what the emulator adds to the fixture's span p of step
// it: the step span's Megatron attributes (and a trace of its own with
// StepsAreRoots), a micro-batch's id.
func (r Rank) spanOptions(p lensfixture.Plan, it, microbatch int) []trace.SpanStartOption {
	switch {
	case p.Parent < 0:
		opts := []trace.SpanStartOption{trace.WithAttributes(
			attribute.Int(attrkey.MegatronIteration, it),
			attribute.Int("megatron.num_microbatches", r.MicroBatches),
			attribute.Float64("megatron.loss", lossAt(it)),
			attribute.Float64("megatron.grad_norm", 1.25),
			attribute.Bool("megatron.update_successful", it != r.ErrorAtIteration),
		)}
		if r.StepsAreRoots {
			opts = append(opts, trace.WithNewRoot())
		}
		return opts
	case p.Name == lensfixture.MicrobatchForward, p.Name == lensfixture.MicrobatchBack:
		return []trace.SpanStartOption{trace.WithAttributes(attribute.Int("megatron.microbatch_id", microbatch))}
	}
	return nil
}

// lossAt is the loss the rank reports on iteration it (1-based), in its step
// span, its loss metric and its log line.
func lossAt(it int) float64 { return lensfixture.Loss(int64(it)) }

// withSchedules returns a copy of ranks in which the synchronous ranks of
// each run share one schedule.
func withSchedules(ranks []Rank) []Rank {
	ranks = slices.Clone(ranks)
	byRun := map[string][]Rank{}
	for i := range ranks {
		if shared(ranks[i]) {
			byRun[ranks[i].RunID] = append(byRun[ranks[i].RunID], ranks[i])
		}
	}
	scheds := make(map[string]*schedule, len(byRun))
	for run, rs := range byRun {
		scheds[run] = newSchedule(rs)
	}
	for i := range ranks {
		if shared(ranks[i]) {
			ranks[i].sched = scheds[ranks[i].RunID]
		}
	}
	return ranks
}

// shared reports whether the rank takes its run's schedule: a synchronous
// rank without a Barrier (with one, it waits for the others for real, and
// its schedule is its own compute).
func shared(r Rank) bool { return !r.Unsynchronised && r.Barrier == nil }
