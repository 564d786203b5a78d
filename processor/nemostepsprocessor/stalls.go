// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor"

import (
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/rankattr"
	"github.com/nemo-lens/otelcol-nemo/internal/stall"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
	"github.com/nemo-lens/otelcol-nemo/internal/stepsummary"
)

// stallFeed feeds the stall detector (internal/stall) every rank's
// progress, span by span as the spans arrive, and turns what it finds at
// the ticks into log records, gauges and the collector's own log. Each
// run's detector state is kept in its runState. Called under the engine's
// lock.
type stallFeed struct {
	detector *stall.Detector
	spans    *steps.Recognizer
	jobSpans []string
	runs     *runTable
	out      *pointWriter
	logger   *zap.Logger
	// The rank of the resource being walked, in the detector: looked up
	// at the first span the detector reads (tracked).
	tracker stall.Tracker
	tracked bool
}

func newStallFeed(cfg *StallsConfig, spans *steps.Recognizer, runs *runTable, out *pointWriter, logger *zap.Logger) *stallFeed {
	return &stallFeed{
		detector: stall.New(stall.Config{
			MinStall: cfg.MinStall, Factor: cfg.StallFactor,
			WarmupSteps: stall.DefaultWarmupSteps, History: stall.DefaultHistory,
		}),
		spans:    spans,
		jobSpans: cfg.JobSpanNames,
		runs:     runs,
		out:      out,
		logger:   logger,
	}
}

// resource: the rank of a new resource is looked up at its first span the
// detector reads, so that a resource with none (no Megatron span) does not
// make its rank one the detector follows.
func (f *stallFeed) resource(*runState, *steps.Resource) { f.tracked = false }

// arrived feeds the detector one span of an identified rank: the job
// spans, the step spans and every Megatron span's place in the step. The
// rank is looked up once per resource, at the batch's time.
func (f *stallFeed) arrived(run *runState, r *steps.Resource, s ptrace.Span, step steps.StepSpan) {
	name := s.Name()
	isJob := slices.Contains(f.jobSpans, name)
	switch {
	case step.Is, isJob:
	case f.spans.IsStep(name):
		return // a step span without a usable iteration says nothing
	case !strings.HasPrefix(name, "megatron."):
		return
	}
	if !f.tracked {
		if run.stall == nil {
			run.stall = f.detector.NewRun(r.Group, r.At)
		}
		host, process := f.runs.process(r)
		id := stall.Rank{Rank: r.Rank.Rank, Host: host, Process: process, Stages: rankattr.PipelineSize(r.Attrs)}
		f.tracker, f.tracked = f.detector.Rank(run.stall, int(r.WorldSize), id, r.At), true
	}
	tr := f.tracker
	if tr.NeedsStage() {
		// Once per rank of a pipeline-parallel run: its stage is on its
		// spans, not its resource.
		if v, ok := s.Attributes().Get(attrkey.PipelineRank); ok {
			if stage, ok := rankattr.Parse(v); ok {
				tr.SetStage(stage)
			}
		}
	}
	span := stall.Span{Name: name, Start: steps.Nanos(s.StartTimestamp()), End: steps.Nanos(s.EndTimestamp()), Job: isJob}
	if sum := step.Summary; sum != nil {
		span.Beat = sum.Kind == stepsummary.KindProgress
		span.Forwards, span.Backwards = sum.Counts.Forwards, sum.Counts.Backwards
	}
	if step.Is {
		span.Step, span.Iteration = true, step.Iteration
		if tr.Pipelined() {
			if v, ok := s.Attributes().Get(attrkey.MegatronNumMicrobatches); ok {
				if m, ok := rankattr.Parse(v); ok {
					span.MicroBatches = int(m)
				}
			}
		}
	}
	tr.Span(span)
}

var _ feed = (*stallFeed)(nil)

// decided: the detector follows the spans as they arrive.
func (*stallFeed) decided(*steps.Decision[none]) {}

// tick judges every run (not at the last tick: the collector stops, the
// runs do not): the stall records, the stalls found and the changes go
// into t; it writes the gauges and logs each change.
func (f *stallFeed) tick(now time.Time, final bool, t *tickOut) {
	if final {
		return
	}
	logs, counts, events := f.judge(now)
	t.addLogs(logs)
	t.stalled, t.events = counts, events
}

// judge judges every run: it returns the stall records to send, the stalls
// found and the changes, writes the gauges and logs each change.
func (f *stallFeed) judge(now time.Time) (plog.Logs, stallCounts, []stall.Event) {
	var events []stall.Event
	var stalled []stall.Status
	f.runs.all(func(run *runState) {
		if run.stall != nil {
			events, stalled = f.detector.Judge(run.stall, now, events, stalled)
		}
	})
	stall.SortByRun(events, stalled)
	ts := now.UnixNano()
	var logs plog.Logs
	var counts stallCounts
	for i := range events {
		ev := &events[i]
		run := f.runs.get(ev.Run)
		labels := run.labels
		if labels == nil {
			continue // a run that never completed a step cannot stall
		}
		if logs == (plog.Logs{}) {
			logs = plog.NewLogs()
		}
		stallRecord(logs, labels, ev, now)
		logStall(f.logger, labels, ev)
		if ev.Stalled {
			counts[kindIndex(ev.Kind)]++
			continue
		}
		// At the end of a stall every gauge of it goes to 0 once.
		f.out.runGauge(idRunStalled, labels, ts, 0, string(ev.Kind))
		for _, rank := range ev.Ranks() {
			if l := run.rank(rank); l != nil {
				f.out.gauge(idRankBehind, l, ts, 0)
			}
		}
	}
	for _, s := range stalled {
		run := f.runs.get(s.Run)
		labels := run.labels
		if labels == nil {
			continue
		}
		f.out.runGauge(idRunStalled, labels, ts, 1, string(s.Kind))
		f.out.runGauge(idRunStallDuration, labels, ts, s.For.Seconds(), string(s.Kind))
		for _, rank := range s.Culprits {
			if l := run.rank(rank); l != nil {
				f.out.gauge(idRankBehind, l, ts, 1)
			}
		}
	}
	return logs, counts, events
}

func kindIndex(k stall.Kind) int {
	switch k {
	case stall.Paused:
		return 1
	case stall.Wedged:
		return 2
	}
	return 0
}
