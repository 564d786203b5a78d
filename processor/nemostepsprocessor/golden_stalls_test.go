// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/clocktest"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/goldentest"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
)

// stallArrival is one batch of a stall case and how long the clock runs
// after it (the processor ticks every second of it).
type stallArrival struct {
	td   func() ptrace.Traces
	then time.Duration
}

// goldenStallJob is the synchronous job of the stall cases: world ranks of
// run golden-stall, two a host (so that a host is easy to lose), every rank
// computing 100ms a step, 20ms of gradient sync and 30ms of optimizer.
func goldenStallJob(shape lensfixture.Shape, world int64) lensfixture.Run {
	return lensfixture.Run{
		Ranks: lensfixture.Fleet(lensfixture.Rank{Run: "golden-stall", WorldSize: world, GPUsPerNode: 2}),
		Shape: shape,
		Step:  lensfixture.Step{Compute: 100 * time.Millisecond, GradSync: 20 * time.Millisecond, Optimizer: 30 * time.Millisecond, MicroBatches: 1},
	}
}

// whole is iteration it of every rank of run, one resource a rank.
func whole(run lensfixture.Run, it int64) func() ptrace.Traces {
	return func() ptrace.Traces { return run.Iteration(it) }
}

// stalledIteration is the iteration the stall cases hang at.
const stalledIteration = 5

// hung is what run sends of stalledIteration when it hangs there: the ranks
// of roles play their role, every other rank blocks in the gradient
// all-reduce.
func hung(run lensfixture.Run, roles map[int64]lensfixture.HangRole) func() ptrace.Traces {
	return func() ptrace.Traces {
		td := ptrace.NewTraces()
		for _, rank := range run.Ranks {
			role, ok := roles[rank.Rank]
			if !ok {
				role = lensfixture.Blocked
			}
			run.AppendHungStep(lensfixture.AppendResource(td, rank), rank, stalledIteration, role)
		}
		return td
	}
}

// trainThenStall is four healthy iterations, a tick apart, then what the
// stalled iteration 5 sends, 8s of silence (a stall after min_stall 5s),
// then iteration 5 completed and 2s: the run resumes.
func trainThenStall(run lensfixture.Run, stalled func() ptrace.Traces) []stallArrival {
	var out []stallArrival
	for it := int64(1); it <= 4; it++ {
		out = append(out, stallArrival{td: whole(run, it), then: time.Second})
	}
	return append(out,
		stallArrival{td: stalled, then: 8 * time.Second},
		stallArrival{td: whole(run, 5), then: 2 * time.Second})
}

// The stall records and gauges (and the step points around them) of each
// kind of stall, with min_stall 5s. What each case must show:
//   - behind, in the four shapes: 4 ranks, rank 2 stops in its forward of
//     iteration 5, the others end their backward and block in grad sync: a
//     WARN nemo.run.stalled record of kind behind naming rank 2 and its
//     host, nemo.run.stalled 1 and nemo.rank.behind 1 for rank 2 while it
//     lasts; then a nemo.run.resumed record and both gauges at 0.
//   - lost_host: 4 ranks on 2 hosts, ranks 0 and 1 (all of the first host)
//     send nothing of iteration 5: culprits 0 and 1, lost host named.
//   - paused: every rank finished iteration 4 and none sends anything of 5
//     for 8s (a checkpoint): kind paused, nobody named, no rank behind.
//   - pipeline_stage: 4 stages of 4 micro-batches, 2 copies, the stage-2
//     rank of copy 1 (rank 5) stops in the forward of its third
//     micro-batch: stage 2 and rank 5 alone named.
func TestGoldenStalls(t *testing.T) {
	type stallCase struct {
		name     string
		arrivals []stallArrival
	}
	var cases []stallCase
	for _, shape := range lensfixture.Shapes {
		run := goldenStallJob(shape, 4)
		cases = append(cases, stallCase{
			name:     "stall_behind_" + shapeDir(shape),
			arrivals: trainThenStall(run, hung(run, map[int64]lensfixture.HangRole{2: lensfixture.Stopped})),
		})
	}
	run := goldenStallJob(ownRoot, 4)
	cases = append(cases,
		stallCase{
			name:     "stall_lost_host",
			arrivals: trainThenStall(run, hung(run, map[int64]lensfixture.HangRole{0: lensfixture.Dead, 1: lensfixture.Dead})),
		},
		stallCase{
			name:     "stall_paused",
			arrivals: trainThenStall(run, ptrace.NewTraces),
		})
	p := lensfixture.DefaultPipeline
	p.MicroBatches = 4 // enough for the stop in the third, and a smaller input
	pipe := lensfixture.PipelineJob{
		Run:      lensfixture.Run{Ranks: lensfixture.PipelineRanks(lensfixture.Rank{Run: "golden-pp", GPUsPerNode: 2}, p.Stages, 2), Shape: inJob},
		Pipeline: p, Replicas: 2,
	}
	pipeArrivals := make([]stallArrival, 0, 6)
	for it := int64(1); it <= 4; it++ {
		pipeArrivals = append(pipeArrivals, stallArrival{td: func() ptrace.Traces { return pipe.Iteration(it) }, then: time.Second})
	}
	pipeArrivals = append(pipeArrivals,
		stallArrival{td: func() ptrace.Traces {
			return pipe.HungIteration(5, 1, lensfixture.PipelineStop{Stage: 2, Op: p.ForwardOp(2, 2)})
		}, then: 8 * time.Second},
		stallArrival{td: func() ptrace.Traces { return pipe.Iteration(5) }, then: 2 * time.Second})
	cases = append(cases, stallCase{name: "stall_pipeline_stage", arrivals: pipeArrivals})

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join("testdata", tc.name)
			goldentest.WriteBatches(t, dir, func() []ptrace.Traces {
				out := make([]ptrace.Traces, len(tc.arrivals))
				for i, a := range tc.arrivals {
					out[i] = a.td()
				}
				return out
			})
			cfg := createDefaultConfig().(*Config)
			cfg.Stalls.Get().MinStall = 5 * time.Second
			cfg.Goodput = configoptional.None[GoodputConfig]() // its own cases (golden_goodput_test.go)
			require.NoError(t, cfg.Validate())
			clk := clocktest.NewFake()
			f := newFactories(clk)
			goldentest.ProcessorToReceiver(t, f.processor(), f.receiver(), cfg, dir, goldentest.Batches(len(tc.arrivals), func(batch int) {
				for range tc.arrivals[batch-1].then / time.Second {
					clk.Advance(time.Second)
				}
			}))
		})
	}
}

// shapeDir names a shape's case directory: train_step_in_job, ...
func shapeDir(s lensfixture.Shape) string {
	return strings.NewReplacer("/", "_", ".", "_").Replace(s.String())
}
