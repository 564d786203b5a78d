// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package lensfixture

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
)

// computes counts a stage's ended micro-batch forwards and backwards.
func computes(sp StagePlan) (forwards, backwards int) {
	for _, s := range sp.Spans {
		switch {
		case s.Open:
		case s.Name == MicrobatchForward:
			forwards++
		case s.Name == MicrobatchBack:
			backwards++
		}
	}
	return forwards, backwards
}

// ended is when the stage ended micro-batch mb's span name (false: never).
func ended(sp StagePlan, name string, mb int) (time.Duration, bool) {
	for _, s := range sp.Spans {
		if s.Name == name && s.Microbatch == mb && !s.Open {
			return s.To, true
		}
	}
	return 0, false
}

// A healthy step runs 1F1B: every stage runs every micro-batch's forward
// and backward, stage j runs min(stages-j, m) forwards before its first
// backward, a forward starts after the previous stage's forward of it
// ended and a backward after the next stage's backward of it, and both
// ends of a transfer end together.
func TestPipelineSchedule(t *testing.T) {
	for _, stages := range []int{1, 2, 4, 8} {
		for _, m := range []int{1, stages, 3 * stages} {
			p := Pipeline{Stages: stages, MicroBatches: m, Forward: 3 * time.Millisecond, Backward: 5 * time.Millisecond, Transfer: time.Millisecond}
			plans := p.Simulate(nil)
			name := fmt.Sprintf("pp%d_m%d", stages, m)
			for j, sp := range plans {
				require.True(t, sp.Done, name)
				f, b := computes(sp)
				assert.Equal(t, [2]int{m, m}, [2]int{f, b}, name)
				first := 0
				for _, s := range sp.Spans {
					if s.Name == MicrobatchBack {
						break
					}
					if s.Name == MicrobatchForward {
						first++
					}
				}
				assert.Equal(t, min(stages-j, m), first, "%s stage %d: forwards before the first backward", name, j)
				for mb := range m {
					for _, s := range sp.Spans {
						if s.Microbatch != mb {
							continue
						}
						switch {
						case s.Name == MicrobatchForward && j > 0:
							prev, _ := ended(plans[j-1], MicrobatchForward, mb)
							assert.GreaterOrEqual(t, s.From, prev, "%s stage %d forward %d", name, j, mb)
						case s.Name == MicrobatchBack && j < stages-1:
							next, _ := ended(plans[j+1], MicrobatchBack, mb)
							assert.GreaterOrEqual(t, s.From, next, "%s stage %d backward %d", name, j, mb)
						case s.Name == SendForward:
							at, ok := ended(plans[j+1], RecvForward, mb)
							assert.True(t, ok && at == s.To, "%s: stage %d's send of forward %d and its receipt end together", name, j, mb)
						case s.Name == SendBackward:
							at, ok := ended(plans[j-1], RecvBackward, mb)
							assert.True(t, ok && at == s.To, "%s: stage %d's send of backward %d and its receipt end together", name, j, mb)
						}
					}
				}
			}
		}
	}
}

// A stage that stops blocks the pipeline: it ends exactly the operations
// before its stop, the stages before it never finish, and the counts keep
// the schedule's dependencies (no stage ran a forward its previous stage
// did not, nor a backward its next stage did not).
func TestPipelineStop(t *testing.T) {
	p := DefaultPipeline
	for stage := range p.Stages {
		for op := range p.PipelineOps(stage) {
			plans := p.Simulate(&PipelineStop{Stage: stage, Op: op})
			name := fmt.Sprintf("stage %d op %d", stage, op)
			before := 0
			for i := range op {
				if p.Compute(stage, i) {
					before++
				}
			}
			f, b := computes(plans[stage])
			assert.Equal(t, before, f+b, name)
			assert.False(t, plans[stage].Done, name)
			for j := range stage {
				assert.False(t, plans[j].Done, "%s: stage %d finished without the stopped stage's backwards", name, j)
			}
			for j := 1; j < p.Stages; j++ {
				fj, bj := computes(plans[j])
				fi, bi := computes(plans[j-1])
				assert.LessOrEqual(t, fj, fi, name)
				assert.LessOrEqual(t, bi, bj, name)
			}
			// Its stopped operation stays open: a compute, or one or two
			// transfers with one neighbor.
			var open []PipeSpan
			for _, s := range plans[stage].Spans {
				if s.Open {
					open = append(open, s)
				}
			}
			if p.Compute(stage, op) {
				assert.Len(t, open, 1, name)
			} else {
				assert.Len(t, p.Peers(stage, op), 1, name)
				assert.NotEmpty(t, open, name)
				assert.LessOrEqual(t, len(open), 2, name)
			}
		}
	}
}

// A pipeline job's healthy step ends at once on every rank, with the stage
// on the spans and the pipeline size on the resource; in a hung step no
// step span ends, and the copy that did not stop finishes its
// forward_backward and waits in grad sync.
func TestPipelineJob(t *testing.T) {
	p := DefaultPipeline
	job := PipelineJob{Run: Run{Ranks: PipelineRanks(Rank{Run: "pp"}, p.Stages, 2)}, Pipeline: p, Replicas: 2}
	require.Len(t, job.Run.Ranks, 8)
	sizes := map[string]bool{}
	for _, r := range job.Run.Ranks {
		for _, kv := range r.Attributes() {
			if kv.Key == attrkey.PipelineSize || kv.Key == attrkey.LegacyPipelineSize {
				sizes[fmt.Sprintf("%s=%#v", kv.Key, kv.Value)] = true
			}
		}
	}
	assert.Equal(t, map[string]bool{
		`nv.dl.topology.size.pp=4`: true, `nv.dl.topology.size.pp="4"`: true,
		`dl.pipeline_parallel.size=4`: true, `dl.pipeline_parallel.size="4"`: true,
	}, sizes, "both spellings, ints and strings, as the ranks' identity")

	stepEnds := map[int64]bool{}
	eachSpan(job.Iteration(3), func(rank int64, s ptrace.Span) {
		if v, ok := s.Attributes().Get(attrkey.MegatronIteration); ok {
			assert.Equal(t, int64(3), v.Int())
			stepEnds[int64(s.EndTimestamp())] = true
		}
		if s.Name() == MicrobatchForward || s.Name() == RecvForward {
			stage, ok := s.Attributes().Get(attrkey.PipelineRank)
			assert.True(t, ok && stage.Int() == int64(job.StageOf(rank)), "rank %d's %s carries its stage", rank, s.Name())
		}
	})
	assert.Len(t, stepEnds, 1, "every rank's step ends together")

	names := map[int64]map[string]int{}
	eachSpan(job.HungIteration(3, 0, PipelineStop{Stage: 1, Op: p.ForwardOp(1, 2)}), func(rank int64, s ptrace.Span) {
		if names[rank] == nil {
			names[rank] = map[string]int{}
		}
		names[rank][s.Name()]++
	})
	for rank, n := range names {
		assert.Zero(t, n[attrkey.MegatronTrainStep], "rank %d's step never ends", rank)
		assert.Zero(t, n[Optimizer], "rank %d's optimizer never ends", rank)
		if job.ReplicaOf(rank) == 1 {
			assert.Equal(t, 1, n[GradSyncStart], "rank %d of the other copy waits in grad sync", rank)
			assert.Equal(t, p.MicroBatches, n[MicrobatchBack], rank)
		} else {
			assert.Zero(t, n[ForwardBackward], "rank %d of the stopped copy never finishes its forward_backward", rank)
		}
	}
	assert.Equal(t, 2, names[2][MicrobatchForward], "rank 2 (stage 1 of copy 0) stopped in its third forward")
}

func eachSpan(td ptrace.Traces, f func(rank int64, s ptrace.Span)) {
	for _, rs := range td.ResourceSpans().All() {
		rank, _ := rs.Resource().Attributes().Get("service.instance.id")
		var r int64
		_, _ = fmt.Sscanf(rank.Str()[len("pp-rank"):], "%d", &r)
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				f(r, s)
			}
		}
	}
}
