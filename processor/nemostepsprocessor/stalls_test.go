// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemostepsprocessor

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer/consumertest"
	"go.opentelemetry.io/collector/pdata/plog"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
)

// stallHarness is the processor with its stall records captured, judging
// a run stalled after 5 s without a completed step.
func stallHarness(t *testing.T) (*harness, *consumertest.LogsSink) {
	h := newHarness(t, func(cfg *Config) { cfg.Stalls.Get().MinStall = 5 * time.Second })
	logs := new(consumertest.LogsSink)
	h.c.nextLogs = logs
	return h, logs
}

// records are the stall records sent so far, by event name.
func records(sink *consumertest.LogsSink) map[string][]plog.LogRecord {
	out := map[string][]plog.LogRecord{}
	for _, ld := range sink.AllLogs() {
		for _, rl := range ld.ResourceLogs().All() {
			for _, sl := range rl.ScopeLogs().All() {
				for _, rec := range sl.LogRecords().All() {
					name, _ := rec.Attributes().Get(attrEventName)
					out[name.Str()] = append(out[name.Str()], rec)
				}
			}
		}
	}
	return out
}

// hangRank5 sends four steps of an 8-rank synchronous job, then its fifth
// with rank 5 stopped in its forward (the others block in grad sync).
func hangRank5(h *harness, shape lensfixture.Shape) syncJob {
	job := syncJob{run: "run-hang", world: 8}
	for it := int64(1); it <= 4; it++ {
		h.consume(job.batch(shape, it, lensfixture.WholeStep, allRanks(8)...))
	}
	h.ticks(1)
	h.consume(hung(job.fixture(shape), map[int64]lensfixture.HangRole{5: lensfixture.Stopped})())
	return job
}

func (h *harness) ticks(n int) {
	for range n {
		h.clk.Advance(time.Second)
	}
}

// A synchronous job hangs at iteration 5: rank 5 stops in its forward, the
// other seven finish their backward and block in grad sync. The stall is
// found at min_stall, names rank 5 and its host, and ends when the step
// completes; the gauges follow. In all four shapes.
func TestStallNamesTheStoppedRank(t *testing.T) {
	for _, shape := range lensfixture.Shapes {
		t.Run(shape.String(), func(t *testing.T) {
			h, logs := stallHarness(t)
			job := hangRank5(h, shape)
			h.ticks(4)
			assert.Empty(t, records(logs), "no stall before min_stall")
			h.ticks(3)

			got := records(logs)
			require.Len(t, got[eventStalled], 1)
			rec := got[eventStalled][0]
			assert.Equal(t, plog.SeverityNumberWarn, rec.SeverityNumber())
			attrs := rec.Attributes().AsRaw()
			assert.Equal(t, "run-hang", attrs["nemo.run.id"])
			assert.Equal(t, "behind", attrs[attrStallKind])
			assert.Equal(t, int64(5), attrs[attrStallIteration])
			assert.Equal(t, []any{int64(5)}, attrs[attrStallRanks])
			assert.Equal(t, []any{job.rank(5).Host()}, attrs[attrStallHosts])
			assert.NotContains(t, attrs, attrStallStage, "no pipeline: no stage")
			assert.Contains(t, rec.Body().Str(), "run run-hang stalled at iteration 5 for ")
			assert.Contains(t, rec.Body().Str(), "rank 5 on "+job.rank(5).Host()+" last finished megatron.microbatch.forward")
			assert.Contains(t, rec.Body().Str(), "the other 7 ranks finished megatron.grad_sync.start and wait in grad sync")

			stalled := pointsNamed(h.points(), "nemo.run.stalled")
			require.NotEmpty(t, stalled)
			assert.InDelta(t, 1.0, stalled[len(stalled)-1].value, 0)
			behind := pointsNamed(h.points(), "nemo.rank.behind")
			require.NotEmpty(t, behind)
			for _, p := range behind {
				assert.Equal(t, int64(5), p.attrs["nv.dl.rank"], "only rank 5 is behind")
			}

			// The rank comes back and the step completes: one resumed record,
			// the gauges at 0.
			h.consume(job.batch(shape, 5, lensfixture.WholeStep, allRanks(8)...))
			h.ticks(2)
			got = records(logs)
			require.Len(t, got[eventResumed], 1)
			assert.Len(t, got[eventStalled], 1, "one record per stall")
			stalled = pointsNamed(h.points(), "nemo.run.stalled")
			assert.InDelta(t, 0.0, stalled[len(stalled)-1].value, 0)
			behind = pointsNamed(h.points(), "nemo.rank.behind")
			assert.InDelta(t, 0.0, behind[len(behind)-1].value, 0)
		})
	}
}

// A dead node: ranks 0-7 of host node000 (the fixture puts 8 ranks a
// host) send nothing of iteration 5; the other host's ranks block.
func TestStallNamesALostNode(t *testing.T) {
	h, logs := stallHarness(t)
	job := syncJob{run: "run-node", world: 16}
	for it := int64(1); it <= 4; it++ {
		h.consume(job.batch(ownRoot, it, lensfixture.WholeStep, allRanks(16)...))
	}
	dead := map[int64]lensfixture.HangRole{}
	for r := range int64(8) {
		dead[r] = lensfixture.Dead
	}
	h.consume(hung(job.fixture(ownRoot), dead)())
	h.ticks(8)
	got := records(logs)[eventStalled]
	require.Len(t, got, 1)
	attrs := got[0].Attributes().AsRaw()
	assert.Equal(t, []any{int64(0), int64(1), int64(2), int64(3), int64(4), int64(5), int64(6), int64(7)}, attrs[attrStallRanks])
	assert.Equal(t, []any{job.rank(0).Host()}, attrs[attrStallHosts])
	assert.Equal(t, []any{job.rank(0).Host()}, attrs[attrStallLostHosts])
	assert.Contains(t, got[0].Body().Str(), "sent nothing since the last completed step")
}

// An even pause (every rank finished iteration 4, none starts 5) is a
// stall of kind paused that names nobody.
func TestEvenPauseNamesNobody(t *testing.T) {
	h, logs := stallHarness(t)
	job := syncJob{run: "run-ckpt", world: 8}
	for it := int64(1); it <= 4; it++ {
		h.consume(job.batch(ownRoot, it, lensfixture.WholeStep, allRanks(8)...))
	}
	h.ticks(8)
	got := records(logs)[eventStalled]
	require.Len(t, got, 1)
	attrs := got[0].Attributes().AsRaw()
	assert.Equal(t, "paused", attrs[attrStallKind])
	assert.Empty(t, attrs[attrStallRanks])
	assert.Empty(t, pointsNamed(h.points(), "nemo.rank.behind"))
}

func pointsNamed(points []point, name string) []point {
	var out []point
	for _, p := range points {
		if p.metric == name {
			out = append(out, p)
		}
	}
	return out
}

// With stalls: {enabled: false} a hang is not judged at all: no record, no
// stall gauge, no state in a detector, and the step metrics are exactly
// those of the processor with the detector on.
func TestStallDetectionOff(t *testing.T) {
	on, _ := stallHarness(t)
	off := newHarness(t, func(cfg *Config) { cfg.Stalls = configoptional.None[StallsConfig]() })
	offLogs := new(consumertest.LogsSink)
	off.c.nextLogs = offLogs
	require.False(t, off.c.stalls)

	job := syncJob{run: "run-hang", world: 8}
	for _, h := range []*harness{on, off} {
		for it := int64(1); it <= 4; it++ {
			h.consume(job.batch(inJob, it, lensfixture.WholeStep, allRanks(8)...))
		}
		h.ticks(1)
		h.consume(hung(job.fixture(inJob), map[int64]lensfixture.HangRole{5: lensfixture.Stopped})())
		h.ticks(10)
	}
	assert.Zero(t, offLogs.LogRecordCount(), "no stall record")
	var stepPoints []point
	for _, p := range off.points() {
		assert.NotContains(t, []string{"nemo.run.stalled", "nemo.run.stall_duration", "nemo.rank.behind"}, p.metric)
		stepPoints = append(stepPoints, p)
	}
	var onSteps []point
	for _, p := range on.points() {
		if strings.HasPrefix(p.metric, "nemo.step.") {
			onSteps = append(onSteps, p)
		}
	}
	require.NotEmpty(t, onSteps)
	assert.Equal(t, onSteps, stepPoints, "the step metrics do not depend on the detector")
	require.NotEmpty(t, pointsNamed(on.points(), "nemo.run.stalled"), "the same hang with the detector on is found")
}

// A pipeline-parallel job (4 stages, 2 copies, ranks numbered stage x 2 +
// copy, the stage on the spans, the size on the resource) hangs because
// the stage-2 rank of copy 1 (rank 5) stops in the forward of its third
// micro-batch: the later stage waits for its forwards, the earlier ones for
// its backwards, the other copy finishes its backward and waits in grad
// sync. The record names stage 2 and rank 5 alone, in all four shapes.
func TestStallNamesThePipelineStage(t *testing.T) {
	p := lensfixture.DefaultPipeline
	stop := lensfixture.PipelineStop{Stage: 2, Op: p.ForwardOp(2, 2)}
	for _, shape := range lensfixture.Shapes {
		t.Run(shape.String(), func(t *testing.T) {
			h, logs := stallHarness(t)
			job := lensfixture.PipelineJob{
				Run:      lensfixture.Run{Ranks: lensfixture.PipelineRanks(lensfixture.Rank{Run: "run-pp", GPUsPerNode: 2}, p.Stages, 2), Shape: shape},
				Pipeline: p, Replicas: 2,
			}
			for it := int64(1); it <= 4; it++ {
				h.consume(job.Iteration(it))
			}
			h.ticks(1)
			h.consume(job.HungIteration(5, 1, stop))
			h.ticks(8)

			got := records(logs)[eventStalled]
			require.Len(t, got, 1)
			attrs := got[0].Attributes().AsRaw()
			assert.Equal(t, "behind", attrs[attrStallKind])
			assert.Equal(t, int64(2), attrs[attrStallStage])
			assert.Equal(t, []any{int64(5)}, attrs[attrStallRanks])
			assert.Equal(t, []any{job.Run.Ranks[5].Host()}, attrs[attrStallHosts])
			body := got[0].Body().Str()
			assert.Contains(t, body, "pipeline stage 2 of 4 stopped first (it ended the forward of 2 of its 8 micro-batches and the backward of 1, and had the input of its next compute): rank 5 on "+job.Run.Ranks[5].Host()+" last finished megatron.")
			assert.Contains(t, body, "the other 3 ranks of its pipeline wait for it in their point-to-point transfers")
			assert.Contains(t, body, "the other 4 ranks finished megatron.grad_sync.start and wait in grad sync")
			for _, pt := range pointsNamed(h.points(), "nemo.rank.behind") {
				assert.Equal(t, int64(5), pt.attrs[resourceKey(job.Run.Ranks[5], "nv.dl.rank", "dl.rank")], "only rank 5 is behind")
			}
		})
	}
}

// resourceKey is the first of keys rank sends.
func resourceKey(rank lensfixture.Rank, keys ...string) string {
	for _, k := range keys {
		if resourceValue(rank, k) != nil {
			return k
		}
	}
	return ""
}
