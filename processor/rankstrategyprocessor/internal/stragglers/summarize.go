// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stragglers // import "github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor/internal/stragglers"

import (
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/boundedmap"
	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
	"github.com/nemo-lens/otelcol-nemo/internal/stall"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
	"github.com/nemo-lens/otelcol-nemo/internal/stepsummary"
)

// summarizer writes, on an agent, the step summaries of the ranks the
// strategy drops (internal/stepsummary): one per rank-step at its step's
// decision, the envelope of every span outside the steps, and a progress
// beat per rank while it completes no step. They go out with the kept
// straggler spans, through the same Output, so that a refused request is
// sent again like theirs. Called under the engine's lock.
type summarizer struct {
	out *steps.Output
	// interval: a rank that completed no step for this long gets a beat
	// when its progress moved, at most one per interval.
	interval time.Duration
	ranks    *boundedmap.Map[steps.Rank, *summaryRank]
	// keys are the resource attributes a summary carries.
	keys []string
	// Written since the last count.
	written int64
}

// summaryRank is what the summarizer keeps of a dropped rank: its
// identity (the summaries' resource) and its progress since its last step,
// as the stall detector follows it (stall.Progress).
type summaryRank struct {
	res     pcommon.Resource
	stepEnd int64
	// lastStep is when its latest step span (or, before any, its first
	// span) arrived, lastBeat when its latest beat went.
	lastStep time.Time
	lastBeat time.Time
	progress stall.Progress
	// latest is the envelope of progress's latest span; moved: the
	// progress changed since the last beat.
	latest ptrace.Span
	moved  bool
	// pipelined: the rank reports a pipeline size above 1, so its spans
	// say its stage (-1 until one did).
	pipelined bool
	stage     int64
	// stepForwards are the micro-batch forwards of its latest step.
	stepForwards int64
}

func newSummarizer(out *steps.Output, interval time.Duration, keys []string) *summarizer {
	return &summarizer{out: out, interval: interval, keys: keys, ranks: boundedmap.New[steps.Rank, *summaryRank](steps.MaxRememberedRanks)}
}

// rank is the state of a dropped rank whose resource is being held, its
// identity read again when it changed (a restarted rank is a new process).
// Once per resource, as it is held.
func (m *summarizer) rank(rank steps.Rank, attrs pcommon.Map) *summaryRank {
	sr := m.ranks.GetOrNew(rank, func() *summaryRank {
		return &summaryRank{res: pcommon.NewResource(), latest: ptrace.NewSpan(), stage: -1}
	})
	if stepsummary.PutIdentity(sr.res.Attributes(), attrs, m.keys) {
		sr.pipelined = rankattr.PipelineSize(attrs) > 1
	}
	return sr
}

// arrived follows a dropped rank's progress, span by span in batch order,
// as the stall detector does on the gateway.
func (sr *summaryRank) arrived(r *steps.Resource, s ptrace.Span, step steps.StepSpan) {
	start, end := steps.Nanos(s.StartTimestamp()), steps.Nanos(s.EndTimestamp())
	if sr.lastStep.IsZero() {
		sr.lastStep = r.At // a new rank: its beats are due an interval from now
	}
	if sr.pipelined && sr.stage < 0 {
		if v, ok := s.Attributes().Get(attrkey.PipelineRank); ok {
			if stage, ok := rankattr.Parse(v); ok {
				sr.stage = stage
			}
		}
	}
	switch {
	case step.Is:
		if end >= sr.stepEnd {
			sr.stepEnd, sr.lastStep, sr.stepForwards = end, r.At, int64(sr.progress.Forwards)
			sr.progress.NextIteration()
			sr.moved = false
		}
	case start >= sr.stepEnd && strings.HasPrefix(s.Name(), "megatron."):
		if sr.progress.Add(s.Name(), end) {
			stepsummary.CopyEnvelope(sr.latest, s)
		}
		sr.moved = true
	}
}

// step writes the summary of a dropped rank's step: its step span (held),
// the time it waited, the micro-batch forwards it ended.
func (m *summarizer) step(rank steps.Rank, step ptrace.Span, iteration, forwards int64, rs *steps.RankStep) {
	sr, ok := m.ranks.Get(rank)
	if !ok {
		return
	}
	wait := int64(0)
	if rs.Score.Busy > 0 {
		wait = rs.End - rs.Start - rs.Score.Busy
	}
	stepsummary.WriteStep(m.out.Summary(rank, sr.res), step, iteration, wait, forwards)
	m.written++
}

// phase writes the envelope of a dropped rank's span outside every step.
func (m *summarizer) phase(rank steps.Rank, span ptrace.Span) {
	sr, ok := m.ranks.Get(rank)
	if !ok {
		return
	}
	stepsummary.WritePhase(m.out.Summary(rank, sr.res), span)
	m.written++
}

// beats writes a progress beat for each rank whose progress moved and that
// completed no step for an interval, at most one per interval.
func (m *summarizer) beats(now time.Time) {
	m.ranks.All(func(rank steps.Rank, sr *summaryRank) {
		if !sr.moved || now.Sub(sr.lastStep) < m.interval || now.Sub(sr.lastBeat) < m.interval {
			return
		}
		counts := stepsummary.Counts{Forwards: int64(sr.progress.Forwards), Backwards: int64(sr.progress.Backwards)}
		stepsummary.WriteProgress(m.out.Summary(rank, sr.res), sr.latest, counts, sr.stage)
		sr.moved, sr.lastBeat = false, now
		m.written++
	})
}
