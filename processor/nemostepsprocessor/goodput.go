// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor"

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"go.opentelemetry.io/collector/pdata/plog"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/goodput"
	"github.com/nemo-lens/otelcol-nemo/internal/stall"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// goodputFeed accounts every run's wall-clock time (internal/goodput) from
// the engine's spans as they arrive, its decided steps and the stall
// detector's verdicts, and emits it every interval and when the run ends:
// the nemo.run.time, nemo.run.goodput and nemo.rank.straggler_time
// metrics and the nemo.run.goodput record. Called under the engine's lock.
type goodputFeed struct {
	interval time.Duration
	// delay is how long after a point the steps before it are decided
	// (decision_wait and a tick): then it can be settled.
	delay                  time.Duration
	load, save, evaluation steps.Patterns
	jobSpans               []string
	runs                   *runTable
	out                    *pointWriter
	// The process of the rank of the resource being walked, looked up at
	// its first span (hasProcess).
	process    goodput.Process
	hasProcess bool
	scratch    map[int64]int64
	// kinds caches kindOf by span name: a job sends a few dozen names, and
	// one map lookup per span is cheaper than the four lists' matching.
	kinds map[string]goodput.SpanKind
}

var _ feed = (*goodputFeed)(nil)

// maxKindNames bounds the span name cache; past it names are matched
// every time.
const maxKindNames = 4096

func newGoodputFeed(cfg *GoodputConfig, decisionWait time.Duration, runs *runTable, out *pointWriter) *goodputFeed {
	// The config was validated: the patterns parse.
	load, _ := steps.ParsePatterns(cfg.CheckpointLoadSpanNames)
	save, _ := steps.ParsePatterns(cfg.CheckpointSaveSpanNames)
	evaluation, _ := steps.ParsePatterns(cfg.EvaluationSpanNames)
	return &goodputFeed{
		interval: cfg.Interval,
		delay:    decisionWait + time.Second,
		load:     load, save: save, evaluation: evaluation,
		jobSpans: cfg.JobSpanNames,
		runs:     runs,
		out:      out,
		scratch:  map[int64]int64{},
		kinds:    map[string]goodput.SpanKind{},
	}
}

// resource: the rank's process is looked up at the resource's first span.
func (f *goodputFeed) resource(*runState, *steps.Resource) { f.hasProcess = false }

// arrived feeds one span of an identified rank.
func (f *goodputFeed) arrived(run *runState, r *steps.Resource, s ptrace.Span, _ steps.StepSpan) {
	if !f.hasProcess {
		if run.goodput == nil {
			run.goodput = &goodputRun{acct: goodput.NewRun(goodput.DefaultLimits), lastEmit: r.At}
		}
		run.goodput.emitted = false
		_, process := f.runs.process(r)
		f.process, f.hasProcess = run.goodput.acct.Process(r.Rank.Rank, process), true
	}
	f.process.Span(f.kindOf(s.Name()), steps.Nanos(s.StartTimestamp()), steps.Nanos(s.EndTimestamp()))
}

// kindOf is what a span's name says of the run's time, cached by name.
func (f *goodputFeed) kindOf(name string) goodput.SpanKind {
	if k, ok := f.kinds[name]; ok {
		return k
	}
	k := f.match(name)
	if len(f.kinds) < maxKindNames {
		f.kinds[strings.Clone(name)] = k // the name may share its request's buffer
	}
	return k
}

// match is what a span's name says of the run's time.
func (f *goodputFeed) match(name string) goodput.SpanKind {
	switch {
	case f.save.Match(name):
		return goodput.SpanCheckpointSave
	case f.load.Match(name):
		return goodput.SpanCheckpointLoad
	case f.evaluation.Match(name):
		return goodput.SpanEvaluation
	case slices.Contains(f.jobSpans, name):
		return goodput.SpanJob
	}
	return goodput.SpanPlain
}

// decided feeds a step the engine decided: its extent over its ranks and
// what its slowest rank cost, its busy time over the median rank's. A
// reopened step (a late rank) was fed at its first decision.
func (f *goodputFeed) decided(d *steps.Decision[none]) {
	state := f.runs.get(d.Step.Group)
	if state == nil || state.goodput == nil || d.Reopened || len(d.Ranks) == 0 {
		return
	}
	run := state.goodput
	start, end := d.Ranks[0].Start, d.Ranks[0].End
	busy := make([]int64, 0, len(d.Ranks))
	slowest, slowestBusy := d.Ranks[0].Score.Rank, int64(-1)
	for i := range d.Ranks {
		r := &d.Ranks[i]
		start, end = min(start, r.Start), max(end, r.End)
		if b := r.Score.Busy; b > 0 {
			busy = append(busy, b)
			if b > slowestBusy {
				slowest, slowestBusy = r.Score.Rank, b
			}
		}
	}
	var straggler int64
	if len(busy) > 1 {
		slices.Sort(busy)
		straggler = min(max(slowestBusy-busy[len(busy)/2], 0), end-start)
	}
	run.acct.Step(goodput.Step{Iteration: d.Step.Iteration, Start: start, End: end, Straggler: straggler, Slowest: slowest})
}

// stalls feeds the stall detector's verdicts: behind and wedged are stalled
// time; a pause is not (the checkpoint or evaluation it is tells its time).
func (f *goodputFeed) stalls(events []stall.Event) {
	for i := range events {
		ev := &events[i]
		state := f.runs.get(ev.Run)
		if state == nil || state.goodput == nil || ev.Kind == stall.Paused {
			continue
		}
		run := state.goodput
		if ev.Stalled {
			run.stalls++
			run.acct.Stalled(ev.Iteration)
		} else {
			run.acct.Resumed()
		}
	}
}

// tick accounts the stall detector's changes (in t, it ticked before),
// then settles what is due and emits each run's goodput, its records into
// t.
func (f *goodputFeed) tick(now time.Time, final bool, t *tickOut) {
	f.stalls(t.events)
	t.addLogs(f.settle(now, final))
}

// settle settles what is due and emits each run's goodput every interval,
// and its last when it ends (its job spans ended, it went idle, or the
// collector stops); it returns the records.
func (f *goodputFeed) settle(now time.Time, final bool) plog.Logs {
	var logs plog.Logs
	f.runs.all(func(state *runState) {
		run := state.goodput
		if run == nil {
			return
		}
		acct := run.acct
		acct.Due(now, f.delay)
		if !run.emitted && run.endDue.IsZero() && acct.Ended() {
			run.endDue = now.Add(f.delay)
		}
		switch {
		case run.emitted:
			return
		case final || state.idle(now) || !run.endDue.IsZero() && !now.Before(run.endDue):
			acct.End()
			run.emitted, run.endDue = true, time.Time{}
		case now.Sub(run.lastEmit) < f.interval:
			// Live: the metrics at every tick.
			if state.labels != nil {
				f.metrics(state, run.acct.Snapshot(nil))
			}
			return
		}
		run.lastEmit = now
		if logs == (plog.Logs{}) {
			logs = plog.NewLogs()
		}
		f.emit(state, now, logs)
	})
	return logs
}

// topRanks is how many ranks a record names by straggler time.
const topRanks = 5

// metrics writes a run's goodput metrics under its labels: the settled
// time by category, the goodput so far (of snapshot) and every rank's
// straggler time.
func (f *goodputFeed) metrics(run *runState, snapshot goodput.Times) {
	labels, acct := run.labels, run.goodput.acct
	first, last := f.extent(acct)
	settled := acct.Settled()
	horizon := first + settled.Total()
	for c := range goodput.NumCategories {
		f.out.runTime(labels, first, horizon, c.String(), float64(settled[c])/1e9)
	}
	f.out.runGoodput(labels, last, snapshot.Goodput())
	for rank, ns := range acct.RankStraggler() {
		if l := run.rank(rank); l != nil {
			f.out.rankStraggler(l, first, horizon, float64(ns)/1e9)
		}
	}
}

// emit writes a run's goodput: the metrics and the record.
func (f *goodputFeed) emit(state *runState, now time.Time, logs plog.Logs) {
	labels, run := state.labels, state.goodput
	if labels == nil {
		return // no rank of it reported a step: no labels to put it under
	}
	acct := run.acct
	clear(f.scratch)
	snapshot := acct.Snapshot(f.scratch)
	f.metrics(state, snapshot)
	top := make([]rankCost, 0, len(f.scratch))
	for rank, ns := range f.scratch {
		if ns > 0 {
			top = append(top, rankCost{rank: rank, ns: ns})
		}
	}
	slices.SortFunc(top, func(a, b rankCost) int {
		if c := cmp.Compare(b.ns, a.ns); c != 0 {
			return c
		}
		return cmp.Compare(a.rank, b.rank)
	})
	for i := range top[:min(len(top), topRanks)] {
		if l := state.rank(top[i].rank); l != nil {
			top[i].host = l.host()
		}
	}
	goodputRecord(logs, labels, goodputReport{
		times: snapshot, wall: acct.Wall(), attempts: acct.Attempts(), stalls: run.stalls,
		top: top[:min(len(top), topRanks)], final: run.emitted,
	}, now)
}

// extent is the run's first and last span times.
func (*goodputFeed) extent(acct *goodput.Run) (first, last int64) {
	first = acct.First()
	return first, first + acct.Wall()
}
