// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemorunprocessor

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/processor/nemorunprocessor/internal/metadata"
	"github.com/nemo-lens/otelcol-nemo/processor/nemorunprocessor/internal/metadatatest"
)

func TestSingleNodeReconcilesOneTorchrunJob(t *testing.T) {
	h := newSingleNodeHarness(t, nil)

	// Rank 3's first batch arrives first; the others in a random order,
	// batched unevenly, over 40 seconds.
	order := []int{3}
	rest := []int{0, 1, 2, 4, 5, 6, 7}
	rand.New(rand.NewPCG(7, 8)).Shuffle(len(rest), func(i, j int) { rest[i], rest[j] = rest[j], rest[i] })
	order = append(order, rest...)
	jobID := perProcessID(1, 3)

	check := func(t *testing.T, ranks []int, got []map[string]any) {
		t.Helper()
		require.Len(t, got, len(ranks))
		for i, r := range ranks {
			in := torchrunRank("dgx-07", 1, r, 8)
			if r == 3 {
				assert.Equal(t, in, got[i], "the first rank seen keeps its id, and nothing is written")
				continue
			}
			assert.Equal(t, reconciledTo(in, jobID), got[i], "rank %d", r)
		}
	}
	for start, size := 0, 1; start < len(order); start, size = start+size, size+1 {
		batch := order[start:min(start+size, len(order))]
		var in []map[string]any
		for _, r := range batch {
			in = append(in, torchrunRank("dgx-07", 1, r, 8))
		}
		check(t, batch, h.send(t, "traces", in...))
		h.clock.Advance(13 * time.Second)
	}

	// Long after the window, on another signal, in reverse order: every
	// rank keeps the id it was given, so its data is never split.
	h.clock.Advance(2 * time.Hour)
	var in []map[string]any
	var ranks []int
	for r := 7; r >= 0; r-- {
		in, ranks = append(in, torchrunRank("dgx-07", 1, r, 8)), append(ranks, r)
	}
	check(t, ranks, h.send(t, "metrics", in...))

	assert.Empty(t, h.warnings())
	info := h.logs.FilterMessageSnippet("share the id of its first rank").All()
	require.Len(t, info, 1, "one note per launch")
	assert.Equal(t, jobID, info[0].ContextMap()["run_id"])
	h.assertNoUnreconciled(t)
	opts := []metricdatatest.Option{metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars()}
	var ids []metricdata.DataPoint[int64]
	for _, signal := range []string{"traces", "metrics"} {
		sig := attribute.String("otel.signal", signal)
		ids = append(ids,
			metricdata.DataPoint[int64]{Attributes: attribute.NewSet(sig, attribute.String("outcome", "kept")), Value: 1},
			metricdata.DataPoint[int64]{Attributes: attribute.NewSet(sig, attribute.String("outcome", "reconciled")), Value: 7})
	}
	metadatatest.AssertEqualProcessorNemoRunIds(t, h.tel, ids, opts...)
}

func TestSingleNodeRefusesCollidingJobs(t *testing.T) {
	h := newSingleNodeHarness(t, nil)
	var jobA, jobB []map[string]any
	for r := range 8 {
		jobA = append(jobA, torchrunRank("dgx-07", 1, r, 8))
		jobB = append(jobB, torchrunRank("dgx-07", 2, r, 8))
	}

	// Job A is complete and held for single_node_settle, then merged; job B
	// comes within single_node_hold of A's first rank, so they count as
	// launched together.
	gotA := h.sendHeld(t, defaultSingleNodeSettle, jobA...)
	h.clock.Advance(3 * time.Second)
	gotB := h.send(t, "traces", jobB...)
	h.clock.Advance(5 * time.Second)
	againB := h.send(t, "traces", jobB...)

	for r := range 8 {
		if r == 0 {
			assert.Equal(t, jobA[0], gotA[0])
		} else {
			assert.Equal(t, reconciledTo(jobA[r], perProcessID(1, 0)), gotA[r], "job A rank %d", r)
		}
		assert.Equal(t, jobB[r], gotB[r], "job B rank %d collides with job A's: left as sent", r)
		assert.Equal(t, jobB[r], againB[r], "and stays so")
	}

	warnings := h.warnings()
	require.Len(t, warnings, 1, "warned once for the launch")
	ctx := warnings[0].ContextMap()
	assert.Contains(t, warnings[0].Message, "same rank with different ids")
	assert.Equal(t, "rank_collision", ctx["reason"])
	assert.Equal(t, perProcessID(2, 0), ctx["nemo.run.id"])
	assert.Equal(t, perProcessID(1, 0), ctx["rank_taken_by"])
	assert.Equal(t, "dgx-07", ctx["host.name"])
	assert.Contains(t, ctx["fix"], "NEMO_LENS_RUN_ID")
	assert.Contains(t, ctx["fix"], "NEMO_RUN_OVERRIDE=true")
	h.assertUnreconciled(t, map[string]int64{"rank_collision": 8})
}

// Once a rank has come twice, the launch cannot tell its ranks from another
// job's: nobody joins it any more, even on a free rank. (An id that joined
// before the first duplicate stays joined: its data is already written
// under the launch's id.)
func TestSingleNodeAdmitsNobodyAfterACollision(t *testing.T) {
	h := newSingleNodeHarness(t, nil)
	a0, b1, a1, a2, b2 := torchrunRank("dgx-07", 1, 0, 4), torchrunRank("dgx-07", 2, 1, 4),
		torchrunRank("dgx-07", 1, 1, 4), torchrunRank("dgx-07", 1, 2, 4), torchrunRank("dgx-07", 2, 2, 4)
	// a0 and b1 alone until single_node_hold expires (the residual case:
	// two jobs whose first reports together do not fill one world size
	// within the hold), so the launch is merged before a1 shows the
	// collision.
	got := h.sendHeld(t, defaultSingleNodeHold, a0, b1)
	got = append(got, h.send(t, "traces", a1, a2, b2)...)
	assert.Equal(t, a0, got[0])
	assert.Equal(t, reconciledTo(b1, perProcessID(1, 0)), got[1], "no duplicate yet: indistinguishable from job 1's rank 1")
	assert.Equal(t, a1, got[2], "rank 1 again: refused")
	assert.Equal(t, a2, got[3], "free rank, but the launch is ambiguous now: refused")
	assert.Equal(t, b2, got[4])
	assert.Len(t, h.warnings(), 1)
	h.assertUnreconciled(t, map[string]int64{"rank_collision": 3})
}

func TestSingleNodeWindow(t *testing.T) {
	h := newSingleNodeHarness(t, func(c *Config) { c.SingleNodeWindow = 30 * time.Second })
	var early []map[string]any
	for r := range 7 {
		early = append(early, torchrunRank("dgx-07", 1, r, 8))
	}
	h.sendHeld(t, defaultSingleNodeHold, early...)

	h.clock.Advance(31 * time.Second)
	late := torchrunRank("dgx-07", 1, 7, 8)
	assert.Equal(t, []map[string]any{late}, h.send(t, "traces", late), "first seen after the window: not merged")
	h.clock.Advance(time.Minute)
	assert.Equal(t, []map[string]any{late}, h.send(t, "metrics", late), "and never afterwards")

	warnings := h.warnings()
	require.Len(t, warnings, 1)
	assert.Equal(t, "late", warnings[0].ContextMap()["reason"])
	assert.Equal(t, perProcessID(1, 0), warnings[0].ContextMap()["launch_run_id"])
	assert.Contains(t, warnings[0].ContextMap()["fix"], "NEMO_LENS_RUN_ID")
	h.assertUnreconciled(t, map[string]int64{"late": 1})

	// The next job on this host: its rank 2 comes back with a new id, so it
	// starts a new launch that the rest of the job joins.
	h.clock.Advance(10 * time.Minute)
	next := []map[string]any{torchrunRank("dgx-07", 2, 2, 8)}
	for _, r := range []int{5, 0, 7, 1, 6, 3, 4} {
		next = append(next, torchrunRank("dgx-07", 2, r, 8))
	}
	got := h.sendHeld(t, defaultSingleNodeSettle, next...)
	assert.Equal(t, next[0], got[0])
	for i := 1; i < len(next); i++ {
		assert.Equal(t, reconciledTo(next[i], perProcessID(2, 2)), got[i])
	}
	assert.Len(t, h.warnings(), 1, "nothing more to warn about")
}

func TestSingleNodeKeepsJobsApart(t *testing.T) {
	h := newSingleNodeHarness(t, nil)
	jobs := []struct {
		host, service   string
		worldSize, jobN int
	}{
		{"dgx-07", "megatron", 4, 1},
		{"dgx-08", "megatron", 4, 2}, // another host
		{"dgx-07", "megatron", 2, 3}, // another world size
		{"dgx-07", "nemo-rl", 4, 4},  // another service
	}
	var in []map[string]any
	var jobOf []int
	for r := range 4 {
		for _, j := range jobs {
			if r < j.worldSize {
				m := torchrunRank(j.host, j.jobN, r, j.worldSize)
				m["service.name"] = j.service
				in, jobOf = append(in, m), append(jobOf, j.jobN)
			}
		}
	}
	got := h.sendHeld(t, defaultSingleNodeSettle, in...)
	runs := map[int]map[any]bool{}
	for i, attrs := range got {
		if runs[jobOf[i]] == nil {
			runs[jobOf[i]] = map[any]bool{}
		}
		runs[jobOf[i]][attrs["nemo.run.id"]] = true
	}
	assert.Equal(t, map[int]map[any]bool{
		1: {perProcessID(1, 0): true},
		2: {perProcessID(2, 0): true},
		3: {perProcessID(3, 0): true},
		4: {perProcessID(4, 0): true},
	}, runs, "one run per job, each its first rank's id")
	assert.Empty(t, h.warnings())
}

func TestSingleNodeWorkerGroupsAreSeparateLaunches(t *testing.T) {
	h := newSingleNodeHarness(t, nil)
	var in []map[string]any
	for _, group := range []string{"policy", "generation"} {
		for r := range 2 {
			m := torchrunRank("dgx-07", len(group), r, 2)
			m["rl.worker_group"] = group
			in = append(in, m)
		}
	}
	got := h.sendHeld(t, defaultSingleNodeSettle, in...)
	assert.Equal(t, in[0], got[0])
	assert.Equal(t, reconciledTo(in[1], perProcessID(len("policy"), 0)), got[1])
	assert.Equal(t, in[2], got[2])
	assert.Equal(t, reconciledTo(in[3], perProcessID(len("generation"), 0)), got[3])
	assert.Empty(t, h.warnings(), "ranks are numbered per worker group: no collision")
}

func TestSingleNodeLeavesOtherIDsAlone(t *testing.T) {
	tests := []struct {
		name   string
		modify func(m map[string]any)
		want   func(in map[string]any) map[string]any
	}{
		{
			name:   "a job key wins (slurm.job.id)",
			modify: func(m map[string]any) { m["slurm.job.id"] = "4242" },
			want: func(in map[string]any) map[string]any {
				want := reconciledTo(in, "4242")
				want["nemo.run_id_source"] = "job_keys"
				return want
			},
		},
		{
			name:   "an explicit id (NEMO_LENS_RUN_ID)",
			modify: func(m map[string]any) { m["nemo.run.id"] = "llama3-8b-sweep-4" },
			want:   maps.Clone[map[string]any],
		},
		{
			name: "an id an upstream nemo_run chose",
			modify: func(m map[string]any) {
				m["nemo.run_id_source"] = "single_node"
				m["nemo.original_run_id"] = m["nemo.run.id"]
				m["nemo.run.id"] = "0123456789ab"
			},
			want: maps.Clone[map[string]any],
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newSingleNodeHarness(t, nil)
			var in []map[string]any
			for r := range 8 {
				m := torchrunRank("dgx-07", 1, r, 8)
				tt.modify(m)
				in = append(in, m)
			}
			got := h.send(t, "traces", in...)
			for i := range in {
				assert.Equal(t, tt.want(in[i]), got[i])
			}
			assert.Empty(t, h.state().ids, "nothing remembered")
			assert.Empty(t, h.logs.All())
			h.assertNoUnreconciled(t)
		})
	}
}

func TestSingleNodeRefusals(t *testing.T) {
	tests := []struct {
		name    string
		modify  func(m map[string]any)
		reason  string
		message string
	}{
		{name: "no host.name", modify: func(m map[string]any) { delete(m, "host.name") }, reason: "no_host_name", message: "no host.name"},
		{name: "blank host.name", modify: func(m map[string]any) { m["host.name"] = " " }, reason: "no_host_name", message: "no host.name"},
		{name: "no world size", modify: func(m map[string]any) { delete(m, "nv.dl.world_size"); delete(m, "dl.world_size") }, reason: "no_world_size", message: "no world size"},
		{name: "garbage world size", modify: func(m map[string]any) { m["nv.dl.world_size"] = "eight"; delete(m, "dl.world_size") }, reason: "no_world_size", message: "no world size"},
		{name: "no rank", modify: func(m map[string]any) { delete(m, "nv.dl.rank"); delete(m, "dl.rank") }, reason: "no_rank", message: "no rank"},
		{name: "rank not below world size", modify: func(m map[string]any) {
			delete(m, "dl.world_size")
			m["nv.dl.world_size"] = int64(1)
			delete(m, "nv.dl.local_rank")
			delete(m, "dl.local_rank")
		}, reason: "rank_out_of_range", message: "not below its world size"},
		{name: "local rank differs: a multi-node job", modify: func(m map[string]any) {
			delete(m, "dl.local_rank")
			m["nv.dl.local_rank"] = int64(0)
		}, reason: "multi_node", message: "spans several hosts"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newSingleNodeHarness(t, nil)
			var in []map[string]any
			for r := 1; r < 8; r++ {
				m := torchrunRank("dgx-07", 1, r, 8)
				tt.modify(m)
				in = append(in, m)
			}
			assert.Equal(t, in, h.send(t, "traces", in...), "every id left as sent")
			h.clock.Advance(time.Minute)
			assert.Equal(t, in, h.send(t, "traces", in...))

			warnings := h.warnings()
			require.Len(t, warnings, 1, "warned once per host, service and reason")
			assert.Contains(t, warnings[0].Message, tt.message)
			ctx := warnings[0].ContextMap()
			assert.Equal(t, tt.reason, ctx["reason"])
			assert.Contains(t, ctx["fix"], "export NEMO_LENS_RUN_ID=<id> in the job's environment")
			assert.Contains(t, ctx["fix"], "override: true (NEMO_RUN_OVERRIDE=true with the presets)")
			h.assertUnreconciled(t, map[string]int64{tt.reason: 7})

			h.clock.Advance(warnRepeat)
			next := torchrunRank("dgx-07", 2, 1, 8)
			tt.modify(next)
			h.send(t, "traces", next)
			assert.Len(t, h.warnings(), 2, "repeated after an hour for a new id")
		})
	}
}

func TestSingleNodeOff(t *testing.T) {
	h := newSingleNodeHarness(t, func(c *Config) { c.ReconcileSingleNode = false })
	assert.Nil(t, h.traces.single)
	var in []map[string]any
	for r := range 8 {
		in = append(in, torchrunRank("dgx-07", 1, r, 8))
	}
	in = append(in, map[string]any{"nemo.run.id": "a1b2c3d4e5f6"})
	assert.Equal(t, in, h.send(t, "traces", in...))
	assert.Empty(t, h.logs.All())
	h.assertNoUnreconciled(t)
}

func TestSingleNodeStateIsBounded(t *testing.T) {
	t.Run("idle launches are forgotten", func(t *testing.T) {
		h := newSingleNodeHarness(t, func(c *Config) { c.SingleNodeIdleTimeout = time.Hour })
		h.sendHeld(t, defaultSingleNodeSettle, torchrunRank("dgx-07", 1, 0, 2), torchrunRank("dgx-07", 1, 1, 2))
		h.clock.Advance(50 * time.Minute)
		h.send(t, "traces", torchrunRank("dgx-07", 1, 1, 2)) // keeps the launch alive
		h.clock.Advance(50 * time.Minute)
		h.send(t, "traces", torchrunRank("dgx-08", 2, 0, 2)) // sweeps
		assert.Len(t, h.state().ids, 2, "rank 0 idle, rank 1 not, plus the new one")
		assert.Len(t, h.state().launches, 2)
		got := h.send(t, "metrics", torchrunRank("dgx-07", 1, 1, 2))
		assert.Equal(t, perProcessID(1, 0), got[0]["nemo.run.id"], "a live member keeps its launch's id")

		h.clock.Advance(2 * time.Hour)
		h.send(t, "traces", torchrunRank("dgx-09", 3, 0, 2))
		assert.Len(t, h.state().ids, 1)
		assert.Len(t, h.state().launches, 1)
	})
	t.Run("at most maxIDs ids", func(t *testing.T) {
		h := newSingleNodeHarness(t, nil)
		h.state().maxIDs = 16
		for job := range 100 {
			h.send(t, "traces", torchrunRank(fmt.Sprintf("host-%d", job), job, 0, 1))
			h.clock.Advance(time.Second)
		}
		assert.LessOrEqual(t, len(h.state().ids), 16)
		assert.LessOrEqual(t, len(h.state().launches), 16)
	})
	t.Run("a member forgotten under the bound gets its launch's id back", func(t *testing.T) {
		h := newSingleNodeHarness(t, nil)
		r0, r1 := torchrunRank("dgx-07", 1, 0, 2), torchrunRank("dgx-07", 1, 1, 2)
		h.sendHeld(t, defaultSingleNodeSettle, r0, r1)
		delete(h.state().ids, perProcessID(1, 1))
		h.clock.Advance(time.Hour)
		assert.Equal(t, []map[string]any{reconciledTo(r1, perProcessID(1, 0))}, h.send(t, "traces", r1))
	})
	t.Run("released with the last processor", func(t *testing.T) {
		h := newSingleNodeHarness(t, nil)
		state := h.traces.single
		assert.Same(t, state, h.metrics.single, "signals of one component share their launches")
		stopped := func() bool {
			select {
			case <-state.stopped:
				return true
			default:
				return false
			}
		}
		require.NoError(t, h.traces.shutdown(t.Context()))
		assert.False(t, stopped(), "the metrics processor still uses it")
		require.NoError(t, h.metrics.shutdown(t.Context()))
		assert.True(t, stopped())
		again, release := h.factory.acquireSingleNode(component.NewID(metadata.Type), createDefaultConfig().(*Config))
		defer release()
		assert.NotSame(t, state, again, "a new config starts afresh")
	})
}

func TestSingleNodeConcurrentSignals(t *testing.T) {
	h := newSingleNodeHarness(t, nil)
	var in []map[string]any
	for r := range 8 {
		in = append(in, torchrunRank("dgx-07", 1, r, 8))
	}
	td, md := ptrace.NewTraces(), pmetric.NewMetrics()
	for _, r := range in {
		require.NoError(t, td.ResourceSpans().AppendEmpty().Resource().Attributes().FromRaw(r))
		require.NoError(t, md.ResourceMetrics().AppendEmpty().Resource().Attributes().FromRaw(r))
	}
	errs := make(chan error, 2)
	go func() { _, err := h.traces.processTraces(t.Context(), td); errs <- err }()
	go func() { _, err := h.metrics.processMetrics(t.Context(), md); errs <- err }()
	h.waitHeld(t, 2)
	h.clock.Advance(defaultSingleNodeSettle)
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)

	ids := map[string]bool{}
	for i := range in {
		v, _ := td.ResourceSpans().At(i).Resource().Attributes().Get(attrkey.RunID)
		ids[v.Str()] = true
		v, _ = md.ResourceMetrics().At(i).Resource().Attributes().Get(attrkey.RunID)
		ids[v.Str()] = true
	}
	assert.Len(t, ids, 1, "one run id across signals processed concurrently")
}
