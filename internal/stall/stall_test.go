// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stall

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A step's spans in the order a rank ends them, with where in the step each
// ends (a share of the step's duration). Synchronous training: every rank's
// step of an iteration starts and ends together.
var stepOrder = []struct {
	name string
	at   float64
}{
	{"megatron.microbatch.forward", 0.3},
	{"megatron.microbatch.backward", 0.6},
	{"megatron.forward_backward", 0.65},
	{"megatron.grad_sync.start", 0.7},
	{"megatron.grad_sync.finish", 0.9},
	{"megatron.optimizer_step", 0.95},
	{"megatron.train_step", 1},
}

const exportDelay = 5 * time.Second // the SDKs' batch span processor

var t0 = time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC)

// job feeds a detector synchronous steps of world ranks, 4 ranks a host.
type job struct {
	d     *Detector
	r     *RunState
	world int
	now   time.Time // the step clock: the next step starts here
}

func newJob(world int) *job {
	d := New(defaultConfig)
	return &job{d: d, r: d.NewRun(1, t0), world: world, now: t0}
}

func (*job) rank(r int64) Rank {
	return Rank{Rank: r, Host: fmt.Sprintf("node-%d", r/4), Process: fmt.Sprintf("pid-%d", r)}
}

// step runs iteration it, lasting dur. The ranks in stopAt stop: each ends
// only the spans before its phase (PhaseNone: nothing at all). Then, as in a
// synchronous job, every other rank blocks in the gradient all-reduce: it
// ends its compute and grad_sync.start, while grad_sync.finish, the
// optimizer and the step stay open and never arrive.
func (j *job) step(it int64, dur time.Duration, stopAt map[int64]Phase) {
	start := j.now
	for _, s := range stepOrder {
		end := start.Add(time.Duration(float64(dur) * s.at))
		spanStart := start.Add(time.Duration(float64(dur) * s.at / 2))
		if s.name == "megatron.train_step" || s.name == "megatron.forward_backward" || s.name == "megatron.microbatch.forward" {
			spanStart = start
		}
		phase := PhaseOf(s.name)
		if s.name == "megatron.train_step" {
			phase = PhaseStep
		}
		for r := range int64(j.world) {
			stop, stopped := stopAt[r]
			if stopped && phase >= stop || len(stopAt) > 0 && phase > PhaseGradSyncStarted {
				continue
			}
			info := Span{Name: s.name, Start: spanStart.UnixNano(), End: end.UnixNano()}
			if s.name == "megatron.train_step" {
				info.Step, info.Iteration = true, it
			}
			j.d.Rank(j.r, j.world, j.rank(r), end.Add(exportDelay)).Span(info)
		}
	}
	j.now = start.Add(dur)
}

// tickUntil ticks every second up to at and returns every event.
func (j *job) tickUntil(at time.Time) []Event {
	var events []Event
	for now := j.now; !now.After(at); now = now.Add(time.Second) {
		ev, _ := judge(j.d, now, j.r)
		events = append(events, ev...)
	}
	j.now = at
	return events
}

func TestHungRankIsBehind(t *testing.T) {
	j := newJob(8)
	for it := range int64(5) {
		j.step(it, 2*time.Second, nil)
	}
	// Rank 5 stops in iteration 5 before its backward: its forward ended;
	// the others finish backward and block in grad sync (the finish, the
	// optimizer and the step never end).
	hangAt := j.now
	j.step(5, 2*time.Second, map[int64]Phase{5: PhaseBackward})
	events := j.tickUntil(hangAt.Add(2 * time.Minute))
	require.Len(t, events, 1)
	ev := events[0]
	assert.True(t, ev.Stalled)
	assert.Equal(t, Behind, ev.Kind)
	assert.Equal(t, int64(5), ev.Iteration)
	assert.Equal(t, []int64{5}, ev.Ranks())
	assert.Equal(t, []string{"node-1"}, ev.Hosts())
	assert.Empty(t, ev.LostHosts, "node-1's other ranks are not behind")
	assert.Equal(t, "megatron.microbatch.forward", ev.Culprits[0].LastSpan)
	assert.Equal(t, 7, ev.OthersCount)
	assert.Equal(t, "megatron.grad_sync.start", ev.Others, "the others ended the all-reduce's start and wait in its finish")
	// Detected after stall_after (60s: 10 x 2s is less) of silence since the
	// last step arrived, within one tick.
	assert.InDelta(t, 60.5, ev.For.Seconds(), 0.5)
}

// Every rank stops together inside the gradient all-reduce: each ended its
// compute and grad_sync.start, none grad_sync.finish. Nobody lags, yet this
// is no pause: the collective never completes. Kind wedged, nobody named.
func TestWedgedCollective(t *testing.T) {
	j := newJob(8)
	for it := range int64(5) {
		j.step(it, 2*time.Second, nil)
	}
	// Rank 0 ends what comes before grad_sync.finish, as every other rank
	// does when one stops: all of them block in the all-reduce.
	j.step(5, 2*time.Second, map[int64]Phase{0: PhaseGradSyncDone})
	events := j.tickUntil(j.now.Add(2 * time.Minute))
	require.Len(t, events, 1)
	ev := events[0]
	assert.True(t, ev.Stalled)
	assert.Equal(t, Wedged, ev.Kind)
	assert.Empty(t, ev.Culprits)
	assert.Equal(t, 8, ev.OthersCount)
	assert.Equal(t, "megatron.grad_sync.start", ev.Others)

	// An even pause with the same ranks (nothing of the next iteration) is
	// still paused: the collective rule needs every rank inside one.
	p := newJob(8)
	for it := range int64(5) {
		p.step(it, 2*time.Second, nil)
	}
	events = p.tickUntil(p.now.Add(2 * time.Minute))
	require.Len(t, events, 1)
	assert.Equal(t, Paused, events[0].Kind)
}

func TestDeadRankAndLostHost(t *testing.T) {
	j := newJob(8)
	for it := range int64(4) {
		j.step(it, time.Second, nil)
	}
	// node-0 (ranks 0-3) dies between steps: it sends nothing more.
	j.step(4, time.Second, map[int64]Phase{0: PhaseNone, 1: PhaseNone, 2: PhaseNone, 3: PhaseNone})
	events := j.tickUntil(j.now.Add(90 * time.Second))
	require.Len(t, events, 1)
	ev := events[0]
	assert.Equal(t, Behind, ev.Kind)
	assert.Equal(t, []int64{0, 1, 2, 3}, ev.Ranks())
	assert.Equal(t, []string{"node-0"}, ev.LostHosts)
	for _, c := range ev.Culprits {
		assert.Empty(t, c.LastSpan, "rank %d sent nothing of iteration 4", c.Rank.Rank)
	}
}

func TestEvenPauseIsPausedNotBehind(t *testing.T) {
	j := newJob(8)
	for it := range int64(10) {
		j.step(it, time.Second, nil)
	}
	// A checkpoint save: every rank finished iteration 9, none starts 10
	// for three minutes.
	events := j.tickUntil(j.now.Add(3 * time.Minute))
	require.Len(t, events, 1)
	assert.Equal(t, Paused, events[0].Kind)
	assert.Empty(t, events[0].Culprits)
	assert.Equal(t, int64(10), events[0].Iteration)
	assert.True(t, j.r.Stalled(), "kept by its caller while stalled")

	// Training resumes: the next step ends the stall.
	j.step(10, time.Second, nil)
	events = j.tickUntil(j.now.Add(10 * time.Second))
	require.Len(t, events, 1)
	assert.False(t, events[0].Stalled)
	assert.Greater(t, events[0].For, 3*time.Minute)
	_, stalled := judge(j.d, j.now, j.r)
	assert.Empty(t, stalled)
	assert.False(t, j.r.Stalled(), "its caller may forget it")
}

func TestNotFooled(t *testing.T) {
	t.Run("step times varying by 50%", func(t *testing.T) {
		j := newJob(4)
		for it := range int64(200) {
			dur := 10 * time.Second
			if it%3 == 0 {
				dur = 15 * time.Second
			}
			j.step(it, dur, nil)
			assert.Empty(t, j.tickUntil(j.now), "iteration %d", it)
		}
	})
	t.Run("no stall before 3 steps", func(t *testing.T) {
		j := newJob(4)
		j.step(0, time.Second, nil)
		j.step(1, time.Second, nil)
		assert.Empty(t, j.tickUntil(j.now.Add(10*time.Minute)))
		j.step(2, time.Second, nil)
		assert.Len(t, j.tickUntil(j.now.Add(2*time.Minute)), 1)
	})
	t.Run("a run that ended", func(t *testing.T) {
		j := newJob(4)
		for it := range int64(5) {
			j.step(it, time.Second, nil)
		}
		for r := range int64(4) {
			j.d.Rank(j.r, 4, j.rank(r), j.now).Span(Span{Name: "megatron.pretrain", Job: true, Start: t0.UnixNano(), End: j.now.UnixNano()})
		}
		assert.Empty(t, j.tickUntil(j.now.Add(10*time.Minute)))
	})
	t.Run("a restarted rank that reports again", func(t *testing.T) {
		j := newJob(4)
		for it := range int64(5) {
			j.step(it, time.Second, nil)
		}
		// Rank 2 stops in iteration 5, then a new process of it reports its
		// start-up while the others wait.
		j.step(5, time.Second, map[int64]Phase{2: PhaseForward})
		restarted := j.rank(2)
		restarted.Process = "pid-2-restarted"
		j.d.Rank(j.r, 4, restarted, j.now).Span(Span{Name: "megatron.model_init", Start: j.now.UnixNano(), End: j.now.UnixNano()})
		events := j.tickUntil(j.now.Add(2 * time.Minute))
		require.Len(t, events, 1)
		assert.Equal(t, Paused, events[0].Kind, "the restarted rank is not a culprit once it reports")
	})
}

func TestStallAfterFollowsTheMedianStep(t *testing.T) {
	j := newJob(2)
	for it := range int64(25) {
		j.step(it, 30*time.Second, nil) // median 30s: stall_after 300s
	}
	assert.Empty(t, j.tickUntil(j.now.Add(4*time.Minute)), "4 minutes is not a stall for 30s steps")
	events := j.tickUntil(j.now.Add(2 * time.Minute))
	require.Len(t, events, 1)
	assert.InDelta(t, 300, events[0].For.Seconds(), 1.5)
}

func TestPhaseOf(t *testing.T) {
	for name, want := range map[string]Phase{
		"megatron.microbatch.forward":     PhaseForward,
		"megatron.layer.self_attention":   PhaseForward,
		"megatron.p2p.recv_forward":       PhaseForward,
		"megatron.microbatch.backward":    PhaseBackward,
		"megatron.p2p.send_backward":      PhaseBackward,
		"megatron.forward_backward":       PhaseComputeDone,
		"megatron.grad_sync.start":        PhaseGradSyncStarted,
		"megatron.grad_sync.finish":       PhaseGradSyncDone,
		"megatron.optimizer_step":         PhaseOptimizer,
		"megatron.data.get_batch":         PhaseOther,
		"megatron.train.iteration_report": PhaseOther,
	} {
		assert.Equal(t, want, PhaseOf(name), name)
	}
}

// defaultConfig is the presets' defaults.
var defaultConfig = Config{MinStall: DefaultMinStall, Factor: DefaultFactor, WarmupSteps: DefaultWarmupSteps, History: DefaultHistory}

// judge judges runs at now as the detector's caller does: run by run,
// then in the runs' order.
func judge(d *Detector, now time.Time, runs ...*RunState) ([]Event, []Status) {
	var events []Event
	var stalled []Status
	for _, r := range runs {
		events, stalled = d.Judge(r, now, events, stalled)
	}
	SortByRun(events, stalled)
	return events, stalled
}
