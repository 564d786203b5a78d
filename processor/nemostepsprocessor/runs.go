// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor // import "github.com/nemo-lens/otelcol-nemo/processor/nemostepsprocessor"

import (
	"slices"
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/goodput"
	"github.com/nemo-lens/otelcol-nemo/internal/stall"
	"github.com/nemo-lens/otelcol-nemo/internal/steps"
)

// runIdle is how long a run that sent nothing is kept: then it is taken as
// ended (goodput emits its last) and forgotten, unless it is stalled.
const runIdle = 30 * time.Minute

// stalledRunIdle is how long a stalled run that sent nothing is kept: its
// stall is reported at every tick for a day, then it is forgotten.
const stalledRunIdle = 24 * time.Hour

// maxRememberedRuns bounds the runs kept: past it, the runs silent the
// longest are forgotten first.
const maxRememberedRuns = 4096

// runState is everything nemo_steps keeps of one run (a group of group_keys):
// the labels of its series, its ranks' labels, and what each feed follows of
// it. The runs are kept in one table and forgotten by one rule
// (runTable.forget), each with all it holds: a run forgotten and seen again
// starts over, its straggler count and goodput with a new start time.
type runState struct {
	group uint64
	// labels are the run's labels (its latest rank's, read at a step
	// span): the labels of its series and records; nil until a rank
	// reported a step.
	labels *rankLabels
	// ranks are its ranks' labels, read at their step spans.
	ranks map[int64]*rankLabels
	// seen is when a span of it last arrived (its batch's wall clock).
	seen time.Time

	// What the feeds follow of it; nil while the feed is off or has not
	// seen the run.
	stragglers *runCount       // the step metrics' straggler count
	stall      *stall.RunState // the stall detector's
	goodput    *goodputRun     // the goodput accounting
}

// idle says the run has sent nothing for runIdle.
func (r *runState) idle(now time.Time) bool { return now.Sub(r.seen) > runIdle }

// over says the run is to be forgotten: it has sent nothing for runIdle,
// or for stalledRunIdle while stalled.
func (r *runState) over(now time.Time) bool {
	if r.stall != nil && r.stall.Stalled() {
		return now.Sub(r.seen) > stalledRunIdle
	}
	return r.idle(now)
}

// rank is a rank's labels, nil when none is known.
func (r *runState) rank(rank int64) *rankLabels { return r.ranks[rank] }

// runCount is a run's cumulative count of straggler rank steps.
type runCount struct {
	service string
	group   []label
	count   int64
	// start is the start of the first step counted, last the end of the
	// latest: the Sum's start time and time.
	start, last int64
	dirty       bool
}

// goodputRun is one run's accounting and when it was last emitted.
type goodputRun struct {
	acct     *goodput.Run
	lastEmit time.Time
	// endDue is when its end, seen in its job spans, is emitted; emitted
	// says its last goodput went out (a new attempt starts it again).
	endDue  time.Time
	emitted bool
	// stalls counts its stalls (behind or wedged).
	stalls int
}

// runTable holds every run the processor follows. Called under the
// engine's lock.
type runTable struct {
	id   identity
	runs map[uint64]*runState
	// rankLabels counts the ranks' labels kept over all runs: past
	// steps.MaxRememberedRanks a new rank's are not kept (its points are
	// not written) until a run is forgotten.
	rankLabels int
	// Of the resource being walked: whether its rank's labels were read,
	// and its host and process identity (read when first asked for), which
	// the stall and goodput feeds read.
	labelsRead          bool
	procHost, procIdent string
}

func newRunTable(cfg *Config) *runTable {
	return &runTable{id: newIdentity(cfg), runs: make(map[uint64]*runState)}
}

// at is the run of a resource about to be walked, created when new.
func (t *runTable) at(r *steps.Resource) *runState {
	run := t.runs[r.Group]
	if run == nil {
		run = &runState{group: r.Group, ranks: make(map[int64]*rankLabels)}
		t.runs[r.Group] = run
	}
	run.seen = r.At
	t.labelsRead, t.procIdent = false, ""
	return run
}

// get is a run, nil when it is not kept.
func (t *runTable) get(group uint64) *runState { return t.runs[group] }

// atStep reads the labels of the resource's rank at one of its step spans
// (one comparison per attribute when they did not change) and makes them
// the run's.
func (t *runTable) atStep(run *runState, r *steps.Resource) {
	if t.labelsRead {
		return // a resource holds many step spans of one rank
	}
	t.labelsRead = true
	prev := run.ranks[r.Rank.Rank]
	l := t.id.labelsFor(prev, r.Attrs, r.Rank.Rank)
	run.labels = l
	if l == prev {
		return
	}
	if prev == nil {
		if t.rankLabels >= steps.MaxRememberedRanks {
			return
		}
		t.rankLabels++
	}
	run.ranks[r.Rank.Rank] = l
}

// process is the host and process identity (processOf) of the resource
// being walked, read once per resource.
func (t *runTable) process(r *steps.Resource) (host, process string) {
	if t.procIdent == "" {
		t.procHost, t.procIdent = processOf(r.Attrs)
	}
	return t.procHost, t.procIdent
}

// all calls fn for every run kept.
func (t *runTable) all(fn func(*runState)) {
	for _, run := range t.runs {
		fn(run)
	}
}

// forget is the one rule by which runs are forgotten, after the feeds
// ticked: a run that is over (it sent nothing for runIdle, or for
// stalledRunIdle while stalled); then, past maxRememberedRuns, the runs
// silent the longest.
func (t *runTable) forget(now time.Time) {
	for group, run := range t.runs {
		if run.over(now) {
			t.drop(group, run)
		}
	}
	if len(t.runs) <= maxRememberedRuns {
		return
	}
	oldest := make([]*runState, 0, len(t.runs))
	for _, run := range t.runs {
		oldest = append(oldest, run)
	}
	slices.SortFunc(oldest, func(a, b *runState) int { return a.seen.Compare(b.seen) })
	for _, run := range oldest[:len(oldest)-maxRememberedRuns] {
		t.drop(run.group, run)
	}
}

func (t *runTable) drop(group uint64, run *runState) {
	delete(t.runs, group)
	t.rankLabels -= len(run.ranks)
}
