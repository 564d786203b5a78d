// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemorunprocessor

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSingleNodeHoldsRanksUntilTheLaunchSettles(t *testing.T) {
	h := newSingleNodeHarness(t, nil)
	order := []int{0, 1, 2, 3, 4, 5, 6, 7}
	rand.New(rand.NewPCG(3, 4)).Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	var in []map[string]any
	for _, r := range order {
		in = append(in, torchrunRank("dgx-07", 1, r, 8))
		h.clock.Advance(100 * time.Millisecond)
	}
	reqs := h.sendInOrder(t, in)

	first, err := reqs[0].result(t)
	require.NoError(t, err)
	assert.Equal(t, in[0], first[0], "the first rank's id is its run id whatever the decision: never held")
	assert.Equal(t, 7, h.state().heldRequests())

	h.clock.Advance(defaultSingleNodeSettle - 200*time.Millisecond)
	assert.False(t, anyReturned(reqs[1:]), "complete, but settle has not passed since the last new id")
	h.clock.Advance(200 * time.Millisecond)
	got := results(t, reqs)
	jobID := perProcessID(1, order[0])
	for i := 1; i < len(in); i++ {
		assert.Equal(t, reconciledTo(in[i], jobID), got[i], "rank %d", order[i])
	}
	assert.Zero(t, h.state().heldRequests())
	assert.Empty(t, h.warnings())
	info := h.logs.FilterMessageSnippet("share the id of its first rank").All()
	require.Len(t, info, 1)
	assert.Equal(t, jobID, info[0].ContextMap()["run_id"])
	h.assertNoUnreconciled(t)
}

// Two jobs of 8 ranks each started together on one host: whatever the order
// of their first requests, none of their ids is merged, they are warned
// about once and each id but the launch's first is counted.
func TestSingleNodeNeverMergesConcurrentLaunches(t *testing.T) {
	type rank struct{ job, rank int }
	var a, b []rank
	for r := range 8 {
		a, b = append(a, rank{1, r}), append(b, rank{2, r})
	}
	orders := map[string][]rank{
		// Today's merge: 8 distinct ranks, a complete world size, before
		// the first duplicate.
		"A0-A3 and B4-B7 first": slices.Concat(a[:4], b[4:], a[4:], b[:4]),
		"B4-B7 and A0-A3 first": slices.Concat(b[4:], a[:4], b[:4], a[4:]),
		"A complete, then B":    slices.Concat(a, b),
		"alternating":           nil,
		"one rank each, then the rest": slices.Concat(a[:1], b[1:2], a[2:3], b[3:4], a[4:5], b[5:6], a[6:7], b[7:],
			b[:1], a[1:2], b[2:3], a[3:4], b[4:5], a[5:6], b[6:7], a[7:]),
	}
	for r := range 8 {
		orders["alternating"] = append(orders["alternating"], a[r], b[r])
	}
	for seed := range uint64(12) {
		o := slices.Concat(a, b)
		rand.New(rand.NewPCG(seed, 99)).Shuffle(len(o), func(i, j int) { o[i], o[j] = o[j], o[i] })
		orders[fmt.Sprintf("shuffled/%d", seed)] = o
	}
	for name, order := range orders {
		t.Run(name, func(t *testing.T) {
			h := newSingleNodeHarness(t, nil)
			var in []map[string]any
			for _, r := range order {
				in = append(in, torchrunRank("dgx-07", r.job, r.rank, 8))
			}
			reqs := h.sendInOrder(t, in[:len(in)/2])
			h.clock.Advance(300 * time.Millisecond) // the second job's first reports come a little later, within settle
			reqs = append(reqs, h.sendInOrder(t, in[len(in)/2:])...)
			got := results(t, reqs)
			for i := range in {
				assert.Equal(t, in[i], got[i], "job %d rank %d keeps its own id", order[i].job, order[i].rank)
			}
			assert.Zero(t, h.state().heldRequests())

			// And so they stay, on any signal.
			h.clock.Advance(time.Minute)
			assert.Equal(t, in, h.send(t, "metrics", in...))

			warnings := h.warnings()
			require.Len(t, warnings, 1, "warned once")
			assert.Contains(t, warnings[0].Message, "before their launch was decided")
			ctx := warnings[0].ContextMap()
			assert.Equal(t, "concurrent_launches", ctx["reason"])
			assert.Equal(t, "dgx-07", ctx["host.name"])
			assert.Contains(t, ctx["fix"], "NEMO_LENS_RUN_ID")
			assert.Contains(t, ctx["fix"], "NEMO_RUN_OVERRIDE=true")
			h.assertUnreconciled(t, map[string]int64{"concurrent_launches": 15})
			assert.Empty(t, h.logs.FilterMessageSnippet("share the id of its first rank").All())
		})
	}
}

func TestSingleNodeMergesJobsLaunchedApart(t *testing.T) {
	h := newSingleNodeHarness(t, nil)
	var jobA, jobB []map[string]any
	for r := range 8 {
		jobA = append(jobA, torchrunRank("dgx-07", 1, r, 8))
		jobB = append(jobB, torchrunRank("dgx-07", 2, 7-r, 8))
	}
	gotA := h.sendHeld(t, defaultSingleNodeSettle, jobA...)
	h.clock.Advance(30 * time.Second)
	gotB := h.sendHeld(t, defaultSingleNodeSettle, jobB...)
	assert.Equal(t, jobA[0], gotA[0])
	assert.Equal(t, jobB[0], gotB[0])
	for i := 1; i < 8; i++ {
		assert.Equal(t, reconciledTo(jobA[i], perProcessID(1, 0)), gotA[i])
		assert.Equal(t, reconciledTo(jobB[i], perProcessID(2, 7)), gotB[i], "job B is a launch of its own: A was complete and is past its hold")
	}
	assert.Empty(t, h.warnings())
	h.assertNoUnreconciled(t)
	assert.Len(t, h.logs.FilterMessageSnippet("share the id of its first rank").All(), 2)
}

func TestSingleNodeReleasesAnIncompleteLaunchAtTheHold(t *testing.T) {
	h := newSingleNodeHarness(t, nil)
	var in []map[string]any
	for _, r := range []int{0, 1, 2, 3, 4, 6, 7} { // rank 5 never reports
		in = append(in, torchrunRank("dgx-07", 1, r, 8))
	}
	reqs := h.sendInOrder(t, in)
	h.clock.Advance(defaultSingleNodeHold - 200*time.Millisecond)
	assert.False(t, anyReturned(reqs[1:]), "held until single_node_hold")
	h.clock.Advance(200 * time.Millisecond)
	got := results(t, reqs)
	assert.Equal(t, in[0], got[0])
	for i := 1; i < len(in); i++ {
		assert.Equal(t, reconciledTo(in[i], perProcessID(1, 0)), got[i])
	}

	// Rank 5, late but within the window, joins at once.
	h.clock.Advance(10 * time.Second)
	late := torchrunRank("dgx-07", 1, 5, 8)
	assert.Equal(t, []map[string]any{reconciledTo(late, perProcessID(1, 0))}, h.send(t, "traces", late))
	assert.Empty(t, h.warnings())
}

// One request with resources of two undecided launches waits for both.
func TestSingleNodeRequestWaitsForEveryLaunchItTouches(t *testing.T) {
	h := newSingleNodeHarness(t, nil)
	h.send(t, "traces", torchrunRank("dgx-07", 1, 0, 2), torchrunRank("dgx-08", 2, 0, 4))
	s := h.start(t.Context(), t, "traces", torchrunRank("dgx-07", 1, 1, 2), torchrunRank("dgx-08", 2, 1, 4))
	h.waitHeld(t, 1)
	h.clock.Advance(defaultSingleNodeSettle)
	assert.False(t, s.returned(), "dgx-07's launch is decided, dgx-08's is not")
	h.clock.Advance(defaultSingleNodeHold - defaultSingleNodeSettle)
	got, err := s.result(t)
	require.NoError(t, err)
	assert.Equal(t, perProcessID(1, 0), got[0]["nemo.run.id"])
	assert.Equal(t, perProcessID(2, 0), got[1]["nemo.run.id"])
}

func TestSingleNodeHeldRequestHonoursItsContext(t *testing.T) {
	h := newSingleNodeHarness(t, nil)
	r0, r1 := torchrunRank("dgx-07", 1, 0, 4), torchrunRank("dgx-07", 1, 1, 4)
	h.send(t, "traces", r0)
	ctx, cancel := context.WithCancel(t.Context())
	s := h.start(ctx, t, "traces", r1)
	h.waitHeld(t, 1)
	cancel()
	_, err := s.result(t)
	require.ErrorIs(t, err, context.Canceled, "the receiver answers the sender with a retryable error")
	assert.Zero(t, h.state().heldRequests())

	// The sender retries: its id is still part of the launch.
	h.clock.Advance(time.Second)
	got := h.sendHeld(t, defaultSingleNodeHold, r1)
	assert.Equal(t, []map[string]any{reconciledTo(r1, perProcessID(1, 0))}, got)
}

func TestSingleNodeShutdownReleasesHeldRequests(t *testing.T) {
	h := newSingleNodeHarness(t, nil)
	h.send(t, "traces", torchrunRank("dgx-07", 1, 0, 4))
	traces := h.start(t.Context(), t, "traces", torchrunRank("dgx-07", 1, 1, 4))
	metrics := h.start(t.Context(), t, "metrics", torchrunRank("dgx-07", 1, 2, 4))
	h.waitHeld(t, 2)

	require.NoError(t, h.traces.shutdown(t.Context()))
	_, err := traces.result(t)
	require.ErrorIs(t, err, errShuttingDown, "refused, not passed on with an undecided id: the sender retries")
	assert.False(t, metrics.returned(), "the metrics processor still runs")
	require.NoError(t, h.metrics.shutdown(t.Context()))
	_, err = metrics.result(t)
	require.ErrorIs(t, err, errShuttingDown)
}

func TestSingleNodeBoundsHeldRequests(t *testing.T) {
	h := newSingleNodeHarness(t, nil)
	h.state().maxHeld = 1
	h.send(t, "traces", torchrunRank("dgx-07", 1, 0, 4))
	held := h.start(t.Context(), t, "traces", torchrunRank("dgx-07", 1, 1, 4))
	h.waitHeld(t, 1)
	_, err := h.start(t.Context(), t, "traces", torchrunRank("dgx-07", 1, 2, 4)).result(t)
	require.ErrorIs(t, err, errTooManyHeld, "refused, retryably")
	h.clock.Advance(defaultSingleNodeHold)
	_, err = held.result(t)
	require.NoError(t, err)
	got := h.send(t, "traces", torchrunRank("dgx-07", 1, 2, 4))
	assert.Equal(t, perProcessID(1, 0), got[0]["nemo.run.id"], "the retry finds its launch decided")
}

// Only per-process ids without a job key wait: explicit and job-keyed ids
// pass while a launch on the same host is held.
func TestSingleNodeNeverHoldsOtherIDs(t *testing.T) {
	h := newSingleNodeHarness(t, nil)
	h.send(t, "traces", torchrunRank("dgx-07", 1, 0, 8))
	held := h.start(t.Context(), t, "traces", torchrunRank("dgx-07", 1, 1, 8))
	h.waitHeld(t, 1)

	explicit := torchrunRank("dgx-07", 2, 1, 8)
	explicit["nemo.run.id"] = "llama3-8b-sweep-4"
	keyed := torchrunRank("dgx-07", 3, 1, 8)
	keyed["slurm.job.id"] = "4242"
	upstream := torchrunRank("dgx-07", 4, 1, 8)
	upstream["nemo.run_id_source"] = "single_node"
	for _, signal := range []string{"traces", "metrics"} {
		got := h.send(t, signal, explicit, keyed, upstream)
		assert.Equal(t, "llama3-8b-sweep-4", got[0]["nemo.run.id"])
		assert.Equal(t, "4242", got[1]["nemo.run.id"])
		assert.Equal(t, upstream, got[2])
	}
	assert.False(t, held.returned())
	assert.Equal(t, 1, h.state().heldRequests())
	h.clock.Advance(defaultSingleNodeHold)
	_, err := held.result(t)
	require.NoError(t, err)
}
