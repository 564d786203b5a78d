// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemorunprocessor

import (
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/nemo-lens/otelcol-nemo/internal/attrkey"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/clocktest"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensfixture"
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
// attributes as strings in the dl.* spelling, as OTEL_RESOURCE_ATTRIBUTES
// would.
func torchrunRank(host string, job, rank, worldSize int) map[string]any {
	r := lensfixture.Rank{
		Run: perProcessID(job, rank), Rank: int64(rank), WorldSize: int64(worldSize), ServiceName: "megatron",
		GPUsPerNode: int32(worldSize),                        // one node: the local rank is the rank
		HostName:    host, PID: int32(4000 + 100*job + rank), // the processes of two jobs differ
		AsString: rank%2 == 1, LegacyKeys: rank%2 == 1,
		Extra: []lensfixture.KeyValue{{Key: "host.gpu.count", Value: int64(8)}},
	}
	m := pcommon.NewMap()
	r.PutResource(m)
	return m.AsRaw()
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
	t.Cleanup(func() { require.NoError(t, h.tel.Shutdown(context.Background())) }) //nolint:usetesting // t.Context() is canceled before Cleanup runs
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
	//nolint:usetesting // t.Context() is canceled before Cleanup runs
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
func (h *singleNodeHarness) start(ctx context.Context, t *testing.T, signal string, resources ...map[string]any) *sent {
	t.Helper()
	s := &sent{done: make(chan struct{})}
	switch signal {
	case "traces":
		td := ptrace.NewTraces()
		for _, r := range resources {
			rs := td.ResourceSpans().AppendEmpty()
			require.NoError(t, rs.Resource().Attributes().FromRaw(r))
			rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName(attrkey.MegatronTrainStep)
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
	out, err := h.start(t.Context(), t, signal, resources...).result(t)
	require.NoError(t, err)
	return out
}

// sendHeld runs one batch of traces that single-node reconciliation holds:
// once it is held, it moves the clock by d (the settle or the hold) and
// returns the output of the released batch.
func (h *singleNodeHarness) sendHeld(t *testing.T, d time.Duration, resources ...map[string]any) []map[string]any {
	t.Helper()
	s := h.start(t.Context(), t, "traces", resources...)
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

// sendInOrder sends each resource as a request of its own, in order, each
// only once the one before has returned or is held, and returns the
// requests.
func (h *singleNodeHarness) sendInOrder(t *testing.T, resources []map[string]any) []*sent {
	t.Helper()
	var reqs []*sent
	for _, r := range resources {
		before := h.state().heldRequests()
		s := h.start(t.Context(), t, "traces", r)
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
