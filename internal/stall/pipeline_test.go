// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package stall

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
)

// pipelineJob is a synchronous job of replicas copies of a pipeline,
// steps 0-3 healthy, fed to a detector as the collector would: every
// rank's spans of a step, with its pipeline stage and size.
type pipelineJob struct {
	t   *testing.T
	d   *Detector
	r   *RunState
	job lensfixture.PipelineJob
	// stages: the size the ranks report (0: none, as a job whose ranks do
	// not send it); microbatches, when set, what their step spans say.
	stages, microbatches int
	// noStage leaves the spans' pipeline stage unread.
	noStage bool
	// summarized feeds the ranks as an agent summarizes them for its
	// gateway (internal/stepsummary): their step spans, and for the spans
	// after a rank's last step one progress beat (Progress: the latest in
	// step order, with the micro-batch counts).
	summarized bool
	// next is the next iteration to run.
	next int64
}

func newPipelineJob(t *testing.T, p lensfixture.Pipeline, replicas int, edit ...func(*pipelineJob)) *pipelineJob {
	ranks := lensfixture.PipelineRanks(lensfixture.Rank{Run: "run-pp", GPUsPerNode: 2}, p.Stages, replicas)
	j := &pipelineJob{
		t: t, d: New(defaultConfig), r: New(defaultConfig).NewRun(1, t0), stages: p.Stages,
		job: lensfixture.PipelineJob{Run: lensfixture.Run{Ranks: ranks}, Pipeline: p, Replicas: replicas},
	}
	for _, e := range edit {
		e(j)
	}
	j.steps(4)
	return j
}

// steps feeds n healthy iterations.
func (j *pipelineJob) steps(n int) {
	for range n {
		j.feed(j.next, healthyIteration(j.job, j.next))
		j.next++
	}
}

// healthyIterations are the batches of healthy iterations of the jobs of
// the tests, built once: feeding only reads them.
var healthyIterations = map[string]ptrace.Traces{}

func healthyIteration(job lensfixture.PipelineJob, iteration int64) ptrace.Traces {
	key := fmt.Sprintf("%+v/%d/%d", job.Pipeline, job.Replicas, iteration)
	td, ok := healthyIterations[key]
	if !ok {
		td = job.Iteration(iteration)
		healthyIterations[key] = td
	}
	return td
}

// feed gives the detector td's spans, arrived a second after iteration's
// step would have ended.
func (j *pipelineJob) feed(iteration int64, td ptrace.Traces) {
	arrived := j.job.Run.StepStart(iteration).Add(time.Second)
	for _, rs := range td.ResourceSpans().All() {
		rank := rs.Resource().Attributes().AsRaw()
		r := lensfixtureRank(j.t, j.job.Run.Ranks, rank)
		tr := j.d.Rank(j.r, len(j.job.Run.Ranks), Rank{Rank: r.Rank, Host: r.Host(), Process: r.InstanceID(), Stages: j.stages}, arrived)
		if j.summarized {
			j.feedSummarized(tr, rs)
			continue
		}
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				if tr.NeedsStage() && !j.noStage {
					if v, ok := s.Attributes().Get(attrkey.PipelineRank); ok {
						tr.SetStage(v.Int())
					}
				}
				tr.Span(j.spanOf(s))
			}
		}
	}
}

// spanOf is what the detector reads of a span: a step span by its
// iteration, with its micro-batches (or the job's, when set).
func (j *pipelineJob) spanOf(s ptrace.Span) Span {
	span := Span{Name: s.Name(), Start: int64(s.StartTimestamp()), End: int64(s.EndTimestamp())}
	if v, ok := s.Attributes().Get(attrkey.MegatronIteration); ok {
		span.Step, span.Iteration = true, v.Int()
		if m, ok := s.Attributes().Get(attrkey.MegatronNumMicrobatches); ok {
			span.MicroBatches = int(m.Int())
		}
		if j.microbatches > 0 {
			span.MicroBatches = j.microbatches
		}
	}
	return span
}

// feedSummarized feeds a rank's resource as its agent's summaries reach
// the gateway's detector: each step span, and a progress beat of what the
// rank ended after its last step.
func (j *pipelineJob) feedSummarized(tr Tracker, rs ptrace.ResourceSpans) {
	var (
		progress          Progress
		latest            Span
		stepEnd           int64
		moved, stageKnown bool
	)
	for _, ss := range rs.ScopeSpans().All() {
		for _, s := range ss.Spans().All() {
			if v, ok := s.Attributes().Get(attrkey.PipelineRank); ok && !stageKnown && !j.noStage {
				stageKnown = true
				if tr.NeedsStage() {
					tr.SetStage(v.Int())
				}
			}
			span := j.spanOf(s)
			if span.Step {
				span.Forwards = int64(progress.Forwards)
				tr.Span(span)
				progress.NextIteration()
				latest, stepEnd, moved = Span{}, span.End, false
				continue
			}
			if span.Start < stepEnd {
				continue
			}
			if progress.Add(span.Name, span.End) {
				latest = span
			}
			moved = true
		}
	}
	if moved {
		latest.Beat, latest.Forwards, latest.Backwards = true, int64(progress.Forwards), int64(progress.Backwards)
		tr.Span(latest)
	}
}

func lensfixtureRank(t *testing.T, ranks []lensfixture.Rank, res map[string]any) lensfixture.Rank {
	for _, r := range ranks {
		if res["service.instance.id"] == r.InstanceID() {
			return r
		}
	}
	t.Fatalf("no rank of %v", res)
	return lensfixture.Rank{}
}

// hang runs the next iteration stopped as stop says in copy replica, and
// returns the stall found two minutes later.
func (j *pipelineJob) hang(replica int, stop lensfixture.PipelineStop) Event {
	j.feed(j.next, j.job.HungIteration(j.next, replica, stop))
	at := j.job.Run.StepStart(j.next).Add(2 * time.Minute)
	events, _ := judge(j.d, at, j.r)
	require.Len(j.t, events, 1)
	return events[0]
}

// A stage that stops in a compute (or before the step: op 0) is named, in
// every place of its schedule, for pipelines of 2, 4 and 8 stages with
// fewer, as many and more micro-batches than stages, with and without data
// parallelism; the culprits are its rank in the stalled copy, and the
// other copies wait in grad sync.
func TestPipelineStageThatStopped(t *testing.T) {
	for _, summarized := range []bool{false, true} {
		t.Run(fmt.Sprintf("summarized=%v", summarized), func(t *testing.T) { checkStageThatStopped(t, summarized) })
	}
}

// checkStageThatStopped is TestPipelineStageThatStopped with every rank
// fed as spans, or as an agent's summaries (the same verdicts).
func checkStageThatStopped(t *testing.T, summarized bool) {
	for _, p := range pipelines() {
		for _, replicas := range []int{1, 2} {
			for stage := range p.Stages {
				for op := range p.PipelineOps(stage) {
					if op > 0 && !p.Compute(stage, op) {
						continue
					}
					name := fmt.Sprintf("pp%d_m%d_dp%d/stage%d_op%d", p.Stages, p.MicroBatches, replicas, stage, op)
					j := newPipelineJob(t, p, replicas, func(j *pipelineJob) { j.summarized = summarized })
					ev := j.hang(replicas-1, lensfixture.PipelineStop{Stage: stage, Op: op})
					if !assert.True(t, ev.Pipeline.Found, name) {
						continue
					}
					stopped := int64(stage*replicas + replicas - 1)
					assert.Equal(t, stage, ev.Pipeline.Stage, name)
					assert.Equal(t, Behind, ev.Kind, name)
					assert.Equal(t, []int64{stopped}, ev.Ranks(), name)
					// The stages that finished (after the stopped one, which took
					// all they sent) reduced their gradients; the others wait.
					waiting, others := -1, lensfixture.GradSyncStart
					for _, sp := range p.Simulate(&lensfixture.PipelineStop{Stage: stage, Op: op}) {
						if !sp.Done {
							waiting++
						} else {
							others = lensfixture.GradSyncFinish
						}
					}
					assert.Equal(t, waiting, ev.Pipeline.Waiting, name)
					assert.Equal(t, len(j.job.Run.Ranks)-1, ev.OthersCount, name)
					if replicas > 1 || others == lensfixture.GradSyncFinish {
						assert.Equal(t, others, ev.Others, name)
					}
				}
			}
		}
	}
}

// A transfer that never completes (a link fault; or a rank that stopped
// between its compute and its send, which the spans cannot tell from it)
// is named at one of its two ends, or not at all: never at a stage that
// has nothing to do with it.
func TestPipelineStoppedTransfer(t *testing.T) {
	named, notNamed := 0, 0
	for _, p := range pipelines() {
		for stage := range p.Stages {
			for op := 1; op < p.PipelineOps(stage); op++ {
				if p.Compute(stage, op) {
					continue
				}
				ev := newPipelineJob(t, p, 2).hang(0, lensfixture.PipelineStop{Stage: stage, Op: op})
				if !ev.Pipeline.Found {
					notNamed++
					assert.NotEmpty(t, ev.Culprits, "the wavefront names the stalled copy")
					continue
				}
				named++
				peers := p.Peers(stage, op)
				assert.Contains(t, append(peers, stage), ev.Pipeline.Stage, "pp%d_m%d stage %d op %d", p.Stages, p.MicroBatches, stage, op)
			}
		}
	}
	t.Logf("stopped transfers: %d named at one end, %d not named", named, notNamed)
}

// Without the pipeline size on the resource or the stage on the spans, or
// with a step span whose micro-batch count disagrees with the micro-batch
// spans (an interleaved schedule), no stage is named: the wavefront names
// the stalled copy.
func TestPipelineNotTold(t *testing.T) {
	p := lensfixture.DefaultPipeline
	stop := lensfixture.PipelineStop{Stage: 1, Op: 7}
	t.Run("no pipeline size", func(t *testing.T) {
		j := newPipelineJob(t, p, 2, func(j *pipelineJob) { j.stages = 0 })
		ev := j.hang(0, stop)
		assert.False(t, ev.Pipeline.Found)
		assert.Equal(t, 0, ev.Pipeline.Stages)
		assert.Equal(t, []int64{0, 2, 4, 6}, ev.Ranks(), "the copy that stopped: every stage's rank 0")
	})
	t.Run("no stage on the spans", func(t *testing.T) {
		j := newPipelineJob(t, p, 2, func(j *pipelineJob) { j.noStage = true })
		ev := j.hang(0, stop)
		assert.False(t, ev.Pipeline.Found)
		assert.Equal(t, []int64{0, 2, 4, 6}, ev.Ranks())
	})
	t.Run("interleaved", func(t *testing.T) {
		// What the step spans say: each rank ran half the micro-batch
		// spans it sent (2 model chunks a rank: each micro-batch's twice).
		j := newPipelineJob(t, p, 2, func(j *pipelineJob) { j.microbatches = p.MicroBatches / 2 })
		ev := j.hang(0, stop)
		assert.False(t, ev.Pipeline.Found)
		assert.Equal(t, 4, ev.Pipeline.Stages)
	})
}

func pipelines() []lensfixture.Pipeline {
	var out []lensfixture.Pipeline
	for _, stages := range []int{2, 4, 8} {
		for _, m := range []int{1, stages, 2*stages + 1} {
			p := lensfixture.DefaultPipeline
			p.Stages, p.MicroBatches = stages, m
			out = append(out, p)
		}
	}
	return slices.Clip(out)
}
