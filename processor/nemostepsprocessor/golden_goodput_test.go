// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/clocktest"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/goldentest"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
)

// goodputAttempts are the two attempts of the goodput cases' run: 4 ranks
// of golden-goodput, two a host, computing 100ms a step (rank 1 200ms on
// iterations 2 and 3: a straggler), 20ms of gradient sync and 30ms of
// optimizer, a step starting every second from 5s after the job's start.
// The relaunch 60s later has new processes (pids).
func goodputAttempts(shape lensfixture.Shape) (first, second lensfixture.Run) {
	first = lensfixture.Run{
		Ranks: lensfixture.Fleet(lensfixture.Rank{Run: "golden-goodput", WorldSize: 4, GPUsPerNode: 2}),
		Shape: shape,
		Step:  lensfixture.Step{Compute: 100 * time.Millisecond, GradSync: 20 * time.Millisecond, Optimizer: 30 * time.Millisecond, MicroBatches: 1},
		Compute: func(rank, iteration int64) time.Duration {
			if rank == 1 && (iteration == 2 || iteration == 3) {
				return 200 * time.Millisecond
			}
			return 100 * time.Millisecond
		},
	}
	second = first
	second.Start = lensfixture.DefaultStart.Add(time.Minute)
	second.Ranks = make([]lensfixture.Rank, len(first.Ranks))
	for i, r := range first.Ranks {
		r.PID = 20000 + int32(r.Rank)
		second.Ranks[i] = r
	}
	return first, second
}

// perRank builds a batch of every rank of run, appending what add says.
func perRank(run lensfixture.Run, add func(ptrace.SpanSlice, lensfixture.Rank)) func() ptrace.Traces {
	return func() ptrace.Traces {
		td := ptrace.NewTraces()
		for _, rank := range run.Ranks {
			add(lensfixture.AppendResource(td, rank), rank)
		}
		return td
	}
}

// The goodput of a run with every category, in the four Megatron shapes,
// with stall detection at min_stall 5s and the record only at the run's
// end (interval 1h). The first attempt sets up (model_init, loading a
// checkpoint), trains iterations 1 to 5 (rank 1 straggles on 2 and 3),
// saves a checkpoint after 3 and evaluates after 4, and wedges in 6: every
// rank blocks in the gradient all-reduce. The relaunch a minute later
// loads the checkpoint of iteration 3, trains 4 to 7 and ends. So:
// startup is each attempt's time before its first step less the load,
// iterations 4 and 5 of the first attempt are lost progress, stalled runs
// from iteration 5's end to the relaunch's first span (its job span, which
// starts first and ends last), and each step's straggler time is rank 1's
// busy time over the median rank's.
func TestGoldenGoodput(t *testing.T) {
	for _, shape := range lensfixture.Shapes {
		t.Run(shape.String(), func(t *testing.T) {
			first, second := goodputAttempts(shape)
			setUp := func(run lensfixture.Run) func() ptrace.Traces {
				return perRank(run, func(spans ptrace.SpanSlice, rank lensfixture.Rank) {
					run.AppendModelInit(spans, rank)
					run.AppendCheckpointLoad(spans, rank)
				})
			}
			step := func(run lensfixture.Run, it int64) func() ptrace.Traces {
				return perRank(run, func(spans ptrace.SpanSlice, rank lensfixture.Rank) {
					run.AppendStep(spans, rank, it)
					switch it {
					case 3:
						run.AppendCheckpoint(spans, rank, it)
					case 4:
						run.AppendEvaluation(spans, rank, it)
					}
				})
			}
			wedged := perRank(first, func(spans ptrace.SpanSlice, rank lensfixture.Rank) {
				first.AppendHungStep(spans, rank, 6, lensfixture.Blocked)
			})
			arrivals := []stallArrival{{td: setUp(first), then: time.Second}}
			for it := int64(1); it <= 5; it++ {
				arrivals = append(arrivals, stallArrival{td: step(first, it), then: time.Second})
			}
			arrivals = append(arrivals, stallArrival{td: wedged, then: 8 * time.Second}, stallArrival{td: setUp(second), then: time.Second})
			for it := int64(4); it <= 7; it++ {
				arrivals = append(arrivals, stallArrival{td: step(second, it), then: time.Second})
			}
			arrivals = append(arrivals, stallArrival{
				td:   perRank(second, func(spans ptrace.SpanSlice, rank lensfixture.Rank) { second.AppendJobEnd(spans, rank, 7) }),
				then: 15 * time.Second,
			})

			dir := filepath.Join("testdata", "goodput_"+shapeDir(shape))
			goldentest.WriteBatches(t, dir, func() []ptrace.Traces {
				out := make([]ptrace.Traces, len(arrivals))
				for i, a := range arrivals {
					out[i] = a.td()
				}
				return out
			})
			cfg := createDefaultConfig().(*Config)
			cfg.Stalls.Get().MinStall = 5 * time.Second
			cfg.Goodput.Get().Interval = time.Hour
			require.NoError(t, cfg.Validate())
			clk := clocktest.NewFake()
			f := newFactories(clk)
			goldentest.ProcessorToReceiver(t, f.processor(), f.receiver(), cfg, dir, goldentest.Batches(len(arrivals), func(batch int) {
				for range arrivals[batch-1].then / time.Second {
					clk.Advance(time.Second)
				}
			}))
		})
	}
}
