// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/clock"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/goldentest"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
)

// goldenJob is the input of the step-point cases, in each of the four
// Megatron shapes (steps named megatron.train_step or
// megatron.train.iteration, each its own trace root or under the rank's
// run-long job span; the step metrics are the same in all four): two ranks
// of run golden-run, rank 0 sending nv.dl.rank as an int and rank 1 dl.rank as a string,
// iterations 1 to 3 of synchronous training with one micro-batch: both
// compute 100ms, rank 1 200ms on iteration 2, so that rank 0 waits 100ms
// longer in grad_sync.finish there; the gradient sync takes 20ms and the
// optimizer 30ms. Busy time is compute + optimizer: 130ms, and 230ms for
// rank 1 on iteration 2 (relative score 130/230 = 0.565, a straggler);
// every step lasts 150ms, 250ms on iteration 2.
func goldenJob(shape lensfixture.Shape) ptrace.Traces {
	run := lensfixture.Run{
		Ranks: []lensfixture.Rank{
			{Run: "golden-run", Rank: 0, WorldSize: 2},
			{Run: "golden-run", Rank: 1, WorldSize: 2, AsString: true, LegacyKeys: true},
		},
		Shape: shape,
		Step:  lensfixture.Step{Compute: 100 * time.Millisecond, GradSync: 20 * time.Millisecond, Optimizer: 30 * time.Millisecond, MicroBatches: 1},
		Compute: func(rank, iteration int64) time.Duration {
			if rank == 1 && iteration == 2 {
				return 200 * time.Millisecond
			}
			return 100 * time.Millisecond
		},
	}
	td := ptrace.NewTraces()
	for it := int64(1); it <= 3; it++ {
		run.Iteration(it).ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	}
	return td
}

func TestGoldenMetrics(t *testing.T) {
	for _, shape := range lensfixture.Shapes {
		t.Run(shape.String(), func(t *testing.T) {
			dir := filepath.Join("testdata", shapeDir(shape))
			goldentest.WriteInput(t, dir, func() ptrace.Traces { return goldenJob(shape) })
			cfg := createDefaultConfig().(*Config)
			cfg.Goodput = configoptional.None[GoodputConfig]() // its own cases (golden_goodput_test.go)
			require.NoError(t, cfg.Validate())
			f := newFactories(clock.Wall())
			goldentest.ProcessorToReceiver(t, f.processor(), f.receiver(), cfg, dir)
		})
	}
}
