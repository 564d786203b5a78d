// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package spoolexporter

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/loadbalancingexporter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/ptrace"

	"github.com/nemo-lens/otelcol-nemo/exporter/spoolexporter/internal/metadata"
	"github.com/nemo-lens/otelcol-nemo/internal/deadletter"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/otlpsink"
)

func testConfig(tb testing.TB, gateways ...string) *Config {
	tb.Helper()
	cfg := createDefaultConfig().(*Config)
	cfg.Directory = tb.TempDir() // the node's disk: a spool started again on cfg reads it back
	cfg.RetryConfig.InitialInterval = 10 * time.Millisecond
	cfg.RetryConfig.MaxInterval = 50 * time.Millisecond
	cfg.DrainTimeout = 100 * time.Millisecond // stopped while a gateway refuses: do not wait long
	cfg.LoadBalancing.RoutingKey = "attributes"
	cfg.LoadBalancing.RoutingAttributes = []string{"nemo.run.id"}
	cfg.LoadBalancing.Protocol.OTLP.ClientConfig.TLS.Insecure = true
	cfg.LoadBalancing.Protocol.OTLP.TimeoutConfig.Timeout = 2 * time.Second
	cfg.LoadBalancing.Resolver.Static = configoptional.Some(loadbalancingexporter.StaticResolver{Hostnames: gateways})
	cfg.DeadLetter.Directory = tb.TempDir()
	require.NoError(tb, cfg.Validate())
	return cfg
}

func startSpool(tb testing.TB, cfg *Config) exporter.Traces {
	tb.Helper()
	set := exportertest.NewNopSettings(metadata.Type)
	set.ID = component.NewID(metadata.Type) // the same slots' queues after a restart
	exp, err := NewFactory().CreateTraces(tb.Context(), set, cfg)
	require.NoError(tb, err)
	require.NoError(tb, exp.Start(tb.Context(), componenttest.NewNopHost()))
	return exp
}

// startGateway starts a real OTLP/gRPC receiver as a gateway, closed at
// the end of the test.
func startGateway(tb testing.TB) *otlpsink.Sink {
	tb.Helper()
	gw, err := otlpsink.StartGRPC()
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = gw.Close() })
	return gw
}

func runTraces(run string, spans int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("nemo.run.id", run)
	ss := rs.ScopeSpans().AppendEmpty()
	for i := range spans {
		s := ss.Spans().AppendEmpty()
		s.SetName(fmt.Sprintf("%s-%d", run, i))
	}
	return td
}

func spansOf(s *otlpsink.Sink) int { return s.Count(otlpsink.Traces) }

// refuse makes a gateway answer UNAVAILABLE (HTTP 503) to everything.
func refuse(s *otlpsink.Sink) {
	s.SetRespond(func(otlpsink.Request) (int, http.Header, []byte) { return http.StatusServiceUnavailable, nil, nil })
}

// TestADownGatewayHoldsOnlyItsRuns: two gateways, two runs in different
// slots, one run on each. While gateway A refuses everything, the spool
// still takes run A's spans (on disk) and run B's reach gateway B; the
// spool is stopped and a new one started on the same disk, and once
// gateway A takes data again every span of run A arrives, once.
func TestADownGatewayHoldsOnlyItsRuns(t *testing.T) {
	gwA := startGateway(t)
	gwB := startGateway(t)
	cfg := testConfig(t, gwA.Addr, gwB.Addr)

	// A run on each gateway, in different slots: probe runs one by one.
	exp := startSpool(t, cfg)
	runA, runB := "", ""
	s := spoolOf(t, cfg)
	for i := 0; runA == "" || runB == ""; i++ {
		require.Less(t, i, 200, "no two runs on different gateways and slots")
		run := fmt.Sprintf("run-%d", i)
		before := spansOf(gwA)
		require.NoError(t, exp.ConsumeTraces(t.Context(), runTraces(run, 1)))
		require.Eventually(t, func() bool { return spansOf(gwA)+spansOf(gwB) == i+1 }, 10*time.Second, 5*time.Millisecond)
		onA := spansOf(gwA) > before
		switch {
		case onA && runA == "" && (runB == "" || s.slotOf(runTraces(run, 0).ResourceSpans().At(0).Resource()) != s.slotOf(runTraces(runB, 0).ResourceSpans().At(0).Resource())):
			runA = run
		case !onA && runB == "" && (runA == "" || s.slotOf(runTraces(run, 0).ResourceSpans().At(0).Resource()) != s.slotOf(runTraces(runA, 0).ResourceSpans().At(0).Resource())):
			runB = run
		}
	}
	baseA, baseB := spansOf(gwA), spansOf(gwB)

	refuse(gwA)
	for range 10 {
		require.NoError(t, exp.ConsumeTraces(t.Context(), runTraces(runA, 100)), "the spool refused while its gateway was down: it must hold")
		require.NoError(t, exp.ConsumeTraces(t.Context(), runTraces(runB, 100)))
	}
	require.Eventually(t, func() bool { return spansOf(gwB) == baseB+1000 }, 10*time.Second, 10*time.Millisecond,
		"run B's spans did not reach its gateway while run A's was down: %d of 1000", spansOf(gwB)-baseB)
	assert.Equal(t, baseA, spansOf(gwA))

	// Stopped while gateway A is down: the new spool sends what the old one held.
	require.NoError(t, exp.Shutdown(context.WithoutCancel(t.Context())))
	exp = startSpool(t, cfg)
	t.Cleanup(func() { _ = exp.Shutdown(context.WithoutCancel(t.Context())) })
	gwA.SetRespond(nil)
	require.Eventually(t, func() bool { return spansOf(gwA) >= baseA+1000 }, 10*time.Second, 10*time.Millisecond,
		"run A's held spans did not arrive after a restart: %d of 1000", spansOf(gwA)-baseA)
	time.Sleep(100 * time.Millisecond)
	assert.Equal(t, baseA+1000, spansOf(gwA), "duplicates")
	assert.Equal(t, baseB+1000, spansOf(gwB), "duplicates")
}

// TestARequestOfManyRunsIsSplitBySlot: a request holding resources of
// several runs is written to each run's slot; every span arrives once.
func TestARequestOfManyRunsIsSplitBySlot(t *testing.T) {
	gw := startGateway(t)
	cfg := testConfig(t, gw.Addr)
	exp := startSpool(t, cfg)
	t.Cleanup(func() { _ = exp.Shutdown(context.WithoutCancel(t.Context())) })
	td := ptrace.NewTraces()
	s := spoolOf(t, cfg)
	slots := map[int]bool{}
	for i := range 8 {
		one := runTraces(fmt.Sprintf("run-%d", i), 10)
		slots[s.slotOf(one.ResourceSpans().At(0).Resource())] = true
		one.ResourceSpans().MoveAndAppendTo(td.ResourceSpans())
	}
	require.Greater(t, len(slots), 1)
	require.NoError(t, exp.ConsumeTraces(t.Context(), td))
	require.Eventually(t, func() bool { return spansOf(gw) == 80 }, 10*time.Second, 10*time.Millisecond)
}

// spoolOf is a spool with the config's slots, for slotOf.
func spoolOf(t *testing.T, cfg *Config) *spool[ptrace.Traces] {
	t.Helper()
	s := newSpool(cfg, nil, traces.Signal, traces.codec, nil, func() {})
	return s
}

// TestHeldSpansFollowTheirRunToItsNewGateway: what the spool held for a
// gateway that is gone goes to the gateway its run hashes to when it is
// sent. Gateway A refuses; the spool is stopped and started again with A
// out of the ring (as the dns resolver drops a gateway that left DNS), and
// every span it held for A's run arrives at B.
func TestHeldSpansFollowTheirRunToItsNewGateway(t *testing.T) {
	gwA := startGateway(t)
	gwB := startGateway(t)

	refuse(gwA)
	cfg := testConfig(t, gwA.Addr, gwB.Addr)
	exp := startSpool(t, cfg)
	run := ""
	for i := 0; run == ""; i++ {
		require.Less(t, i, 100, "no run hashes to gateway A")
		candidate := fmt.Sprintf("run-%d", i)
		require.NoError(t, exp.ConsumeTraces(t.Context(), runTraces(candidate, 1)))
		// Gateway A refuses: a run that reached B within the wait is B's.
		if !within(500*time.Millisecond, func() bool { return spansOf(gwB) == i+1 }) {
			run = candidate
		}
	}
	require.NoError(t, exp.ConsumeTraces(t.Context(), runTraces(run, 99)))
	require.NoError(t, exp.Shutdown(t.Context()))
	require.Zero(t, spansOf(gwA))

	before := spansOf(gwB)
	moved := testConfig(t, gwB.Addr)
	moved.Directory = cfg.Directory
	exp = startSpool(t, moved)
	t.Cleanup(func() { _ = exp.Shutdown(context.WithoutCancel(t.Context())) })
	require.Eventually(t, func() bool { return spansOf(gwB) == before+100 }, 10*time.Second, 10*time.Millisecond,
		"the spans held for gateway A did not reach the run's new gateway: %d of 100", spansOf(gwB)-before)
}

// within polls cond until it holds (true) or d has passed (false).
func within(d time.Duration, cond func() bool) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
	}
	return cond()
}

// TestAStoppingSpoolSendsWhatItTook: a spool stopped right after it took
// data, its gateway slow but up, sends everything before it stops (at
// most drain_timeout): a job's last flush reaches the gateway, it is not
// left on the node's disk.
func TestAStoppingSpoolSendsWhatItTook(t *testing.T) {
	gw := startGateway(t)
	gw.SetRespond(func(otlpsink.Request) (int, http.Header, []byte) {
		time.Sleep(200 * time.Millisecond) // a slow gateway
		return 0, nil, nil
	})
	cfg := testConfig(t, gw.Addr)
	cfg.DrainTimeout = 10 * time.Second
	exp := startSpool(t, cfg)
	for i := range 20 {
		require.NoError(t, exp.ConsumeTraces(t.Context(), runTraces(fmt.Sprintf("run-%d", i%4), 50)))
	}
	require.NoError(t, exp.Shutdown(t.Context()))
	assert.Equal(t, 1000, spansOf(gw), "sent before the spool stopped")
}

// TestAGatewaysPermanentRefusalIsDeadLettered: a gateway that refuses for
// good (a rejected token: UNAUTHENTICATED) does not get the request again
// forever, and the request is not dropped: it is in its run's dead-letter
// file on the node, with the gateway's answer.
func TestAGatewaysPermanentRefusalIsDeadLettered(t *testing.T) {
	gw := startGateway(t)
	gw.SetRespond(func(otlpsink.Request) (int, http.Header, []byte) {
		return http.StatusUnauthorized, nil, []byte("bad token")
	})
	cfg := testConfig(t, gw.Addr)
	exp := startSpool(t, cfg)
	require.NoError(t, exp.ConsumeTraces(t.Context(), runTraces("run-a", 7)))
	path := filepath.Join(deadletter.Dir(cfg.DeadLetter.Directory, "run-a", "spool"), "traces.jsonl")
	require.Eventually(t, func() bool { _, statErr := os.Stat(path); return statErr == nil }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, exp.Shutdown(t.Context()))
	body, err := os.ReadFile(path)
	require.NoError(t, err)
	td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(bytes.TrimSpace(body))
	require.NoError(t, err, "one OTLP JSON line")
	assert.Equal(t, 7, td.SpanCount())
	reason, _ := td.ResourceSpans().At(0).Resource().Attributes().Get(deadletter.AttrReason)
	detail, _ := td.ResourceSpans().At(0).Resource().Attributes().Get(deadletter.AttrError)
	assert.Equal(t, "refused", reason.Str())
	assert.Contains(t, detail.Str(), "bad token")
	assert.Equal(t, 1, gw.Refused(), "refused for good: not sent again")
}
