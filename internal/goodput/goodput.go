// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package goodput accounts where a training run's wall-clock time went, from
// the spans its ranks already send: every stretch of time from the run's
// first span to its last, across its attempts (restarts), falls in exactly
// one category, so that the categories add up to the wall time.
//
// The rules (docs/data-model.md has them with pictures), by precedence
// where stretches overlap:
//   - stalled: from the end of the run's last completed step, when the stall
//     detector reports it stalled (behind or wedged, not paused), until a
//     step completes again or the next attempt starts;
//   - a step (from its ranks' earliest step span start to their latest end):
//     lost_progress when a later attempt redid its iteration (it resumed
//     from an earlier checkpoint); otherwise straggler for what its slowest
//     rank cost everyone (the slowest rank's busy time minus the median
//     rank's, clipped to the step) and productive for the rest;
//   - checkpoint_load and checkpoint_save: the union of the ranks' spans of
//     those names, where no step runs (an asynchronous save that overlaps
//     training costs nothing);
//   - evaluation: the ranks' evaluation spans;
//   - startup: an attempt's time before its first step;
//   - restart: between the end of an attempt that was not stalled and the
//     next attempt's first span;
//   - other: the rest (gaps between steps no span explains).
//
// An attempt starts when a rank comes back as a new process (its process
// identity changes) or a step starts again from an earlier iteration.
//
// Time counts once it can no longer change category (it is settled): steps
// once a checkpoint save after them preserves them, an attempt once the
// next one shows where it resumed, everything when the run ends. Snapshot
// adds the time not settled yet, classified as if it were, so that it
// always adds up to the wall time so far.
//
// The package is pure: its caller (the nemo_steps connector) feeds it the
// spans, the decided steps and the stalls, in the ranks' clocks (Unix ns),
// and settles on its ticker.
package goodput // import "github.com/nemo-lens/otelcol-nemo/internal/goodput"

import "time"

// Category is where a stretch of a run's time went.
type Category uint8

const (
	Productive Category = iota
	Straggler
	Startup
	CheckpointLoad
	CheckpointSave
	Evaluation
	Stalled
	LostProgress
	Restart
	Other
	// NumCategories sizes arrays indexed by Category.
	NumCategories
)

var categoryNames = [NumCategories]string{
	Productive: "productive", Straggler: "straggler", Startup: "startup",
	CheckpointLoad: "checkpoint_load", CheckpointSave: "checkpoint_save", Evaluation: "evaluation",
	Stalled: "stalled", LostProgress: "lost_progress", Restart: "restart", Other: "other",
}

// String is the category's name in the outputs (nemo.time.category).
func (c Category) String() string { return categoryNames[c] }

// Times are nanoseconds by category.
type Times [NumCategories]int64

// Total is the time of every category.
func (t Times) Total() int64 {
	var n int64
	for _, v := range t {
		n += v
	}
	return n
}

// Goodput is productive time over the total, 0 when there is none.
func (t Times) Goodput() float64 {
	total := t.Total()
	if total <= 0 {
		return 0
	}
	return float64(t[Productive]) / float64(total)
}

// SpanKind is what a span's name says of the run's time.
type SpanKind uint8

const (
	// SpanPlain says nothing by its name: it only extends the run and its
	// attempt.
	SpanPlain SpanKind = iota
	SpanCheckpointLoad
	SpanCheckpointSave
	SpanEvaluation
	// SpanJob is a rank's run-long job span: when every rank's ended, the
	// run is over.
	SpanJob
)

// Step is a decided step of the run.
type Step struct {
	Iteration int64
	// Start and End are its ranks' earliest step span start and latest end.
	Start, End int64
	// Straggler is what its slowest rank cost everyone (ns): that rank's busy
	// time minus the median rank's, at least 0; Slowest is that rank.
	Straggler int64
	Slowest   int64
}

// Limits bound what one run keeps.
type Limits struct {
	// Steps and Intervals bound the steps and named spans not settled yet:
	// past them the oldest are settled as if a checkpoint had preserved
	// them.
	Steps, Intervals int
	// Ranks bounds the ranks whose process and straggler time are kept.
	Ranks int
}

// DefaultLimits keep about a day of a run with a step every second between
// two checkpoints, and 262,144 ranks (a 100,000-rank run judged by one
// gateway from its agents' summaries).
var DefaultLimits = Limits{Steps: 100_000, Intervals: 100_000, Ranks: 1 << 18}

// Run accounts one run. It is not safe for concurrent use.
type Run struct {
	limits Limits
	// first and last are the run's span time extent; started once a span
	// came.
	first, last int64
	started     bool
	// horizon: everything before it is settled, in settled.
	horizon int64
	settled Times
	// stragglerBy is every rank's settled straggler time.
	stragglerBy map[int64]int64
	attempts    []*attempt // not settled yet; the last is the current one
	count       int        // attempts so far
	ranks       map[int64]*rankState
	steps       []stepRec
	intervals   []interval
	stalls      []*stallRec
	// pending are the times to settle up to, once due (Due); lastStepStart
	// is the latest decided step's start.
	pending       []settlePoint
	lastStepStart int64
}

type attempt struct {
	n          int
	start, end int64
	// firstStep is its earliest step start, resume its lowest iteration
	// (hasStep: it has a step); maxIter and lastStepEnd its latest.
	hasStep              bool
	firstStep, resume    int64
	maxIter, lastStepEnd int64
	// stalledAtEnd: a stall was open when the next attempt began.
	stalledAtEnd bool
	// jobsEnded counts its ranks whose job span ended.
	jobsEnded map[int64]bool
}

type rankState struct {
	proc    string
	attempt int
}

type stepRec struct {
	Step
	// duration is the step's whole duration, for the straggler share of a
	// part of it; attempt its attempt's number.
	duration int64
	attempt  int
}

type interval struct {
	kind       SpanKind
	start, end int64
}

type stallRec struct {
	since, until int64
	// endedBy is the attempt whose start ended it (its start may move
	// earlier as its spans come).
	endedBy *attempt
	// open: until is not known yet; resumed: the detector said the run
	// resumed, and the step that completed ends it.
	open, resumed bool
	iteration     int64
	attempt       int
}

type settlePoint struct {
	at  int64
	due time.Time
	// afterStep: settle only once a step that starts after at was
	// decided: training went on after a save, so no stall began in
	// between (a stall that begins after the last step takes precedence).
	afterStep bool
}

// NewRun returns an empty run.
func NewRun(limits Limits) *Run {
	return &Run{limits: limits, stragglerBy: map[int64]int64{}, ranks: map[int64]*rankState{}}
}

// Attempts is how many attempts the run had.
func (r *Run) Attempts() int { return r.count }

// First is the run's first span's start.
func (r *Run) First() int64 { return r.first }

// Wall is the run's wall time so far: its first span's start to its last
// span's end.
func (r *Run) Wall() int64 { return r.last - r.first }

// Settled are the settled times by category, since the run began.
func (r *Run) Settled() Times { return r.settled }

// RankStraggler is every rank's settled straggler time; the caller reads it,
// never changes it.
func (r *Run) RankStraggler() map[int64]int64 { return r.stragglerBy }
