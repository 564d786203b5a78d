package nemorunprocessor

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nemo-lens/otelcol-nemo/internal/clock/clocktest"
	"github.com/nemo-lens/otelcol-nemo/processor/nemorunprocessor/internal/metadatatest"
)

// perProcessID is the id NeMo Lens would mint for one process: 12
// lowercase hex characters, distinct per (job, rank).
func perProcessID(job, rank int) string {
	return fmt.Sprintf("%04x%08x", 0xa000+job, 0x10000000+rank*7919)
}

// torchrunRank is one rank of `torchrun --nproc-per-node <worldSize>` on
// host, launched without NEMO_LENS_RUN_ID, SLURM or Kubernetes: it carries
// its own per-process id and no job key. Odd ranks send their rank
// attributes as strings, as OTEL_RESOURCE_ATTRIBUTES would.
func torchrunRank(host string, job, rank, worldSize int) map[string]any {
	id := perProcessID(job, rank)
	m := map[string]any{
		"service.name":        "megatron",
		"service.instance.id": fmt.Sprintf("%s-rank%d", id, rank),
		"nemo.run.id":         id,
		"host.name":           host,
		"process.pid":         int64(4000 + 100*job + rank),
		"host.gpu.count":      int64(8),
	}
	if rank%2 == 0 {
		m["nv.dl.rank"], m["nv.dl.world_size"], m["nv.dl.local_rank"] = int64(rank), int64(worldSize), int64(rank)
	} else {
		m["dl.rank"], m["dl.world_size"], m["dl.local_rank"] = fmt.Sprint(rank), fmt.Sprint(worldSize), fmt.Sprint(rank)
	}
	return m
}

// singleNodeHarness is one nemo_run component (traces and metrics
// processors from one factory) on a fake clock, with its logs and internal
// metrics observed.
type singleNodeHarness struct {
	clock   *clocktest.Fake
	logs    *observer.ObservedLogs
	tel     *componenttest.Telemetry
	factory *runFactory
	traces  *runProcessor
	metrics *runProcessor
}

func newSingleNodeHarness(t *testing.T, configure func(*Config)) *singleNodeHarness {
	t.Helper()
	h := &singleNodeHarness{clock: clocktest.NewFake()}
	core, logs := observer.New(zapcore.InfoLevel)
	h.logs = logs
	h.tel = componenttest.NewTelemetry()
	t.Cleanup(func() { require.NoError(t, h.tel.Shutdown(context.Background())) })
	set := metadatatest.NewSettings(h.tel)
	set.Logger = zap.New(core)
	cfg := createDefaultConfig().(*Config)
	if configure != nil {
		configure(cfg)
	}
	require.NoError(t, cfg.Validate())
	h.factory = newRunFactory(h.clock)
	var err error
	h.traces, err = h.factory.newProcessor(set, cfg, "traces")
	require.NoError(t, err)
	h.metrics, err = h.factory.newProcessor(set, cfg, "metrics")
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, h.traces.shutdown(context.Background()))
		require.NoError(t, h.metrics.shutdown(context.Background()))
	})
	return h
}

// sent is one batch on its way through a processor: the output resource
// attributes and the error, once it returns.
type sent struct {
	done chan struct{}
	out  []map[string]any
	err  error
}

// start runs one batch of resources through the traces or metrics processor
// on a goroutine of its own, with ctx, so that the test can move the clock
// while single-node reconciliation holds it.
func (h *singleNodeHarness) start(t *testing.T, ctx context.Context, signal string, resources ...map[string]any) *sent {
	t.Helper()
	s := &sent{done: make(chan struct{})}
	switch signal {
	case "traces":
		td := ptrace.NewTraces()
		for _, r := range resources {
			rs := td.ResourceSpans().AppendEmpty()
			require.NoError(t, rs.Resource().Attributes().FromRaw(r))
			rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("megatron.train_step")
		}
		go func() {
			defer close(s.done)
			_, s.err = h.traces.processTraces(ctx, td)
			for i := 0; i < td.ResourceSpans().Len(); i++ {
				s.out = append(s.out, td.ResourceSpans().At(i).Resource().Attributes().AsRaw())
			}
		}()
	case "metrics":
		md := pmetric.NewMetrics()
		for _, r := range resources {
			rm := md.ResourceMetrics().AppendEmpty()
			require.NoError(t, rm.Resource().Attributes().FromRaw(r))
			rm.ScopeMetrics().AppendEmpty().Metrics().AppendEmpty().SetEmptyGauge().DataPoints().AppendEmpty().SetDoubleValue(1)
		}
		go func() {
			defer close(s.done)
			_, s.err = h.metrics.processMetrics(ctx, md)
			for i := 0; i < md.ResourceMetrics().Len(); i++ {
				s.out = append(s.out, md.ResourceMetrics().At(i).Resource().Attributes().AsRaw())
			}
		}()
	default:
		t.Fatalf("unknown signal %q", signal)
	}
	return s
}

// result waits for the batch to return; a batch still held after 10s
// (real time) fails the test.
func (s *sent) result(t *testing.T) ([]map[string]any, error) {
	t.Helper()
	select {
	case <-s.done:
		return s.out, s.err
	case <-time.After(10 * time.Second):
		t.Fatal("the batch is still held")
		return nil, nil
	}
}

// returned reports whether the batch has returned.
func (s *sent) returned() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// send runs one batch that is not held through the traces or metrics
// processor and returns the resulting resource attributes.
func (h *singleNodeHarness) send(t *testing.T, signal string, resources ...map[string]any) []map[string]any {
	t.Helper()
	out, err := h.start(t, t.Context(), signal, resources...).result(t)
	require.NoError(t, err)
	return out
}

// sendHeld runs one batch that single-node reconciliation holds: once it is
// held, it moves the clock by d (the settle or the hold) and returns the
// output of the released batch.
func (h *singleNodeHarness) sendHeld(t *testing.T, d time.Duration, signal string, resources ...map[string]any) []map[string]any {
	t.Helper()
	s := h.start(t, t.Context(), signal, resources...)
	h.waitHeld(t, 1)
	require.False(t, s.returned(), "held until decided")
	h.clock.Advance(d)
	out, err := s.result(t)
	require.NoError(t, err)
	return out
}

// waitHeld waits until n requests are held.
func (h *singleNodeHarness) waitHeld(t *testing.T, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return h.state().heldRequests() >= n }, 10*time.Second, time.Millisecond,
		"%d requests held", n)
}

func (h *singleNodeHarness) state() *singleNode { return h.traces.single }

func (h *singleNodeHarness) warnings() []observer.LoggedEntry {
	return h.logs.FilterLevelExact(zapcore.WarnLevel).All()
}

// assertUnreconciled checks otelcol_processor_nemo_run_unreconciled_ids for
// the traces signal.
func (h *singleNodeHarness) assertUnreconciled(t *testing.T, want map[string]int64) {
	t.Helper()
	var dps []metricdata.DataPoint[int64]
	for reason, n := range want {
		dps = append(dps, metricdata.DataPoint[int64]{
			Attributes: attribute.NewSet(attribute.String("otel.signal", "traces"), attribute.String("reason", reason)),
			Value:      n,
		})
	}
	metadatatest.AssertEqualProcessorNemoRunUnreconciledIds(t, h.tel, dps,
		metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
}

func (h *singleNodeHarness) assertNoUnreconciled(t *testing.T) {
	t.Helper()
	_, err := h.tel.GetMetric("otelcol_processor_nemo_run_unreconciled_ids")
	assert.Error(t, err, "no per-process id was left unreconciled")
}

// reconciledTo is in with its run id replaced by runID the way single-node
// reconciliation writes it.
func reconciledTo(in map[string]any, runID string) map[string]any {
	want := maps.Clone(in)
	want["nemo.original_run_id"] = in["nemo.run.id"]
	want["nemo.run.id"] = runID
	want["nemo.run_id_source"] = "single_node"
	return want
}

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
	gotA := h.sendHeld(t, defaultSingleNodeSettle, "traces", jobA...)
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
	got := h.sendHeld(t, defaultSingleNodeHold, "traces", a0, b1)
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
	h.sendHeld(t, defaultSingleNodeHold, "traces", early...)

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
	got := h.sendHeld(t, defaultSingleNodeSettle, "traces", next...)
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
	got := h.sendHeld(t, defaultSingleNodeSettle, "traces", in...)
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
	got := h.sendHeld(t, defaultSingleNodeSettle, "traces", in...)
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
		h.sendHeld(t, defaultSingleNodeSettle, "traces", torchrunRank("dgx-07", 1, 0, 2), torchrunRank("dgx-07", 1, 1, 2))
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
		h.sendHeld(t, defaultSingleNodeSettle, "traces", r0, r1)
		delete(h.state().ids, perProcessID(1, 1))
		h.clock.Advance(time.Hour)
		assert.Equal(t, []map[string]any{reconciledTo(r1, perProcessID(1, 0))}, h.send(t, "traces", r1))
	})
	t.Run("released with the last processor", func(t *testing.T) {
		h := newSingleNodeHarness(t, nil)
		assert.Same(t, h.traces.single, h.metrics.single, "signals of one component share their launches")
		require.Len(t, h.factory.single, 1)
		require.NoError(t, h.traces.shutdown(t.Context()))
		assert.Len(t, h.factory.single, 1)
		require.NoError(t, h.metrics.shutdown(t.Context()))
		assert.Empty(t, h.factory.single)
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
	go func() { _, err := h.traces.processTraces(context.Background(), td); errs <- err }()
	go func() { _, err := h.metrics.processMetrics(context.Background(), md); errs <- err }()
	h.waitHeld(t, 2)
	h.clock.Advance(defaultSingleNodeSettle)
	require.NoError(t, <-errs)
	require.NoError(t, <-errs)

	ids := map[string]bool{}
	for i := range in {
		v, _ := td.ResourceSpans().At(i).Resource().Attributes().Get(attrRunID)
		ids[v.Str()] = true
		v, _ = md.ResourceMetrics().At(i).Resource().Attributes().Get(attrRunID)
		ids[v.Str()] = true
	}
	assert.Len(t, ids, 1, "one run id across signals processed concurrently")
}

// sendInOrder sends each resource as a request of its own, in order, each
// only once the one before has returned or is held, and returns the
// requests.
func (h *singleNodeHarness) sendInOrder(t *testing.T, resources []map[string]any) []*sent {
	t.Helper()
	var reqs []*sent
	for _, r := range resources {
		before := h.state().heldRequests()
		s := h.start(t, t.Context(), "traces", r)
		require.Eventually(t, func() bool { return s.returned() || h.state().heldRequests() > before }, 10*time.Second, time.Millisecond)
		reqs = append(reqs, s)
	}
	return reqs
}

// results waits for every request and returns their single resources.
func results(t *testing.T, reqs []*sent) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, s := range reqs {
		got, err := s.result(t)
		require.NoError(t, err)
		require.Len(t, got, 1)
		out = append(out, got[0])
	}
	return out
}

func anyReturned(reqs []*sent) bool {
	for _, s := range reqs {
		if s.returned() {
			return true
		}
	}
	return false
}

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
	gotA := h.sendHeld(t, defaultSingleNodeSettle, "traces", jobA...)
	h.clock.Advance(30 * time.Second)
	gotB := h.sendHeld(t, defaultSingleNodeSettle, "traces", jobB...)
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
	s := h.start(t, t.Context(), "traces", torchrunRank("dgx-07", 1, 1, 2), torchrunRank("dgx-08", 2, 1, 4))
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
	s := h.start(t, ctx, "traces", r1)
	h.waitHeld(t, 1)
	cancel()
	_, err := s.result(t)
	require.ErrorIs(t, err, context.Canceled, "the receiver answers the sender with a retryable error")
	assert.Zero(t, h.state().heldRequests())

	// The sender retries: its id is still part of the launch.
	h.clock.Advance(time.Second)
	got := h.sendHeld(t, defaultSingleNodeHold, "traces", r1)
	assert.Equal(t, []map[string]any{reconciledTo(r1, perProcessID(1, 0))}, got)
}

func TestSingleNodeShutdownReleasesHeldRequests(t *testing.T) {
	h := newSingleNodeHarness(t, nil)
	h.send(t, "traces", torchrunRank("dgx-07", 1, 0, 4))
	traces := h.start(t, t.Context(), "traces", torchrunRank("dgx-07", 1, 1, 4))
	metrics := h.start(t, t.Context(), "metrics", torchrunRank("dgx-07", 1, 2, 4))
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
	held := h.start(t, t.Context(), "traces", torchrunRank("dgx-07", 1, 1, 4))
	h.waitHeld(t, 1)
	_, err := h.start(t, t.Context(), "traces", torchrunRank("dgx-07", 1, 2, 4)).result(t)
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
	held := h.start(t, t.Context(), "traces", torchrunRank("dgx-07", 1, 1, 8))
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
