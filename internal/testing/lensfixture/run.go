// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package lensfixture

import (
	"cmp"
	"fmt"
	"sync"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
)

// Defaults of a Run.
var (
	// DefaultStart is when a Run's Pretrain span starts.
	DefaultStart = time.Date(2025, 6, 15, 12, 0, 0, 0, time.UTC)
	// DefaultStep is a 100ms step: 70ms compute, 15ms gradient sync, 15ms
	// optimizer.
	DefaultStep = Step{Compute: 70 * time.Millisecond, GradSync: 15 * time.Millisecond, Optimizer: 15 * time.Millisecond}
)

const (
	// DefaultSetup is the time from the job's start to iteration 0's step:
	// model set-up (ModelInit) and the start of the training loop.
	DefaultSetup = 5 * time.Second
	// DefaultPeriod is the time between two steps' starts.
	DefaultPeriod = time.Second
	// ScopeName is the instrumentation scope the spans are sent under.
	ScopeName = "megatron.core"
)

// Run is one synchronous training job: its ranks train the same iterations
// together, and each iteration's step ends at the same time on every rank,
// set by the slowest rank's compute.
type Run struct {
	Ranks []Rank
	// Shape is the step spans' name and trace shape; an empty StepName means
	// megatron.train_step.
	Shape Shape
	// Start is when the job (Pretrain) starts; zero means DefaultStart.
	Start time.Time
	// Setup is the time to iteration 0's step; 0 means DefaultSetup.
	Setup time.Duration
	// Period is the time between two steps' starts (0: DefaultPeriod); it
	// must exceed every step's Duration.
	Period time.Duration
	// Step is every rank's step; a zero Step means DefaultStep. Its Compute
	// and Slowest are replaced per rank by Compute.
	Step Step
	// Compute, when set, gives a rank's compute time on an iteration.
	Compute func(rank, iteration int64) time.Duration
	// Slowest, when set, is the slowest rank's compute on an iteration;
	// otherwise every StepOf scans Ranks. Memoized sets it.
	Slowest func(iteration int64) time.Duration
}

// Memoized returns the run with Slowest remembering each iteration's scan
// of Ranks, so that building a step of N ranks costs O(N), not O(N²).
func (r Run) Memoized() Run {
	var mu sync.Mutex
	seen := map[int64]time.Duration{}
	scan := r.scanSlowest
	r.Slowest = func(iteration int64) time.Duration {
		mu.Lock()
		defer mu.Unlock()
		d, ok := seen[iteration]
		if !ok {
			d = scan(iteration)
			seen[iteration] = d
		}
		return d
	}
	return r
}

func (r Run) scanSlowest(iteration int64) time.Duration {
	var slowest time.Duration
	for _, p := range r.Ranks {
		slowest = max(slowest, r.compute(p.Rank, iteration))
	}
	return slowest
}

func (r Run) stepName() string { return cmp.Or(r.Shape.StepName, attrkey.MegatronTrainStep) }

func (r Run) template() Step { return cmp.Or(r.Step, DefaultStep) }

func (r Run) compute(rank, iteration int64) time.Duration {
	if r.Compute != nil {
		return r.Compute(rank, iteration)
	}
	return r.template().Compute
}

// StepOf is rank's step on iteration: its own compute and the slowest of
// every rank of the run.
func (r Run) StepOf(rank, iteration int64) Step {
	s := r.template()
	s.Compute = r.compute(rank, iteration)
	switch {
	case r.Slowest != nil:
		s.Slowest = max(s.Compute, r.Slowest(iteration))
	case r.Compute == nil:
		s.Slowest = s.Compute // every rank computes the same
	default:
		s.Slowest = max(s.Compute, r.scanSlowest(iteration))
	}
	return s
}

// JobStart is when the job's Pretrain span starts.
func (r Run) JobStart() time.Time {
	if r.Start.IsZero() {
		return DefaultStart
	}
	return r.Start
}

// StepStart is when every rank's step of iteration starts.
func (r Run) StepStart(iteration int64) time.Time {
	return r.JobStart().Add(cmp.Or(r.Setup, DefaultSetup) + time.Duration(iteration)*r.period())
}

func (r Run) period() time.Duration { return cmp.Or(r.Period, DefaultPeriod) }

// TraceID is the trace of rank's step on iteration (iteration < 0: its job
// spans).
func (r Run) TraceID(rank Rank, iteration int64) pcommon.TraceID {
	return traceID(rank, r.Shape, iteration)
}

// AppendResource appends a resource for rank to td with one scope, and
// returns the scope's spans.
func AppendResource(td ptrace.Traces, rank Rank) ptrace.SpanSlice {
	rs := td.ResourceSpans().AppendEmpty()
	rank.PutResource(rs.Resource().Attributes())
	ss := rs.ScopeSpans().AppendEmpty()
	ss.Scope().SetName(ScopeName)
	return ss.Spans()
}

func setSpan(s ptrace.Span, name string, trace pcommon.TraceID, id, parent pcommon.SpanID, from, to time.Time) {
	s.SetName(name)
	s.SetTraceID(trace)
	s.SetSpanID(id)
	s.SetParentSpanID(parent)
	s.SetKind(ptrace.SpanKindInternal)
	s.SetStartTimestamp(pcommon.NewTimestampFromTime(from))
	s.SetEndTimestamp(pcommon.NewTimestampFromTime(to))
}

// Part selects what AppendStepPart appends of a step.
type Part int

const (
	// StepChildren are the spans under the step span, which end first: a
	// rank may export them in an earlier batch than the step span.
	StepChildren Part = 1 << iota
	// StepSpan is the step span itself.
	StepSpan
	// WholeStep is both.
	WholeStep = StepChildren | StepSpan
)

// AppendStep appends rank's step of iteration to dst in the order its spans
// end (the step span last), and returns the step span's index in dst. The
// step span carries megatron.iteration; the others are tied to it by their
// parents, as Megatron-LM sends them.
func (r Run) AppendStep(dst ptrace.SpanSlice, rank Rank, iteration int64) int {
	return r.AppendStepPart(dst, rank, iteration, WholeStep)
}

// AppendStepPart appends part of rank's step of iteration, as AppendStep
// does, and returns the step span's index in dst (-1 without it).
func (r Run) AppendStepPart(dst ptrace.SpanSlice, rank Rank, iteration int64, part Part) int {
	step := r.StepOf(rank.Rank, iteration)
	if d, period := step.Duration(), r.period(); d >= period {
		// Steps of one rank never overlap: a fixture that says they do is
		// a mistake in the test, not data to send.
		panic(fmt.Sprintf("lensfixture: iteration %d lasts %v, not less than the run's Period %v: raise Run.Period", iteration, d, period))
	}
	plans := step.Plans(r.stepName())
	start := r.StepStart(iteration)
	trace := r.TraceID(rank, iteration)
	stepAt := -1
	for _, i := range ExportOrder(plans) {
		p := plans[i]
		if (p.Parent < 0 && part&StepSpan == 0) || (p.Parent >= 0 && part&StepChildren == 0) {
			continue
		}
		parent := SpanID(KindStep, rank.Rank, iteration, p.Parent)
		if p.Parent < 0 {
			parent = SpanID(KindJob, rank.Rank, 0, TrainIndex)
			if r.Shape.StepsAreRoots {
				parent = pcommon.SpanID{}
			}
			stepAt = dst.Len()
		}
		s := dst.AppendEmpty()
		setSpan(s, p.Name, trace, SpanID(KindStep, rank.Rank, iteration, i), parent, start.Add(p.From), start.Add(p.To))
		if p.Parent < 0 {
			s.Attributes().PutInt(attrkey.MegatronIteration, iteration)
		}
	}
	return stepAt
}

// AppendSpans appends rank's steps from iteration 0 on until dst holds n
// more spans, cut at n wherever a step is, as an SDK's batch span
// processor cuts its exports.
func (r Run) AppendSpans(dst ptrace.SpanSlice, rank Rank, n int) {
	want := dst.Len() + n
	for it := int64(0); dst.Len() < want; it++ {
		r.AppendStep(dst, rank, it)
	}
	i := 0
	dst.RemoveIf(func(ptrace.Span) bool { i++; return i > want })
}

// AppendModelInit appends ModelInit, which ends before the first step.
func (r Run) AppendModelInit(dst ptrace.SpanSlice, rank Rank) {
	t0 := r.JobStart()
	setSpan(dst.AppendEmpty(), ModelInit, r.TraceID(rank, -1), SpanID(KindJob, rank.Rank, 0, ModelInitIndex),
		SpanID(KindJob, rank.Rank, 0, PretrainIndex), t0.Add(time.Second), r.StepStart(0).Add(-time.Second))
}

// AppendCheckpoint appends a SaveCheckpoint between iteration's step and
// the next.
func (r Run) AppendCheckpoint(dst ptrace.SpanSlice, rank Rank, iteration int64) {
	end := r.StepStart(iteration).Add(r.StepOf(rank.Rank, iteration).Duration())
	setSpan(dst.AppendEmpty(), SaveCheckpoint, r.TraceID(rank, -1), SpanID(KindJob, rank.Rank, iteration, CheckpointIndex),
		SpanID(KindJob, rank.Rank, 0, TrainIndex), end.Add(time.Millisecond), end.Add(2*time.Millisecond))
}

// AppendCheckpointLoad appends LoadCheckpoint, which loads the checkpoint
// the run resumes from during its set-up: [start + 2s, start + 3s].
func (r Run) AppendCheckpointLoad(dst ptrace.SpanSlice, rank Rank) {
	t0 := r.JobStart()
	setSpan(dst.AppendEmpty(), LoadCheckpoint, r.TraceID(rank, -1), SpanID(KindJob, rank.Rank, 0, CheckpointLoadIndex),
		SpanID(KindJob, rank.Rank, 0, PretrainIndex), t0.Add(2*time.Second), t0.Add(3*time.Second))
}

// AppendEvaluation appends Evaluate between iteration's step and the next:
// from 100ms after the step to 400ms after it.
func (r Run) AppendEvaluation(dst ptrace.SpanSlice, rank Rank, iteration int64) {
	end := r.StepStart(iteration).Add(r.StepOf(rank.Rank, iteration).Duration())
	setSpan(dst.AppendEmpty(), Evaluate, r.TraceID(rank, -1), SpanID(KindJob, rank.Rank, iteration, EvaluationIndex),
		SpanID(KindJob, rank.Rank, 0, TrainIndex), end.Add(100*time.Millisecond), end.Add(400*time.Millisecond))
}

// AppendJobEnd appends Train and the root Pretrain, which end, and so are
// exported, last: after iteration last.
func (r Run) AppendJobEnd(dst ptrace.SpanSlice, rank Rank, last int64) {
	t0, trace := r.JobStart(), r.TraceID(rank, -1)
	end := r.StepStart(last + 1)
	pretrain := SpanID(KindJob, rank.Rank, 0, PretrainIndex)
	setSpan(dst.AppendEmpty(), Train, trace, SpanID(KindJob, rank.Rank, 0, TrainIndex), pretrain, r.StepStart(0).Add(-time.Millisecond), end)
	setSpan(dst.AppendEmpty(), Pretrain, trace, pretrain, pcommon.SpanID{}, t0, end.Add(time.Millisecond))
}

// Iteration is one batch holding every rank's step of iteration, a
// resource per rank.
func (r Run) Iteration(iteration int64) ptrace.Traces {
	td := ptrace.NewTraces()
	for _, rank := range r.Ranks {
		r.AppendStep(AppendResource(td, rank), rank, iteration)
	}
	return td
}

// HangRole is a rank's part in a hung step of a synchronous job.
type HangRole int

const (
	// Blocked: the rank finished its compute and grad_sync.start and waits
	// in the gradient all-reduce: grad_sync.finish, the optimizer and the
	// step span stay open.
	Blocked HangRole = iota
	// Stopped: the rank stopped in its forward, before its first backward
	// (a GPU fault, a stuck data loader, a collective it never enters).
	Stopped
	// Dead: the rank's process is gone before the step: nothing of it ends.
	Dead
)

// HangCutoff is how long into step a rank of role still ends spans: its
// spans that end later stay open, and open spans are never exported.
func (s Step) HangCutoff(stepName string, role HangRole) time.Duration {
	if role == Dead {
		return -1
	}
	want := GradSyncFinish
	if role == Stopped {
		want = MicrobatchBack
	}
	for _, p := range s.Plans(stepName) {
		if p.Name == want {
			return p.From
		}
	}
	return -1
}

// AppendHungStep appends what rank ends of its step of iteration when the
// job hangs there and the rank plays role: the spans that end before its
// HangCutoff, in export order; never the step span.
func (r Run) AppendHungStep(dst ptrace.SpanSlice, rank Rank, iteration int64, role HangRole) {
	step := r.StepOf(rank.Rank, iteration)
	plans := step.Plans(r.stepName())
	cutoff := step.HangCutoff(r.stepName(), role)
	start := r.StepStart(iteration)
	trace := r.TraceID(rank, iteration)
	for _, i := range ExportOrder(plans) {
		p := plans[i]
		if p.Parent < 0 || p.To > cutoff {
			continue
		}
		setSpan(dst.AppendEmpty(), p.Name, trace, SpanID(KindStep, rank.Rank, iteration, i), SpanID(KindStep, rank.Rank, iteration, p.Parent), start.Add(p.From), start.Add(p.To))
	}
}
