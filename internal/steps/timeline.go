// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package steps // import "github.com/nemo-lens/otelcol-nemo/internal/steps"

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

type stepSpan struct {
	iteration, start, end int64
}

// RankSteps is one rank's timeline, its last few step spans, so that its
// other spans can be tied to their step by start time. A rank's steps run
// one after another, and a span of a step starts within the step span (it
// may end after it, as an asynchronous span does), so the step span that
// covers a span's start is its step; this needs no parent links and holds
// nothing per span. Step spans of one rank are exported in the order they
// end, so a span whose step has not been seen yet waits for it (Unknown)
// until a later step shows it belonged to none (Outside).
type RankSteps struct {
	steps [timelineSteps]stepSpan
	n     int // steps recorded, at most timelineSteps
	next  int
	// latestStart is the latest step start seen.
	latestStart int64
}

// Add records a step span [start, end) (ns): a span starting at its end
// belongs to the next step, which starts there in synchronous training. A
// step span without a usable duration (end < start) is ignored.
func (r *RankSteps) Add(iteration, start, end int64) {
	if end < start {
		return
	}
	r.steps[r.next] = stepSpan{iteration: iteration, start: start, end: end}
	r.next = (r.next + 1) % timelineSteps
	r.n = min(r.n+1, timelineSteps)
	if r.n == 1 || start > r.latestStart {
		r.latestStart = start
	}
}

// Seen reports whether the step span of iteration [start, end) was recorded
// already (a batch sent twice): a rank's steps do not overlap, so only this
// very step span covers its own middle.
func (r *RankSteps) Seen(iteration, start, end int64) bool {
	it, place := r.Place(start + (end-start)/2)
	return place == InStep && it == iteration
}

// Place ties a span starting at t (ns) to the step span that covers it:
// its iteration and InStep; or says it is Outside every step, or Unknown
// yet.
func (r *RankSteps) Place(t int64) (int64, Place) {
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
