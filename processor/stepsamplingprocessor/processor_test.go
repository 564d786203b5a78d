// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stepsamplingprocessor

import (
	"fmt"
	"math"
	"testing"

	"github.com/open-telemetry/opentelemetry-collector-contrib/pkg/pdatatest/ptracetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
)

// The run of most tests and the iterations of 0..39 its 10% sample keeps
// (testdata/step-fractions.json).
const testRun = "job-7f3a9c1e2b4d"

func expectedKept(t *testing.T) []int64 {
	t.Helper()
	want := loadFractionVectors(t).Kept[testRun]
	require.NotEmpty(t, want)
	return want
}

func sampled(_, _ int64) string { return "sampled_step" }

// wantJobSpans are the spans outside steps of a training run, per rank,
// sorted as jobSpans sorts them.
var wantJobSpans = []string{lensfixture.ModelInit, lensfixture.Pretrain, lensfixture.SaveCheckpoint, lensfixture.Train}

func jobSpansOf(ranks int) []string {
	var out []string
	for _, n := range wantJobSpans {
		for range ranks {
			out = append(out, n)
		}
	}
	return out
}

func TestSampleRateKeepsTheSameStepsOnEveryRank(t *testing.T) {
	want := expectedKept(t)
	for _, sh := range lensfixture.Shapes {
		t.Run(sh.String(), func(t *testing.T) {
			h := newHarness(t, sampledConfig(0.1))
			h.send(t, training(jobOf(sh, ranksOf(testRun, 8)), 40, nil)...)

			seen := collect(h.sink)
			kept := keptSteps(t, seen, sampled)
			require.Len(t, kept, 8)
			for r := range int64(8) {
				assert.Equal(t, want, kept[r], "rank %d", r)
			}
			// Binomial(40, 0.1): more than 12 kept would happen less than once in 10^4 runs.
			assert.LessOrEqual(t, len(want), 12)
			assert.Equal(t, jobSpansOf(8), jobSpans(seen))
			for _, s := range seen {
				if s.kind == lensfixture.KindJob {
					assert.False(t, s.hasReason, "%s passes untouched", s.name)
				}
			}
			assert.Zero(t, h.heldSpans(), "the checkpoint span was passed on when the next step came")
		})
	}
}

func TestEveryKeepsIterationsDivisibleByIt(t *testing.T) {
	for _, sh := range lensfixture.Shapes {
		t.Run(sh.String(), func(t *testing.T) {
			cfg := createDefaultConfig().(*Config)
			cfg.Every = 10
			h := newHarness(t, cfg)
			h.send(t, training(jobOf(sh, ranksOf(testRun, 8)), 40, nil)...)
			kept := keptSteps(t, collect(h.sink), sampled)
			for r := range int64(8) {
				assert.Equal(t, []int64{0, 10, 20, 30}, kept[r], "rank %d", r)
			}
		})
	}
}

func TestErrorKeepsThatRankStepOnly(t *testing.T) {
	want := expectedKept(t)
	require.NotContains(t, want, int64(7))
	require.NotContains(t, want, int64(8))
	for _, sh := range lensfixture.Shapes {
		t.Run(sh.String(), func(t *testing.T) {
			h := newHarness(t, sampledConfig(0.1))
			h.send(t, training(jobOf(sh, ranksOf(testRun, 8)), 40, func(r lensfixture.Rank, it int64, spans ptrace.SpanSlice, from int) {
				switch {
				case r.Rank == 3 && it == 7:
					spanNamed(t, spans, from, lensfixture.Optimizer).Status().SetCode(ptrace.StatusCodeError)
				case r.Rank == 5 && it == 8:
					spanNamed(t, spans, from, lensfixture.ForwardBackward).Attributes().PutStr(attrkey.SpanTruncated, "true") // force-closed
				}
			})...)

			reason := func(rank, it int64) string {
				if (rank == 3 && it == 7) || (rank == 5 && it == 8) {
					return "error"
				}
				return "sampled_step"
			}
			kept := keptSteps(t, collect(h.sink), reason)
			for r := range int64(8) {
				exp := append([]int64(nil), want...)
				switch r {
				case 3:
					exp = insertSorted(exp, 7)
				case 5:
					exp = insertSorted(exp, 8)
				}
				assert.Equal(t, exp, kept[r], "rank %d", r)
			}
		})
	}
}

func insertSorted(s []int64, v int64) []int64 {
	for i, x := range s {
		if v < x {
			return append(s[:i], append([]int64{v}, s[i:]...)...)
		}
	}
	return append(s, v)
}

func TestStragglerStepsAreKept(t *testing.T) {
	want := expectedKept(t)
	require.NotContains(t, want, int64(12))
	for _, sh := range lensfixture.Shapes {
		t.Run(sh.String(), func(t *testing.T) {
			h := newHarness(t, sampledConfig(0.1))
			run := jobOf(sh, ranksOf(testRun, 8))
			batches := training(run, 40, nil)
			h.send(t, batches[:21]...)
			// rank_strategy drops rank 9 and passes its step 12 on whole,
			// marked, once it found it a straggler: after later steps.
			late := ptrace.NewTraces()
			straggler := lensfixture.Rank{Run: testRun, Rank: 9}
			spans := lensfixture.AppendResource(late, straggler)
			appendStep(spans, run, straggler, 12)
			for i := 0; i < spans.Len(); i++ {
				spans.At(i).Attributes().PutStr(attrkey.KeptReason, "straggler")
			}
			h.send(t, late)
			h.send(t, batches[21:]...)

			kept := keptSteps(t, collect(h.sink), func(rank, _ int64) string {
				if rank == 9 {
					return "straggler"
				}
				return "sampled_step"
			})
			assert.Equal(t, []int64{12}, kept[9])
			assert.Equal(t, want, kept[0])
		})
	}
}

func TestSpansBeforeTheirStepSpanAreDecidedWhenItComes(t *testing.T) {
	want := expectedKept(t)
	for _, sh := range lensfixture.Shapes {
		t.Run(sh.String(), func(t *testing.T) {
			h := newHarness(t, sampledConfig(0.1))
			run := jobOf(sh, ranksOf(testRun, 8))
			for it := range int64(40) {
				children, steps := ptrace.NewTraces(), ptrace.NewTraces()
				for _, r := range run.Ranks {
					appendStepChildren(lensfixture.AppendResource(children, r), run, r, it)
					appendStepSpan(lensfixture.AppendResource(steps, r), run, r, it)
				}
				before := h.sink.SpanCount()
				h.send(t, children)
				require.Equal(t, before, h.sink.SpanCount(), "iteration %d: children wait for their step span", it)
				require.Equal(t, 8*childCount, h.heldSpans())
				h.send(t, steps)
				require.Zero(t, h.heldSpans(), "iteration %d: decided when the step span came", it)
			}
			kept := keptSteps(t, collect(h.sink), sampled)
			for r := range int64(8) {
				assert.Equal(t, want, kept[r], "rank %d", r)
			}
		})
	}
}

func TestErrorInAnEarlierBatchKeepsTheStep(t *testing.T) {
	r := lensfixture.Rank{Run: testRun, Rank: 4}
	run := jobOf(inJob, []lensfixture.Rank{r})
	h := newHarness(t, sampledConfig(0.1))
	children, step := ptrace.NewTraces(), ptrace.NewTraces()
	spans := lensfixture.AppendResource(children, r)
	appendStepChildren(spans, run, r, 7)
	spans.At(1).Status().SetCode(ptrace.StatusCodeError)
	appendStepSpan(lensfixture.AppendResource(step, r), run, r, 7)
	h.send(t, children, step)
	kept := keptSteps(t, collect(h.sink), func(int64, int64) string { return "error" })
	assert.Equal(t, map[int64][]int64{4: {7}}, kept)
}

func TestManyStepsOfARankInOneBatch(t *testing.T) {
	want := expectedKept(t)
	for _, sh := range lensfixture.Shapes {
		t.Run(sh.String(), func(t *testing.T) {
			h := newHarness(t, sampledConfig(0.1))
			td := ptrace.NewTraces()
			run := jobOf(sh, ranksOf(testRun, 8))
			for _, r := range run.Ranks {
				spans := lensfixture.AppendResource(td, r)
				for it := range int64(40) {
					appendStep(spans, run, r, it)
				}
			}
			h.send(t, td)
			kept := keptSteps(t, collect(h.sink), sampled)
			for r := range int64(8) {
				assert.Equal(t, want, kept[r], "rank %d: every step placed, though the timeline remembers only a few", r)
			}
		})
	}
}

func TestRestartPicksTheSameSteps(t *testing.T) {
	want := expectedKept(t)
	batches := func() []ptrace.Traces { return training(jobOf(ownRoot, ranksOf(testRun, 8)), 40, nil) }
	first, second := newHarness(t, sampledConfig(0.1)), newHarness(t, sampledConfig(0.1))
	b := batches()
	first.send(t, b[:17]...)
	second.send(t, b[17:]...)
	merged := append(collect(first.sink), collect(second.sink)...)
	kept := keptSteps(t, merged, sampled)
	for r := range int64(8) {
		assert.Equal(t, want, kept[r], "rank %d: one run across a restart", r)
	}

	other := newHarness(t, sampledConfig(0.1))
	other.send(t, batches()...)
	assert.Equal(t, kept, keptSteps(t, collect(other.sink), sampled), "another collector picks the same steps")
}

func TestLateSpansFollowTheirStep(t *testing.T) {
	r := lensfixture.Rank{Run: testRun, Rank: 1}
	run := jobOf(inJob, []lensfixture.Rank{r})
	h := newHarness(t, sampledConfig(0.1))
	for _, it := range []int64{7, 8} {
		td := ptrace.NewTraces()
		spans := lensfixture.AppendResource(td, r)
		appendStep(spans, run, r, it)
		if it == 8 {
			spans.At(0).Status().SetCode(ptrace.StatusCodeError)
		}
		h.send(t, td)
	}
	require.Equal(t, stepSpans, h.sink.SpanCount(), "step 8 kept for its error, step 7 dropped")

	// An asynchronous span of each step, ending after its step span.
	late := ptrace.NewTraces()
	spans := lensfixture.AppendResource(late, r)
	for _, it := range []int64{7, 8} {
		appendAsyncSpan(spans, run, r, it)
	}
	h.send(t, late)
	var lateSeen []seenSpan
	for _, s := range collect(h.sink) {
		if s.idx == asyncIndex {
			lateSeen = append(lateSeen, s)
		}
	}
	require.Len(t, lateSeen, 1)
	assert.Equal(t, int64(8), lateSeen[0].it)
	assert.Equal(t, "error", lateSeen[0].reason, "follows its step, kept for an error")
}

func TestDefaultConfigPassesEverythingUnchanged(t *testing.T) {
	for _, sh := range lensfixture.Shapes {
		t.Run(sh.String(), func(t *testing.T) {
			h := newHarness(t, createDefaultConfig().(*Config))
			batches := training(jobOf(sh, ranksOf(testRun, 8)), 40, func(r lensfixture.Rank, it int64, spans ptrace.SpanSlice, from int) {
				if r.Rank == 2 && it == 3 {
					spans.At(from).Status().SetCode(ptrace.StatusCodeError)
				}
			})
			var want []ptrace.Traces
			for _, td := range batches {
				c := ptrace.NewTraces()
				td.CopyTo(c)
				want = append(want, c)
			}
			h.send(t, batches...)
			got := h.sink.AllTraces()
			require.Len(t, got, len(want))
			for i := range want {
				require.NoError(t, ptracetest.CompareTraces(want[i], got[i]))
			}
			assert.False(t, h.tp.Capabilities().MutatesData, "keeping every step reads nothing and changes nothing")
		})
	}
}

func TestSampledOutStepOfEveryRankDropsTheBatch(t *testing.T) {
	h := newHarness(t, sampledConfig(0))
	h.send(t, training(jobOf(inJob, ranksOf(testRun, 2)), 3, nil)[1])
	assert.Zero(t, h.sink.SpanCount())
	assert.Empty(t, h.sink.AllTraces(), "an empty batch is not passed on")
}

func TestResourcesWithoutARankPassUntouched(t *testing.T) {
	h := newHarness(t, sampledConfig(0))
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", "dataloader")
	appendStep(rs.ScopeSpans().AppendEmpty().Spans(), jobOf(inJob, nil), lensfixture.Rank{}, 3)
	want := ptrace.NewTraces()
	td.CopyTo(want)
	h.send(t, td)
	require.Len(t, h.sink.AllTraces(), 1)
	require.NoError(t, ptracetest.CompareTraces(want, h.sink.AllTraces()[0]))
}

func TestFractionOfSpansKept(t *testing.T) {
	// The volume arithmetic of the README: with sample_rate 0.01 about 1%
	// of step spans leave; checked over many runs so that it is not luck.
	h := newHarness(t, sampledConfig(0.01))
	for run := range 200 {
		h.send(t, training(jobOf(ownRoot, ranksOf(fmt.Sprintf("run-%d", run), 2)), 40, nil)...)
	}
	steps := 0
	for _, s := range collect(h.sink) {
		if s.kind == lensfixture.KindStep {
			steps++
		}
	}
	total := 200 * 2 * 40
	frac := float64(steps/stepSpans) / float64(total)
	assert.InDelta(t, 0.01, frac, 5*math.Sqrt(0.01*0.99/float64(200*40)), "rank steps kept, of %d", total)
}
