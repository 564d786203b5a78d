// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package goodput // import "github.com/nemo-lens/otelcol-nemo/internal/goodput"

import (
	"cmp"
	"slices"
)

// Snapshot is the run's time so far by category: the settled time, and the
// rest classified as if it were settled (steps not preserved yet count as
// done); it adds up to the wall time. With ranks, it also adds every rank's
// straggler time so far to ranks.
func (r *Run) Snapshot(ranks map[int64]int64) Times {
	t := r.settled
	if !r.started {
		return t
	}
	if ranks != nil {
		for rank, v := range r.stragglerBy {
			ranks[rank] += v
		}
	}
	open := r.account(r.horizon, r.last, ranks)
	for c := range t {
		t[c] += open[c]
	}
	return t
}

// settle counts the time up to to (it can no longer change category) and
// forgets what ended by then.
func (r *Run) settle(to int64) {
	if !r.started || to <= r.horizon {
		return
	}
	t := r.account(r.horizon, to, r.stragglerBy)
	for c := range t {
		r.settled[c] += t[c]
	}
	r.horizon = to
	r.steps = slices.DeleteFunc(r.steps, func(s stepRec) bool { return s.End <= to })
	r.intervals = slices.DeleteFunc(r.intervals, func(iv interval) bool { return iv.end <= to })
	r.stalls = slices.DeleteFunc(r.stalls, func(s *stallRec) bool { return !s.open && s.end(to) <= to })
	for len(r.attempts) > 1 && r.attempts[0].end <= to && r.attempts[1].start <= to {
		r.attempts = r.attempts[1:]
	}
	r.pending = slices.DeleteFunc(r.pending, func(p settlePoint) bool { return p.at <= to })
}

// end is when the stall ends: it runs to now (to) while open.
func (s *stallRec) end(now int64) int64 {
	switch {
	case s.open:
		return now
	case s.endedBy != nil:
		return max(s.endedBy.start, s.since)
	}
	return s.until
}

// The precedence of the stretches a run's time is made of, first wins;
// time in none of them is other.
const (
	prioStalled uint8 = iota
	prioStep
	prioLoad
	prioSave
	prioEvaluation
	prioStartup
	prioRestart
	numPrios
)

var prioCategory = [numPrios]Category{
	prioStalled: Stalled, prioLoad: CheckpointLoad, prioSave: CheckpointSave,
	prioEvaluation: Evaluation, prioStartup: Startup, prioRestart: Restart,
}

// piece is one stretch: a step (step is its index in r.steps) or a stretch
// of one category.
type piece struct {
	start, end int64
	prio       uint8
	step       int32
}

type edge struct {
	at    int64
	piece int32
	open  bool
}

// account classifies [from, to) by precedence and returns the time of each
// category; charge, when not nil, gets each rank's straggler time.
func (r *Run) account(from, to int64, charge map[int64]int64) Times {
	var t Times
	if to <= from {
		return t
	}
	pieces := r.pieces(to)
	edges := make([]edge, 0, 2*len(pieces))
	for i, p := range pieces {
		s, e := max(p.start, from), min(p.end, to)
		if e <= s {
			continue
		}
		edges = append(edges, edge{at: s, piece: int32(i), open: true}, edge{at: e, piece: int32(i)})
	}
	slices.SortFunc(edges, func(a, b edge) int { return cmp.Compare(a.at, b.at) })

	var counts [numPrios]int
	var steps []int32 // the steps running, latest last
	visible := make([]int64, len(r.steps))
	at := from
	for i := 0; i <= len(edges); i++ {
		next := to
		if i < len(edges) {
			next = edges[i].at
		}
		if d := next - at; d > 0 {
			switch p := top(&counts); p {
			case numPrios:
				t[Other] += d
			case prioStep:
				visible[pieces[steps[len(steps)-1]].step] += d
			default:
				t[prioCategory[p]] += d
			}
			at = next
		}
		if i == len(edges) {
			break
		}
		e := edges[i]
		p := pieces[e.piece]
		if e.open {
			counts[p.prio]++
			if p.prio == prioStep {
				steps = append(steps, e.piece)
			}
			continue
		}
		counts[p.prio]--
		if p.prio == prioStep {
			steps = slices.DeleteFunc(steps, func(j int32) bool { return j == e.piece })
		}
	}

	for i, v := range visible {
		if v == 0 {
			continue
		}
		s := &r.steps[i]
		if r.lost(s) {
			t[LostProgress] += v
			continue
		}
		str := min(int64(float64(s.Straggler)*float64(v)/float64(s.duration)), v)
		t[Straggler] += str
		t[Productive] += v - str
		if charge != nil && str > 0 {
			if _, ok := charge[s.Slowest]; ok || len(charge) < r.limits.Ranks {
				charge[s.Slowest] += str
			}
		}
	}
	return t
}

// top is the first precedence with a stretch running, numPrios for none.
func top(counts *[numPrios]int) uint8 {
	for p := range numPrios {
		if counts[p] > 0 {
			return p
		}
	}
	return numPrios
}

// lost says a later attempt redid the step's iteration.
func (r *Run) lost(s *stepRec) bool {
	for _, a := range r.attempts {
		if a.n > s.attempt && a.hasStep && a.resume <= s.Iteration {
			return true
		}
	}
	return false
}

// pieces are every stretch known up to to (an open stall runs to it).
func (r *Run) pieces(to int64) []piece {
	out := make([]piece, 0, len(r.steps)+len(r.intervals)+len(r.stalls)+2*len(r.attempts))
	for _, s := range r.stalls {
		out = append(out, piece{start: s.since, end: s.end(to), prio: prioStalled, step: -1})
	}
	for i := range r.steps {
		out = append(out, piece{start: r.steps[i].Start, end: r.steps[i].End, prio: prioStep, step: int32(i)})
	}
	for _, iv := range r.intervals {
		prio := prioEvaluation
		switch iv.kind {
		case SpanCheckpointLoad:
			prio = prioLoad
		case SpanCheckpointSave:
			prio = prioSave
		}
		out = append(out, piece{start: iv.start, end: iv.end, prio: prio, step: -1})
	}
	for i, a := range r.attempts {
		startupEnd := a.end
		if a.hasStep {
			startupEnd = a.firstStep
		}
		out = append(out, piece{start: a.start, end: startupEnd, prio: prioStartup, step: -1})
		if i+1 < len(r.attempts) && !a.stalledAtEnd {
			out = append(out, piece{start: a.end, end: r.attempts[i+1].start, prio: prioRestart, step: -1})
		}
	}
	return out
}
