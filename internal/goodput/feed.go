// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package goodput // import "github.com/nemo-lens/otelcol-nemo/internal/goodput"

import "time"

// Process is one rank's process as its run sees it: a caller feeding many
// spans of one resource looks the rank up once (Run.Process).
type Process struct {
	r    *Run
	rank int64
	proc string
	st   *rankState
}

// Process is rank's process proc (its service.instance.id or pid: a new
// one starts an attempt).
func (r *Run) Process(rank int64, proc string) Process {
	st := r.ranks[rank]
	if st == nil && len(r.ranks) < r.limits.Ranks {
		st = &rankState{proc: proc, attempt: max(r.count, 1)}
		r.ranks[rank] = st
	}
	return Process{r: r, rank: rank, proc: proc, st: st}
}

// Span feeds one ended span of the process, [start, end] in its clock.
func (p Process) Span(kind SpanKind, start, end int64) {
	r := p.r
	if end < start {
		return
	}
	switch {
	case !r.started:
		r.started, r.first, r.last, r.horizon = true, start, end, start
		r.count = 1
		r.attempts = append(r.attempts, newAttempt(1, start, end))
	case start < r.horizon:
		if r.settled.Total() > 0 {
			start = r.horizon // settled already: its earlier part is left out
			end = max(end, start)
		} else {
			r.first, r.horizon = start, start
		}
	}
	if start < r.first {
		r.first = start
	}
	r.last = max(r.last, end)
	a := r.attemptOf(p.st, p.proc, start)
	a.start = min(a.start, start)
	a.end = max(a.end, end)
	switch kind {
	case SpanCheckpointLoad, SpanCheckpointSave, SpanEvaluation:
		r.addInterval(interval{kind: kind, start: start, end: end})
	case SpanJob:
		a.jobsEnded[p.rank] = true
	}
}

func newAttempt(n int, start, end int64) *attempt {
	return &attempt{n: n, start: start, end: end, jobsEnded: map[int64]bool{}}
}

// current is the run's latest attempt.
func (r *Run) current() *attempt { return r.attempts[len(r.attempts)-1] }

// attemptOf is the attempt a span of a rank (st: nil when not kept) whose
// process is proc, starting at start, belongs to: a rank that comes back as
// a new process starts the next attempt (or joins it, when another rank
// started it); otherwise the latest attempt begun by then.
func (r *Run) attemptOf(st *rankState, proc string, start int64) *attempt {
	switch {
	case st == nil || proc == "":
		return r.byTime(start)
	case proc == st.proc:
		// Never before the attempt its process began: a job span starts
		// before the attempt's first span seen so far.
		a := r.byTime(start)
		for _, b := range r.attempts {
			if b.n == st.attempt && b.n > a.n {
				return b
			}
		}
		return a
	}
	if st.attempt == r.count {
		r.begin(start)
	}
	st.proc, st.attempt = proc, r.count
	return r.current()
}

// byTime is the latest attempt begun at or before t.
func (r *Run) byTime(t int64) *attempt {
	for i := len(r.attempts) - 1; i > 0; i-- {
		if r.attempts[i].start <= t {
			return r.attempts[i]
		}
	}
	return r.attempts[0]
}

// begin starts the next attempt at start. A stall still open ends there:
// the hung attempt sent nothing more, and its time until the relaunch is
// stalled time.
func (r *Run) begin(start int64) {
	prev := r.current()
	r.count++
	next := newAttempt(r.count, start, start)
	for _, s := range r.stalls {
		if s.open && s.attempt == prev.n {
			s.open, s.endedBy = false, next
			prev.stalledAtEnd = true
		}
	}
	r.attempts = append(r.attempts, next)
}

// Step feeds a decided step. A step that starts after the current attempt's
// latest step yet repeats an iteration it had begins the next attempt there
// (training restarted in the same processes).
func (r *Run) Step(s Step) {
	if !r.started || s.End <= s.Start {
		return
	}
	a := r.byTime(s.Start)
	if a == r.current() && a.hasStep && s.Iteration <= a.maxIter && s.Start >= a.lastStepEnd {
		r.begin(a.lastStepEnd)
		a = r.current()
	}
	if !a.hasStep {
		a.hasStep, a.firstStep, a.resume = true, s.Start, s.Iteration
		if a.n > 1 {
			// Where the attempt resumed is known now: the one before can
			// be settled (once its own last steps are decided).
			r.pending = append(r.pending, settlePoint{at: a.start})
		}
	}
	a.firstStep, a.resume = min(a.firstStep, s.Start), min(a.resume, s.Iteration)
	a.maxIter, a.lastStepEnd = max(a.maxIter, s.Iteration), max(a.lastStepEnd, s.End)
	r.lastStepStart = max(r.lastStepStart, s.Start)
	for _, st := range r.stalls {
		if st.open && st.resumed && st.attempt == a.n && s.Iteration >= st.iteration {
			st.open, st.until = false, max(s.End, st.since)
		}
	}
	r.steps = append(r.steps, stepRec{Step: s, duration: s.End - s.Start, attempt: a.n})
	if len(r.steps) > r.limits.Steps {
		r.settle(r.steps[len(r.steps)-r.limits.Steps].Start)
	}
}

// Stalled says the stall detector found the run stalled (behind or wedged)
// with iteration not completed: stalled time from the end of its last
// completed step.
func (r *Run) Stalled(iteration int64) {
	if !r.started {
		return
	}
	a := r.current()
	since := a.lastStepEnd
	if !a.hasStep {
		since = a.start
	}
	r.stalls = append(r.stalls, &stallRec{since: since, open: true, iteration: iteration, attempt: a.n})
}

// Resumed says the detector saw a step complete again: the stall ends with
// that step, once it is decided.
func (r *Run) Resumed() {
	for _, s := range r.stalls {
		if s.open {
			s.resumed = true
		}
	}
}

// Ended says every rank of the run's current attempt ended its job span.
func (r *Run) Ended() bool {
	if !r.started {
		return false
	}
	a := r.current()
	if len(a.jobsEnded) == 0 {
		return false
	}
	for rank, st := range r.ranks {
		if st.attempt == a.n && !a.jobsEnded[rank] {
			return false
		}
	}
	return true
}

// addInterval keeps a named span's interval, merged into the last one when
// they overlap (the ranks save together).
func (r *Run) addInterval(iv interval) {
	if iv.kind == SpanCheckpointSave {
		// A save preserves the steps before it: settle up to its end once
		// those are decided.
		r.pending = append(r.pending, settlePoint{at: iv.end, afterStep: true})
	}
	for i := len(r.intervals) - 1; i >= 0 && i >= len(r.intervals)-8; i-- {
		last := &r.intervals[i]
		if last.kind == iv.kind && iv.start <= last.end && iv.end >= last.start {
			last.start, last.end = min(last.start, iv.start), max(last.end, iv.end)
			return
		}
	}
	r.intervals = append(r.intervals, iv)
	if len(r.intervals) > r.limits.Intervals {
		r.settle(r.intervals[len(r.intervals)-r.limits.Intervals].start)
	}
}

// Due settles up to the points whose time has come at now: a point is
// noted with the span or step that makes it one, and due delay later, when
// the steps before it are decided.
func (r *Run) Due(now time.Time, delay time.Duration) {
	kept := r.pending[:0]
	for _, p := range r.pending {
		switch {
		case p.due.IsZero():
			p.due = now.Add(delay)
			kept = append(kept, p)
		case !now.Before(p.due) && !r.openStallBefore(p.at) && (!p.afterStep || r.lastStepStart >= p.at):
			r.settle(p.at)
		default:
			kept = append(kept, p)
		}
	}
	r.pending = kept
}

// openStallBefore: a stall still open began before t, so t cannot be
// settled (the stall may end anywhere after it).
func (r *Run) openStallBefore(t int64) bool {
	for _, s := range r.stalls {
		if s.open && s.since < t {
			return true
		}
	}
	return false
}

// End settles everything: the run is over (or the collector stops). A
// stall still open ends at the run's last span.
func (r *Run) End() {
	if !r.started {
		return
	}
	for _, s := range r.stalls {
		if s.open {
			s.open, s.until = false, max(r.last, s.since)
		}
	}
	r.settle(r.last)
	r.pending = r.pending[:0]
}
