// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package rankstrategyprocessor

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/processor"

	"github.com/nemo-lens/otelcol-nemo/internal/clock"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/clocktest"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/goldentest"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
	"github.com/nemo-lens/otelcol-nemo/processor/rankstrategyprocessor/internal/metadata"
)

// goldenStragglerRun is the job of the straggler cases: 4 ranks of run
// golden-run (lensfixture.Fleet: ranks 1 and 3 send their identity as
// strings, ranks 2 and 3 in the dl.* spelling), iterations 1 to 3 of
// synchronous training with one micro-batch, a 20ms gradient sync and a
// 30ms optimizer. Ranks 0 and 3 compute 100ms on every step, rank 2 (the
// fastest GPU) 90ms; rank 1 computes 110ms, 220ms on iteration 2 and 180ms
// on iteration 3. Every step ends together, after the slowest compute:
// 160ms, 270ms and 230ms; the others wait for rank 1 in grad_sync.finish.
// Busy time (compute + optimizer: the step minus its grad_sync spans) is
// 130ms for ranks 0 and 3, 120ms for rank 2, and 140ms, 250ms and 210ms
// for rank 1.
func goldenStragglerRun(shape lensfixture.Shape) lensfixture.Run {
	return lensfixture.Run{
		Ranks: lensfixture.Fleet(lensfixture.Rank{Run: "golden-run", WorldSize: 4}),
		Shape: shape,
		Step:  lensfixture.Step{Compute: 100 * time.Millisecond, GradSync: 20 * time.Millisecond, Optimizer: 30 * time.Millisecond, MicroBatches: 1},
		Compute: func(rank, iteration int64) time.Duration {
			switch {
			case rank == 2:
				return 90 * time.Millisecond
			case rank != 1:
				return 100 * time.Millisecond
			case iteration == 2:
				return 220 * time.Millisecond
			case iteration == 3:
				return 180 * time.Millisecond
			default:
				return 110 * time.Millisecond
			}
		},
	}
}

// stragglerArrival is one batch of the straggler cases: the whole step of
// iteration (0: the job spans that end last) from each of ranks, and how
// much time passes after it.
type stragglerArrival struct {
	iteration int64
	ranks     []int64
	then      time.Duration
}

// The straggler cases' decision_wait, the default, and the buffer's tick
// for it.
const (
	goldenDecisionWait = 10 * time.Second
	goldenTick         = time.Second
)

// goldenStragglerArrivals: rank 2 is late, its step of every iteration
// comes a tick after the other ranks', so no step is complete until it
// arrives and each is decided at the tick after; it is also the fastest,
// so the scores say whether the step waited for it. Rank 0 never reports
// iteration 3: that step stays open until decision_wait after its first
// step span (batch 5, at 4s) and is decided by the tick at 15s. A rank's
// first batch also holds its megatron.model_init, and batch 7 every rank's
// megatron.train and megatron.pretrain, which end last; of the dropped
// ranks those belong to no step and are dropped.
var goldenStragglerArrivals = []stragglerArrival{
	{iteration: 1, ranks: []int64{0, 1, 3}, then: goldenTick},
	{iteration: 1, ranks: []int64{2}, then: goldenTick},
	{iteration: 2, ranks: []int64{0, 1, 3}, then: goldenTick},
	{iteration: 2, ranks: []int64{2}, then: goldenTick},
	{iteration: 3, ranks: []int64{1, 3}, then: goldenTick},
	{iteration: 3, ranks: []int64{2}, then: goldenDecisionWait},
	{iteration: 0, ranks: []int64{0, 1, 2, 3}},
}

// goldenStragglerBatches builds the batches of goldenStragglerArrivals, a
// resource per rank as ranks export them.
func goldenStragglerBatches(run lensfixture.Run) []ptrace.Traces {
	batches := make([]ptrace.Traces, len(goldenStragglerArrivals))
	started := map[int64]bool{}
	for i, a := range goldenStragglerArrivals {
		td := ptrace.NewTraces()
		for _, r := range a.ranks {
			rank := run.Ranks[r]
			spans := lensfixture.AppendResource(td, rank)
			if a.iteration == 0 {
				run.AppendJobEnd(spans, rank, 3)
				continue
			}
			if !started[r] {
				started[r] = true
				run.AppendModelInit(spans, rank)
			}
			run.AppendStep(spans, rank, a.iteration)
		}
		batches[i] = td
	}
	return batches
}

// onClock is the rank_strategy factory with the straggler buffer's clock
// set to clk, the one thing the golden cases cannot reach through
// NewFactory.
func onClock(clk clock.Clock) processor.Factory {
	return processor.NewFactory(metadata.Type, createDefaultConfig,
		processor.WithTraces(func(ctx context.Context, set processor.Settings, cfg component.Config, next consumer.Traces) (processor.Traces, error) {
			tp, _, err := newTracesProcessor(ctx, set, cfg.(*Config), next, clk)
			return tp, err
		}, metadata.TracesStability))
}

// Straggler retention with the defaults (single_rank on the last rank,
// thresholds 0.7, history 20, decision_wait 10s) on the four Megatron
// shapes, the same job in each. What comes out, and nothing else:
//   - rank 3, the export rank: every span as it came, unmarked.
//   - rank 1 on iteration 2: relative score 120/250 = 0.48 (rank 2's busy
//     time, which counts only because the step waited for the late rank;
//     without it 130/250 = 0.52) and individual score 140/250 = 0.56 (its
//     best recent busy time is iteration 1's), both below 0.7: its whole
//     step subtree, each span marked straggler with both scores.
//   - rank 1 on iteration 3, decided at decision_wait without rank 0:
//     relative 120/210 = 0.571, individual 140/210 = 0.667, kept the same
//     way. Rank 0 sent nothing of that step, so nothing of it is kept as
//     the last to report.
//   - not rank 1 on iteration 1: 120/140 = 0.857, individual 1 (its first
//     step); not ranks 0 (120/130 = 0.923) and 2 (1.0) on any step; not
//     the dropped ranks' model_init, train and pretrain, in no step.
func TestGoldenStragglers(t *testing.T) {
	for _, shape := range lensfixture.Shapes {
		t.Run(shape.String(), func(t *testing.T) {
			dir := filepath.Join("testdata", "stragglers_"+strings.NewReplacer("/", "_", ".", "_").Replace(shape.String()))
			goldentest.WriteBatches(t, dir, func() []ptrace.Traces { return goldenStragglerBatches(goldenStragglerRun(shape)) })
			cfg := createDefaultConfig().(*Config)
			cfg.Stragglers.GetOrInsertDefault().DecisionWait = goldenDecisionWait
			require.NoError(t, cfg.Validate())
			require.NoError(t, cfg.Stragglers.Get().Validate())
			clk := clocktest.NewFake()
			goldentest.Traces(t, onClock(clk), cfg, dir, goldentest.Batches(len(goldenStragglerArrivals), func(batch int) {
				clk.Advance(goldenStragglerArrivals[batch-1].then)
			}))
		})
	}
}
