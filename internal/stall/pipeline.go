// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stall // import "github.com/nemo-lens/otelcol-nemo/internal/stall"

// Under pipeline parallelism the data-parallel wavefront is not enough: a
// stage that stops leaves its whole pipeline waiting (the later stages in
// their receives of its forwards, the earlier ones in their receives of
// its backwards), so every rank of that copy of the model lags the other
// copies, which finish their backward and wait in grad sync. The spans
// tell which stage stopped first from how far each stage got: a stage runs
// Megatron-LM's non-interleaved 1F1B schedule, so the micro-batch
// forwards and backwards it ended say which compute comes next, and
// whether its input has arrived (the previous stage ended that forward,
// the next stage that backward). Every stage that waits lacks its input;
// the stage that stopped had it. So the stopped stage is the one stage
// whose next compute's input was there.
//
// A stage blocked in a send (its output not taken because its neighbor
// stopped, or the link between them did) also looks as if its input was
// there: a stage whose last output its neighbor has not computed is only
// a suspect; it is named when it is the one candidate, or when it is the
// one that is not a suspect. Everything else is not named: two stages
// that both had their input (the two ends of a transfer that never
// completes), a stage of the stalled copy whose stage is not known, ranks
// of one stage that disagree on the number of micro-batches, counts that
// break the schedule's dependencies (another schedule, or two stops).

// PipelineStop is what the spans tell of a stalled pipeline-parallel run.
type PipelineStop struct {
	// Stages is the run's pipeline size (0: not pipeline-parallel).
	Stages int
	// Stage is the stage that stopped first, when Found.
	Stage int
	Found bool
	// Waiting is how many ranks of the stopped copies of the pipeline wait
	// for it (their other stages), when Found.
	Waiting int
	// Forwards and Backwards are the micro-batch computes of the iteration
	// the stage ended, of MicroBatches, when Found.
	Forwards, Backwards, MicroBatches int
}

// stageProgress is one stage of the stalled copy: the fewest micro-batch
// forwards and backwards its ranks inside their forward_backward ended.
type stageProgress struct {
	forwards, backwards int
	seen                bool
}

// pipelineStop finds the stage of the open iteration that stopped first,
// and its ranks (those still inside their forward_backward).
func (r *RunState) pipelineStop(open int64, progress func(*rankState) Phase) (PipelineStop, map[int64]bool) {
	stages := 0
	for _, st := range r.ranks {
		stages = max(stages, st.Stages)
	}
	stop := PipelineStop{Stages: stages}
	if stages < 2 || stages > 1<<14 {
		return stop, nil
	}
	inside := func(st *rankState) bool { return !st.restarted && progress(st) < PhaseComputeDone }
	progresses := make([]stageProgress, stages)
	microbatches := 0
	for _, st := range r.ranks {
		if !inside(st) {
			continue
		}
		if st.stepIteration+1 != open || st.stage < 0 || st.microbatch == 0 ||
			microbatches > 0 && int(st.microbatch) != microbatches {
			return stop, nil // a rank of the stalled copy the spans cannot place
		}
		microbatches = int(st.microbatch)
		p := &progresses[st.stage]
		if !p.seen {
			*p = stageProgress{forwards: int(st.Forwards), backwards: int(st.Backwards), seen: true}
			continue
		}
		p.forwards, p.backwards = min(p.forwards, int(st.Forwards)), min(p.backwards, int(st.Backwards))
	}
	if microbatches == 0 {
		return stop, nil // every rank is past its forward_backward: not a pipeline stop
	}
	for j := range progresses {
		if !progresses[j].seen {
			// Every rank of the stage is past its forward_backward: the
			// later stages finish when the stopped one took all they send.
			progresses[j] = stageProgress{forwards: microbatches, backwards: microbatches, seen: true}
		}
	}
	stage, ok := stoppedStage(progresses, microbatches)
	if !ok {
		return stop, nil
	}
	stopped := map[int64]bool{}
	waiting := 0
	for rank, st := range r.ranks {
		switch {
		case !inside(st):
		case int(st.stage) == stage:
			stopped[rank] = true
		default:
			waiting++
		}
	}
	stop.Stage, stop.Found, stop.Waiting = stage, true, waiting
	stop.Forwards, stop.Backwards, stop.MicroBatches = progresses[stage].forwards, progresses[stage].backwards, microbatches
	return stop, stopped
}

// stoppedStage is the stage whose next compute had its input, of a
// pipeline whose stages got as far as progresses say with m micro-batches
// per step.
func stoppedStage(progresses []stageProgress, m int) (int, bool) {
	last := len(progresses) - 1
	for j, p := range progresses {
		// Every stage of a stalled copy is stuck inside its schedule, and
		// a micro-batch goes forward before it comes back.
		switch {
		case p.backwards > p.forwards, p.forwards > m:
			return 0, false
		case j > 0 && (p.forwards > progresses[j-1].forwards || p.backwards < progresses[j-1].backwards):
			return 0, false
		}
	}
	var candidates, sure []int
	for j, p := range progresses {
		f, b := p.forwards, p.backwards
		warmup := min(last-j, m)
		var ready, lastForward bool
		switch {
		case f < warmup || f < m && f-warmup <= b: // next: forward f
			ready = j == 0 || progresses[j-1].forwards > f
		case b < m: // next: backward b
			ready = j == last || progresses[j+1].backwards > b
		}
		if !ready {
			continue
		}
		candidates = append(candidates, j)
		lastForward = f-warmup > b || b == 0 && f > 0
		// Its last output not computed by the neighbor it went to: it may
		// be blocked sending it.
		sending := lastForward && j < last && progresses[j+1].forwards < f ||
			!lastForward && b > 0 && j > 0 && progresses[j-1].backwards < b
		if !sending {
			sure = append(sure, j)
		}
	}
	switch {
	case len(candidates) == 1:
		return candidates[0], true
	case len(sure) == 1:
		return sure[0], true
	}
	return 0, false
}
