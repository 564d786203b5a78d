// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepbusy // import "github.com/nemo-lens/otelcol-nemo/internal/stepbusy"

// Place says where a span of a rank belongs, by its start time.
type Place uint8

const (
	// Unknown: no step span seen so far covers the time, and none started
	// after it: the span's step span may still come.
	Unknown Place = iota
	// InStep: a step span of the rank covers the time.
	InStep
	// Outside: no step of the rank covers the time, and a later step has
	// started: the span belongs to no step (job, checkpoint, evaluation).
	Outside
)

// timelineSteps is how many recent steps a rank's timeline remembers.
const timelineSteps = 4

// Timeline remembers every rank's last few step spans, so that its other
// spans can be tied to their step by start time. A rank's steps run one
// after another, and a span of a step starts within the step span (it may
// end after it, as an asynchronous span does), so the step span that covers
// a span's start is its step; this needs no parent links and holds nothing
// per span. Step spans of one rank are exported in the order they end, so a
// span whose step has not been seen yet waits for it (Unknown) until a later
// step shows it belonged to none (Outside).
//
// Like History it keeps at most about 2 x limit ranks in two generations.
// Not safe for concurrent use.
type Timeline[K comparable] struct {
	ranks Generations[K, *rankSteps]
}

type stepSpan struct {
	iteration, start, end int64
}

// rankSteps is a ring of a rank's last step spans.
type rankSteps struct {
	steps [timelineSteps]stepSpan
	n     int // steps recorded, at most timelineSteps
	next  int
	// latestStart is the latest step start seen.
	latestStart int64
}

// NewTimeline remembers the recent steps of up to about 2 x limit ranks.
func NewTimeline[K comparable](limit int) *Timeline[K] {
	return &Timeline[K]{ranks: *NewGenerations[K, *rankSteps](limit)}
}

// Add records a step span [start, end) of rank (ns): a span starting at its
// end belongs to the next step, which starts there in synchronous training.
// A step span without a usable duration (end < start) is ignored.
func (tl *Timeline[K]) Add(rank K, iteration, start, end int64) {
	if end < start {
		return
	}
	r := tl.get(rank, true)
	r.steps[r.next] = stepSpan{iteration: iteration, start: start, end: end}
	r.next = (r.next + 1) % timelineSteps
	r.n = min(r.n+1, timelineSteps)
	if r.n == 1 || start > r.latestStart {
		r.latestStart = start
	}
}

// Place ties a span of rank starting at t (ns) to the step span that covers
// it: its iteration and InStep; or says it is Outside every step, or
// Unknown yet.
func (tl *Timeline[K]) Place(rank K, t int64) (int64, Place) {
	r := tl.get(rank, false)
	if r == nil {
		return 0, Unknown
	}
	for i := range r.n {
		if s := r.steps[i]; s.start <= t && t < s.end {
			return s.iteration, InStep
		}
	}
	if r.latestStart > t {
		return 0, Outside
	}
	return 0, Unknown
}

// Len is the number of ranks remembered.
func (tl *Timeline[K]) Len() int { return tl.ranks.Len() }

func (tl *Timeline[K]) get(rank K, create bool) *rankSteps {
	if r, ok := tl.ranks.Get(rank); ok || !create {
		return r
	}
	r := &rankSteps{}
	tl.ranks.insert(rank, r)
	return r
}
