// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package stall finds stalled training runs, live, from the spans the ranks
// already send, and names the ranks that stopped.
//
// A synchronous job stops as a whole when one rank stops: every other rank
// finishes its compute and blocks in the next collective (the gradient
// all-reduce), so no rank completes a step any more. The ranks' SDKs keep
// exporting the spans that ended before the hang (their batch processors
// run on a thread of their own); the spans still open (the step, the waits)
// never arrive. So the wavefront is visible: the ranks that finished their
// backward pass and wait in grad sync tell apart the rank that never
// finished its forward.
//
// A run is stalled when no rank of it has completed a step for longer than
// max(MinStall, Factor x the median of its last History step durations),
// judged only once it completed WarmupSteps steps (compilation and warm-up
// make the first steps long). The culprits are the ranks whose progress in
// the iteration that did not complete lags the others' (kind behind), a
// rank that sent nothing since the last completed step among them; when
// nobody lags (a checkpoint save, an evaluation, a pause between steps) the
// kind is paused and nobody is named. A step's completion ends the stall.
//
// Under pipeline parallelism a stage that stops leaves its whole copy of
// the model behind the others; the micro-batch spans each stage ended tell
// which stage stopped first, where they tell it (pipeline.go), and then
// its ranks are the culprits.
//
// The package is pure: its caller (the nemo_steps connector) reads ranks and
// spans, feeds them here, and calls Tick on its ticker.
package stall // import "github.com/nemo-lens/otelcol-nemo/internal/stall"

import (
	"cmp"
	"math"
	"slices"
	"strings"
	"time"
)

// Defaults of Config.
const (
	DefaultMinStall    = 60 * time.Second
	DefaultFactor      = 10.0
	DefaultWarmupSteps = 3
	DefaultHistory     = 20
)

// Config says when a run counts as stalled.
type Config struct {
	// MinStall is the shortest silence that counts as a stall.
	MinStall time.Duration
	// Factor times the run's median step duration is the silence that
	// counts as a stall when that is longer than MinStall.
	Factor float64
	// WarmupSteps is how many steps a run must complete before it can stall.
	WarmupSteps int
	// History is how many recent step durations the median is taken over.
	History int
}

// Kind is what a stall looks like.
type Kind string

const (
	// Behind: some ranks lag the others in the iteration that did not
	// complete (or sent nothing since the last completed step).
	Behind Kind = "behind"
	// Paused: every rank got as far as the others (a checkpoint, an
	// evaluation, a pause between steps); nobody is to blame.
	Paused Kind = "paused"
	// Wedged: every rank stopped together inside a collective: each one's
	// latest span of the open iteration starts a collective (the gradient
	// all-reduce's start, a point-to-point send or receive) and none ended
	// what would finish it. A collective that never completes: a network
	// or NCCL fault, not a pause. Nobody is to blame either.
	Wedged Kind = "wedged"
)

// Rank is one rank of a run as its spans tell it.
type Rank struct {
	Rank int64
	// Host is the rank's host.name.
	Host string
	// Process tells a restarted rank (a new process with the same rank)
	// from the one before: service.instance.id or the pid.
	Process string
	// Stages is the run's pipeline-parallel size the rank reports (0 or
	// 1: no pipeline parallelism).
	Stages int
}

// Culprit is a rank named by a stall.
type Culprit struct {
	Rank
	// LastSpan is the latest span of the open iteration the rank ended, in
	// step order ("" when it sent nothing since the last completed step),
	// and LastEnd when it ended.
	LastSpan string
	LastEnd  time.Time
}

// Run identifies a run (and worker group): the caller's hash of its
// attributes (internal/steps' Rank.Group).
type Run = uint64

// Event is a change of a run's state: a stall began, or it ended.
type Event struct {
	Run Run
	// Stalled is true for a stall's start, false for its end (resumed).
	Stalled bool
	Kind    Kind
	// Iteration is the one that did not complete.
	Iteration int64
	// For is how long no step had completed (at a stall's start), or how
	// long the stall lasted (at its end).
	For time.Duration
	// Culprits are the lagging ranks, by rank; empty when paused.
	Culprits []Culprit
	// LostHosts are hosts all of whose known ranks are culprits: a lost node.
	LostHosts []string
	// Others is the latest span in step order that every rank but the
	// culprits ended (what they wait after), and OthersCount how many they are.
	Others      string
	OthersCount int
	// World is the run's world size.
	World int
	// Pipeline is what the spans tell of a pipeline-parallel run
	// (pipeline.go): the stage that stopped first, when they tell it.
	Pipeline PipelineStop
}

// Hosts are the culprits' hosts, sorted, each once.
func (e Event) Hosts() []string {
	var hosts []string
	for _, c := range e.Culprits {
		if c.Host != "" && !slices.Contains(hosts, c.Host) {
			hosts = append(hosts, c.Host)
		}
	}
	slices.Sort(hosts)
	return hosts
}

// Ranks are the culprits' rank numbers.
func (e Event) Ranks() []int64 {
	ranks := make([]int64, len(e.Culprits))
	for i, c := range e.Culprits {
		ranks[i] = c.Rank.Rank
	}
	return ranks
}

// Status is a run's state for the gauges, at every tick.
type Status struct {
	Run     Run
	Stalled bool
	Kind    Kind
	// For is how long it has been stalled.
	For      time.Duration
	Culprits []int64
}

// Detector judges runs by their ranks' progress. It keeps nothing of a run
// itself: the caller keeps each run's RunState (NewRun) with whatever else
// it knows of the run, feeds it (Rank), judges it (Judge) and forgets it
// under its own rule, keeping it while it is Stalled.
type Detector struct {
	cfg Config
}

// New returns a detector.
func New(cfg Config) *Detector {
	return &Detector{cfg: cfg}
}

// RunState is what the detector knows of one run.
type RunState struct {
	id    Run
	world int
	ranks map[int64]*rankState
	// lastDone is the highest completed iteration, doneAt when the
	// collector saw a rank complete a step last.
	lastDone  int64
	doneAt    time.Time
	completed int
	durations []time.Duration // ring of the last History step durations
	next      int
	// stall is the open stall, begun when doneAt was stalledSince.
	stall        *Event
	stalledSince time.Time
}

// NewRun is the state of run id, first heard of at now.
func (*Detector) NewRun(id Run, now time.Time) *RunState {
	return &RunState{id: id, ranks: map[int64]*rankState{}, lastDone: -1, doneAt: now}
}

// Stalled says the run is in a stall that has not ended: its caller keeps
// it, however long it has sent nothing.
func (r *RunState) Stalled() bool { return r.stall != nil }

type rankState struct {
	Rank
	// stepIteration and stepEnd (unix ns) are its last step span's.
	stepIteration int64
	stepEnd       int64
	// Progress is what it ended in the next iteration (stepIteration+1),
	// from the spans that began after its last step ended. The spans of a
	// step other than the step span carry no iteration; in a hang the step
	// span never arrives, so where they fall in time is what places them.
	Progress
	// Pipeline parallelism (pipeline.go): the rank's stage (-1: not known
	// yet) and the forwards of its last step (0: unknown, or not the
	// step's micro-batches).
	stage      int16
	microbatch uint16
	// restarted marks a new process that has reported since.
	restarted bool
	jobEnded  bool
}

func (r *RunState) rankOf(id Rank) *rankState {
	st := r.ranks[id.Rank]
	if st == nil {
		st = &rankState{Rank: id, stepIteration: -1, stage: -1}
		r.ranks[id.Rank] = st
	}
	if id.Process != "" && st.Process != "" && id.Process != st.Process {
		st.restarted = true
	}
	if id.Process != "" {
		st.Process = id.Process
	}
	if id.Host != "" {
		st.Host = id.Host
	}
	st.Stages = max(st.Stages, id.Stages)
	return st
}

// Tracker is one rank's state, for a caller that feeds several spans of
// one rank (a resource's) without looking it up for each.
type Tracker struct {
	d   *Detector
	r   *RunState
	st  *rankState
	now time.Time
}

// Rank looks a rank of run r up (creating it; world: the world size the
// rank reports, 0 when none) for the spans that arrived at now, the
// collector's clock.
func (d *Detector) Rank(r *RunState, world int, id Rank, now time.Time) Tracker {
	r.world = max(r.world, world)
	return Tracker{d: d, r: r, st: r.rankOf(id), now: now}
}

// Span feeds one ended span of the tracker's rank.
func (tr Tracker) Span(span Span) {
	d, r, st, now := tr.d, tr.r, tr.st, tr.now
	switch {
	case span.Job:
		st.jobEnded = true
	case span.Step:
		if span.Iteration >= st.stepIteration || st.restarted {
			if span.Forwards > 0 {
				// An agent's step summary: the forwards it counted.
				st.Forwards = clampCount(span.Forwards)
			}
			st.stepIteration, st.stepEnd = span.Iteration, span.End
			// The step's micro-batches, unless the step says otherwise (an
			// interleaved schedule runs each micro-batch once per model
			// chunk): a stage's schedule depends on them.
			st.microbatch = st.Forwards
			if span.MicroBatches > 0 && span.MicroBatches != int(st.Forwards) {
				st.microbatch = 0
			}
			st.NextIteration()
		}
		r.stepDone(st, span.Iteration, time.Duration(span.End-span.Start), now, d.cfg.History)
	case span.Start >= st.stepEnd && span.Beat:
		st.beat(span.Name, span.End, span.Forwards, span.Backwards)
	case span.Start >= st.stepEnd:
		st.Add(span.Name, span.End)
	}
}

// NeedsStage says the rank is in a pipeline-parallel run and its stage is
// not known yet: the caller reads it from the span's attributes
// (SetStage).
func (tr Tracker) NeedsStage() bool { return tr.st.stage < 0 && tr.st.Stages > 1 }

// Pipelined says the rank is in a pipeline-parallel run: the caller reads
// its step spans' micro-batch count (Span.MicroBatches).
func (tr Tracker) Pipelined() bool { return tr.st.Stages > 1 }

// SetStage sets the rank's pipeline stage; one outside the run's stages
// is ignored.
func (tr Tracker) SetStage(stage int64) {
	if stage >= 0 && stage < int64(tr.st.Stages) {
		tr.st.stage = int16(stage)
	}
}

// Span is what the detector reads of an ended span.
type Span struct {
	Name string
	// Start and End are the span's timestamps, Unix nanoseconds (as pdata
	// has them).
	Start, End int64
	// Step: the step span, numbered Iteration, of MicroBatches
	// micro-batches when it says so (0: it does not).
	Step         bool
	Iteration    int64
	MicroBatches int
	// Job: the rank's run-long job span (megatron.pretrain, ...): the run
	// is over for the rank.
	Job bool
	// From an agent that summarized the rank (internal/stepsummary): Beat,
	// a progress beat: the span is the latest the rank ended in the
	// iteration after its last step, and Forwards and Backwards are the
	// micro-batch computes it ended in that iteration. A step summary's
	// Forwards are the micro-batch forwards the rank ended in the step.
	Beat                bool
	Forwards, Backwards int64
}

// stepDone counts a completed step. A step of an iteration already counted
// (another rank's, arriving later) changes nothing, unless a restarted rank
// sends it: a job restarted from a checkpoint counts from there again.
func (r *RunState) stepDone(st *rankState, iteration int64, d time.Duration, now time.Time, history int) {
	if iteration <= r.lastDone && !st.restarted {
		return
	}
	r.doneAt = now
	r.lastDone = iteration
	r.completed++
	if history <= 0 {
		return
	}
	if len(r.durations) < history {
		r.durations = append(r.durations, d)
		return
	}
	r.durations[r.next] = d
	r.next = (r.next + 1) % history
}

// stallAfter is the silence that makes the run stalled.
func (d *Detector) stallAfter(r *RunState) time.Duration {
	if len(r.durations) == 0 {
		return d.cfg.MinStall
	}
	sorted := slices.Clone(r.durations)
	slices.Sort(sorted)
	median := sorted[len(sorted)/2]
	return max(d.cfg.MinStall, time.Duration(float64(median)*d.cfg.Factor))
}

// Judge judges run r at now: it appends to events the stall that began or
// ended since its last judgement, and to stalled the run's state while it
// is stalled (for the gauges). A caller judging several runs sorts both by
// run (SortByRun) for an output in a stable order.
func (d *Detector) Judge(r *RunState, now time.Time, events []Event, stalled []Status) ([]Event, []Status) {
	switch {
	case r.stall != nil && r.doneAt.After(r.stalledSince):
		ended := *r.stall
		ended.Stalled, ended.For = false, r.doneAt.Sub(r.stalledSince)
		events = append(events, ended)
		r.stall = nil
	case r.stall == nil && d.stalls(r, now):
		ev := d.judge(r, now)
		r.stall, r.stalledSince = &ev, r.doneAt
		events = append(events, ev)
	}
	if r.stall != nil {
		stalled = append(stalled, Status{Run: r.id, Stalled: true, Kind: r.stall.Kind, For: now.Sub(r.doneAt), Culprits: r.stall.Ranks()})
	}
	return events, stalled
}

// SortByRun orders what Judge found over several runs by run.
func SortByRun(events []Event, stalled []Status) {
	slices.SortFunc(events, func(a, b Event) int { return cmp.Compare(a.Run, b.Run) })
	slices.SortFunc(stalled, func(a, b Status) int { return cmp.Compare(a.Run, b.Run) })
}

func (d *Detector) stalls(r *RunState, now time.Time) bool {
	if r.completed < d.cfg.WarmupSteps || r.ended() {
		return false
	}
	return now.Sub(r.doneAt) > d.stallAfter(r)
}

// ended: every known rank's job span ended.
func (r *RunState) ended() bool {
	if len(r.ranks) == 0 {
		return false
	}
	for _, st := range r.ranks {
		if !st.jobEnded {
			return false
		}
	}
	return true
}

// wedged says every rank of the world is in the open iteration with a
// collective started as its latest span (the gradient all-reduce's start, a
// point-to-point transfer) and none finished the all-reduce.
func (r *RunState) wedged(open int64, world int) bool {
	if world == 0 || len(r.ranks) < world {
		return false
	}
	for _, st := range r.ranks {
		if st.restarted || st.stepIteration+1 != open || !startsCollective(st.Name) {
			return false
		}
	}
	return true
}

// startsCollective: the span ends when a collective has started, not when
// it completed.
func startsCollective(name string) bool {
	return name == "megatron.grad_sync.start" || strings.HasPrefix(name, "megatron.p2p.") || strings.HasPrefix(name, "megatron.pp.")
}

// judge finds the wavefront of the iteration after the last completed one
// and, in a pipeline-parallel run, the stage that stopped first.
func (*Detector) judge(r *RunState, now time.Time) Event {
	open := r.lastDone + 1
	world := max(r.world, len(r.ranks))
	ev := Event{Run: r.id, Stalled: true, Iteration: open, For: now.Sub(r.doneAt), World: world}
	progress := func(st *rankState) Phase {
		switch {
		case st == nil || st.stepIteration+1 < open:
			return PhaseNone // it did not even finish the last step
		case st.stepIteration >= open:
			return PhaseStep
		}
		return st.Phase
	}
	front := PhaseNone
	for _, st := range r.ranks {
		front = max(front, progress(st))
	}
	behind := func(_ int64, st *rankState) bool { return progress(st) < front }
	var stopped map[int64]bool
	if ev.Pipeline, stopped = r.pipelineStop(open, progress); ev.Pipeline.Found {
		// The stage's ranks, not the whole copy of the model that waits
		// for them.
		behind = func(rank int64, _ *rankState) bool { return stopped[rank] }
	}
	hostRanks := map[string]int{}
	for _, st := range r.ranks {
		hostRanks[st.Host]++
	}
	culpritsOf := map[string]int{}
	for rank := range int64(world) {
		st := r.ranks[rank]
		if st != nil && st.restarted {
			continue // a new process of the rank that reported: recovering, not stopped
		}
		if behind(rank, st) {
			c := Culprit{Rank: Rank{Rank: rank}}
			if st != nil {
				c.Rank = st.Rank
				if st.stepIteration+1 == open && st.Name != "" {
					c.LastSpan, c.LastEnd = st.Name, time.Unix(0, st.End).UTC()
				}
			}
			ev.Culprits = append(ev.Culprits, c)
			culpritsOf[c.Host]++
		}
	}
	if len(ev.Culprits) == 0 {
		ev.Kind = Paused
		if r.wedged(open, world) {
			ev.Kind = Wedged
			ev.OthersCount = world
			for rank := range int64(world) { // the lowest rank's: deterministic
				if st := r.ranks[rank]; st != nil {
					ev.Others = st.Name
					break
				}
			}
		}
		return ev
	}
	ev.Kind = Behind
	for host, n := range culpritsOf {
		if host != "" && n == hostRanks[host] {
			ev.LostHosts = append(ev.LostHosts, host)
		}
	}
	slices.Sort(ev.LostHosts)
	ev.OthersCount = world - len(ev.Culprits)
	for rank := range int64(world) {
		if st := r.ranks[rank]; st != nil && progress(st) == front && !behind(rank, st) {
			ev.Others = st.Name // the lowest such rank's: deterministic
			break
		}
	}
	return ev
}

// Progress is how far a rank got in the iteration after its last step, as
// the spans it ended show it. The detector keeps one per rank; an agent
// that summarizes a rank for its gateway keeps one too and sends it as a
// progress beat (internal/stepsummary), which the gateway's detector takes
// in place of the spans.
type Progress struct {
	// Name and End are the latest span in step order (by Phase, then by
	// end time); "" before any.
	Name  string
	End   int64
	Phase Phase
	// Forwards and Backwards count the micro-batch computes ended (pipeline
	// parallelism: pipeline.go); lastCompute is when the last counted one
	// ended, so that a batch sent twice is counted once.
	Forwards, Backwards uint16
	lastCompute         int64
}

// Add feeds one span the rank ended after its last step; it reports
// whether the span is now the latest in step order.
func (p *Progress) Add(name string, end int64) (latest bool) {
	pl := placeOf(name)
	latest = p.reach(pl, end)
	if pl.compute != notCompute && end > p.lastCompute {
		p.lastCompute = end
		if pl.compute == forwardCompute {
			p.Forwards++
		} else {
			p.Backwards++
		}
	}
	return latest
}

// beat takes an agent's progress beat: the latest span it names, and the
// counts of the iteration so far.
func (p *Progress) beat(name string, end, forwards, backwards int64) {
	p.reach(placeOf(name), end)
	p.Forwards = max(p.Forwards, clampCount(forwards))
	p.Backwards = max(p.Backwards, clampCount(backwards))
	p.lastCompute = max(p.lastCompute, end)
}

// reach makes a span ending at end in place pl the latest when it is, and
// says whether it is.
func (p *Progress) reach(pl place, end int64) bool {
	if pl.phase > p.Phase || pl.phase == p.Phase && end > p.End {
		p.Phase, p.Name, p.End = pl.phase, pl.name, end
		return true
	}
	return false
}

// NextIteration starts the next iteration, after a step span: nothing of it
// ended yet.
func (p *Progress) NextIteration() {
	*p = Progress{lastCompute: p.lastCompute}
}

func clampCount(n int64) uint16 { return uint16(min(max(n, 0), math.MaxUint16)) }
