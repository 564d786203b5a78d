// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoviewexporter

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
)

// TestAStepAsATimeline: a synchronous 4-rank run, rank 1 three times as
// slow on iteration 2; the collector kept the export rank's (3) steps and
// rank 1's slow step (as rank_strategy does, marked straggler). The
// timeline of iteration 2 has the straggler first with its spans, nested,
// its forward_backward three times the export rank's, then the export
// rank, then the median rank from its step metrics; the Chrome trace has
// a thread per rank and an event per span. All four shapes.
func TestAStepAsATimeline(t *testing.T) {
	for _, shape := range lensfixture.Shapes {
		t.Run(shape.String(), func(t *testing.T) {
			run := lensfixture.Run{Ranks: lensfixture.Fleet(lensfixture.Rank{Run: "run-tl", WorldSize: 4}), Shape: shape}
			run.Compute = func(rank, it int64) time.Duration {
				if rank == 1 && it == 2 {
					return 3 * lensfixture.DefaultStep.Compute
				}
				return lensfixture.DefaultStep.Compute
			}
			s := testStore(10, 10, 10)
			md := pmetric.NewMetrics()
			for it := int64(1); it <= 3; it++ {
				for _, rank := range run.Ranks {
					step := run.StepOf(rank.Rank, it)
					busy := (step.Compute + step.Optimizer).Seconds()
					stepPoints(md, "run-tl", rank.Rank, it, rank.Host(), busy, (step.Slowest+step.Optimizer).Seconds()/busy)
				}
			}
			s.addMetrics(md)
			td := ptrace.NewTraces()
			for it := int64(1); it <= 3; it++ {
				run.AppendStep(lensfixture.AppendResource(td, run.Ranks[3]), run.Ranks[3], it)
			}
			spans := lensfixture.AppendResource(td, run.Ranks[1])
			run.AppendStep(spans, run.Ranks[1], 2)
			for _, sp := range spans.All() {
				sp.Attributes().PutStr(attrkey.KeptReason, attrkey.KeptStraggler)
			}
			s.addTraces(td)

			tl, ok := s.timeline("run-tl", 2)
			require.True(t, ok)
			require.Len(t, tl.Rows, 3)
			straggler, export, median := tl.Rows[0], tl.Rows[1], tl.Rows[2]
			assert.Equal(t, []int64{1, 3}, []int64{straggler.Rank, export.Rank})
			assert.Equal(t, []string{"straggler", "export", "median"}, []string{straggler.Role, export.Role, median.Role})
			assert.True(t, median.FromStep)
			assert.Empty(t, median.Spans)
			assert.Len(t, straggler.Spans, lensfixture.SpansPerStep(2, false))
			assert.Len(t, export.Spans, lensfixture.SpansPerStep(2, false))
			fb := func(row timelineRow) timelineSpan {
				for _, sp := range row.Spans {
					if sp.Name == lensfixture.ForwardBackward {
						return sp
					}
				}
				t.Fatalf("rank %d: no %s", row.Rank, lensfixture.ForwardBackward)
				return timelineSpan{}
			}
			assert.InDelta(t, 3*(fb(export).EndMs-fb(export).StartMs), fb(straggler).EndMs-fb(straggler).StartMs, 0.01)
			assert.Equal(t, 1, fb(straggler).Depth, "under the step span")
			assert.Zero(t, straggler.Spans[0].StartMs, "from the step's start")
			assert.InDelta(t, export.StepMs, straggler.StepMs, 0.01, "synchronous: the steps end together")

			tr := tl.chromeTrace()
			threads, complete := map[int64]bool{}, 0
			for _, ev := range tr.TraceEvents {
				switch ev.Ph {
				case "M":
					if ev.Name == "thread_name" {
						threads[ev.Tid] = true
					}
				case "X":
					complete++
				}
			}
			assert.Len(t, threads, 3)
			assert.Equal(t, 2*lensfixture.SpansPerStep(2, false)+2, complete, "every span, and the median's busy and waiting")

			_, ok = s.timeline("run-tl", 99)
			assert.False(t, ok, "no step of that iteration")
		})
	}
}

// TestSpansOfNoStepMakeNoRun: spans of a run without a training loop (no
// step span: telemetrygen's, a data-prep job's) leave the pages as they
// were; its first step span puts it on them.
func TestSpansOfNoStepMakeNoRun(t *testing.T) {
	s := testStore(10, 10, 10)
	run := lensfixture.Run{Ranks: lensfixture.Fleet(lensfixture.Rank{Run: "run-no-steps", WorldSize: 1})}
	td := ptrace.NewTraces()
	run.AppendModelInit(lensfixture.AppendResource(td, run.Ranks[0]), run.Ranks[0])
	s.addTraces(td)
	assert.Empty(t, s.summaries())

	td = ptrace.NewTraces()
	run.AppendStep(lensfixture.AppendResource(td, run.Ranks[0]), run.Ranks[0], 1)
	s.addTraces(td)
	require.Len(t, s.summaries(), 1)
	assert.Equal(t, "run-no-steps", s.summaries()[0].ID)
}
