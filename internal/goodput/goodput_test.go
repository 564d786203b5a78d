// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package goodput

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// s is a time of the test runs in seconds, as Unix ns.
func s(sec float64) int64 { return int64(sec * 1e9) }

// job feeds a run like its ranks would: every span of world ranks of one
// process each (proc names the attempt), steps decided as they end.
type job struct {
	r     *Run
	world int64
	proc  string
}

func newJob(world int64) *job { return &job{r: NewRun(DefaultLimits), world: world, proc: "a"} }

func (j *job) span(kind SpanKind, from, to float64) {
	for rank := range j.world {
		j.r.Process(rank, j.proc+string(rune('0'+rank))).Span(kind, s(from), s(to))
	}
}

// steps runs iterations first.. each lasting dur from at, the slowest rank
// costing straggler of each; it returns when the last ends.
func (j *job) steps(first, last int64, at, dur, straggler float64) float64 {
	for it := first; it <= last; it++ {
		j.span(SpanPlain, at, at+dur) // the step's spans
		j.r.Step(Step{Iteration: it, Start: s(at), End: s(at + dur), Straggler: s(straggler), Slowest: 3})
		at += dur
	}
	return at
}

func seconds(t Times) map[string]float64 {
	out := map[string]float64{}
	for c, v := range t {
		if v != 0 {
			out[Category(c).String()] = float64(v) / 1e9
		}
	}
	return out
}

func assertTimes(t *testing.T, want map[string]float64, got Times) {
	t.Helper()
	g := seconds(got)
	assert.Len(t, g, len(want), "categories: %v", g)
	for c, w := range want {
		assert.InDelta(t, w, g[c], 1e-6, c)
	}
}

// A run without trouble: startup with a checkpoint load, steps with a
// straggler, a save, an evaluation; everything adds up to the wall time.
func TestRunWithoutTrouble(t *testing.T) {
	j := newJob(4)
	j.span(SpanPlain, 0, 10)         // model set-up
	j.span(SpanCheckpointLoad, 2, 6) // within the startup
	at := j.steps(1, 10, 10, 1, 0.1)
	j.span(SpanCheckpointSave, at, at+2)
	at = j.steps(11, 20, at+2, 1, 0.1)
	j.span(SpanEvaluation, at, at+1)
	at = j.steps(21, 30, at+1, 1, 0.1)
	j.span(SpanJob, 0, at)
	require.True(t, j.r.Ended())
	want := map[string]float64{"startup": 6, "checkpoint_load": 4, "productive": 27, "straggler": 3, "checkpoint_save": 2, "evaluation": 1}
	assertTimes(t, want, j.r.Snapshot(nil))
	assert.Equal(t, s(43), j.r.Wall())
	assert.Zero(t, j.r.Settled().Total(), "nothing settled before a save is due")

	j.r.Due(time.Unix(0, 0), 10*time.Second)
	j.r.Due(time.Unix(10, 0), 10*time.Second)
	settled := seconds(j.r.Settled())
	assert.InDelta(t, 22, j.r.Settled().Total()/1e9, 1e-6, "up to the save's end: %v", settled)
	assert.InDelta(t, 1, float64(j.r.RankStraggler()[3])/1e9, 1e-6, "rank 3 cost 0.1 s in each of the 10 preserved steps")

	j.r.End()
	assertTimes(t, want, j.r.Settled())
	assert.InDelta(t, 27.0/43, j.r.Settled().Goodput(), 1e-9)
	assert.InDelta(t, 3, float64(j.r.RankStraggler()[3])/1e9, 1e-6)
}

// A hang: the stall runs from the last completed step's end until the
// relaunch; the relaunch resumes from the checkpoint, so the steps after it
// were lost; its own startup and load are counted as such.
func TestHangThenRestartFromCheckpoint(t *testing.T) {
	j := newJob(4)
	j.span(SpanPlain, 0, 10)
	at := j.steps(1, 10, 10, 1, 0)
	j.span(SpanCheckpointSave, at, at+2) // after iteration 10: [20, 22]
	at = j.steps(11, 15, at+2, 1, 0)     // [22, 27]
	j.span(SpanPlain, at, at+0.5)        // iteration 16 began, and hung
	j.r.Stalled(16)
	j.r.Due(time.Unix(0, 0), time.Second)
	j.r.Due(time.Unix(5, 0), time.Second)
	assert.InDelta(t, 22, j.r.Settled().Total()/1e9, 1e-6, "settled up to the save")

	j.proc = "b" // relaunched: new processes
	j.span(SpanPlain, 40, 45)
	j.span(SpanCheckpointLoad, 41, 43)
	at = j.steps(11, 20, 45, 1, 0)
	// The relaunched job's run-long span started first and ends last: the
	// attempt began at its start, 38, and the stall ended there.
	j.span(SpanJob, 38, at)
	require.True(t, j.r.Ended())
	assert.Equal(t, 2, j.r.Attempts())
	want := map[string]float64{
		"startup": 10 + 5, "checkpoint_save": 2, "checkpoint_load": 2,
		"productive": 10 + 10, "lost_progress": 5, "stalled": 38 - 27,
	}
	assertTimes(t, want, j.r.Snapshot(nil))
	j.r.End()
	assertTimes(t, want, j.r.Settled())
	assert.Equal(t, j.r.Wall(), j.r.Settled().Total())
}

// An attempt that ended cleanly (not stalled) and the next one: the gap is
// restart time; nothing was redone, so nothing is lost.
func TestRestartAfterACleanEnd(t *testing.T) {
	j := newJob(2)
	j.span(SpanPlain, 0, 5)
	at := j.steps(1, 5, 5, 1, 0)
	j.span(SpanPlain, at, at+1) // the last spans of the attempt: [10, 11]
	j.proc = "b"
	j.span(SpanPlain, 30, 32)
	j.steps(6, 10, 32, 1, 0)
	assertTimes(t, map[string]float64{"startup": 5 + 2, "productive": 10, "other": 1, "restart": 19}, j.r.Snapshot(nil))
}

// A run stalled within an attempt (a rank stopped, then came back): the
// stall runs until the step that completes again ends; its partial
// iteration is stalled time.
func TestStallThatResumes(t *testing.T) {
	j := newJob(2)
	at := j.steps(1, 5, 0, 1, 0) // [0, 5]
	j.span(SpanPlain, at, at+0.3)
	j.r.Stalled(6)
	j.r.Resumed()
	j.steps(6, 6, 20, 1, 0) // iteration 6 completes at 21
	j.steps(7, 8, 21, 1, 0)
	assertTimes(t, map[string]float64{"productive": 7, "stalled": 16}, j.r.Snapshot(nil))
}

// An asynchronous save that overlaps training costs nothing: only where no
// step runs is a save blocking.
func TestAsynchronousSaveOverlappingSteps(t *testing.T) {
	j := newJob(2)
	at := j.steps(1, 5, 0, 2, 0)               // [0, 10]
	j.span(SpanCheckpointSave, at-2.5, at+0.5) // [7.5, 10.5]
	j.steps(6, 8, at+0.5, 2, 0)
	assertTimes(t, map[string]float64{"productive": 16, "checkpoint_save": 0.5}, j.r.Snapshot(nil))
}

// Training restarted in the same processes: the iteration goes back.
func TestRestartInTheSameProcesses(t *testing.T) {
	j := newJob(2)
	at := j.steps(1, 10, 0, 1, 0)
	j.span(SpanPlain, at, at+3) // reloading
	j.steps(6, 12, at+3, 1, 0)
	assert.Equal(t, 2, j.r.Attempts())
	assertTimes(t, map[string]float64{"productive": 5 + 7, "lost_progress": 5, "startup": 3}, j.r.Snapshot(nil))
}

// Past its limit of steps, the oldest are settled as preserved.
func TestStateIsBounded(t *testing.T) {
	r := NewRun(Limits{Steps: 10, Intervals: 10, Ranks: 2})
	j := &job{r: r, world: 4, proc: "a"}
	j.steps(1, 100, 0, 1, 0.5)
	assert.LessOrEqual(t, len(r.steps), 10)
	assert.InDelta(t, 90, float64(r.Settled().Total())/1e9, 1.0)
	assert.Equal(t, s(100), r.Snapshot(nil).Total(), "still adds up")
	assert.LessOrEqual(t, len(r.ranks), 2)
}

// A save is settled only once a step after it was decided: until then a
// stall may still begin at the step before it (the hang in the iteration
// after the save), which takes precedence over the save's end.
func TestSaveWaitsForTheNextStepBeforeSettling(t *testing.T) {
	j := newJob(2)
	at := j.steps(1, 10, 0, 1, 0)        // [0, 10]
	j.span(SpanCheckpointSave, at, at+2) // [10, 12]
	j.r.Due(time.Unix(0, 0), time.Second)
	j.r.Due(time.Unix(5, 0), time.Second)
	assert.Zero(t, j.r.Settled().Total(), "no step after the save yet")

	j.steps(11, 11, at+2, 1, 0) // [12, 13]
	j.r.Due(time.Unix(6, 0), time.Second)
	assert.InDelta(t, 12, j.r.Settled().Total()/1e9, 1e-6, "settled up to the save's end")
	assertTimes(t, map[string]float64{"productive": 10, "checkpoint_save": 2}, j.r.Settled())
}
