// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/otlpsink"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// TestOutageAndRestartLoseNothing: the backend is down (503) while a job
// sends, the collector is restarted during the outage, and after the backend
// recovers every span the collector acknowledged arrives. Delivery is
// at-least-once: the persistent queue removes a request only once the backend
// accepted it, so a request in flight at shutdown is sent again after restart.
func TestOutageAndRestartLoseNothing(t *testing.T) {
	sink, down := downSink(t)

	env := otlpBackendEnv(t, sink.URL)
	env["OTLP_BACKEND_METRICS"], env["OTLP_BACKEND_LOGS"] = "true", "true"
	preset := testcollector.Config(t, "otlp.yaml")
	first := testcollector.Start(t, preset, testcollector.Options{Env: env})
	sent := runJob(t, mixedJob(first, "run-outage", 4, 3))
	waitFor(t, deliveryTimeout, "the exporter to retry against the down backend", func() bool { return sink.Refused() >= 3 })
	first.Stop()
	if n := sink.Count(otlpsink.Traces); n != 0 {
		t.Fatalf("%d spans were accepted while the backend was down", n)
	}

	down.Store(false)
	second := testcollector.Start(t, preset, testcollector.Options{Env: env})
	waitFor(t, deliveryTimeout, "the queued spans after the restart", func() bool {
		return distinctSpans(sink) == int(sent.Spans)
	})
	second.Stop()
	t.Logf("acknowledged %s; after recovery the backend holds %d distinct spans in %d span deliveries (%d requests refused during the outage)",
		describe(sent), distinctSpans(sink), sink.Count(otlpsink.Traces), sink.Refused())
	if got := sinkResult(sink).DataPoints; got < sent.DataPoints {
		t.Errorf("metrics: %d data points arrived, %d acknowledged", got, sent.DataPoints)
	}
	if got := sink.Count(otlpsink.Logs); got < int(sent.LogRecords) {
		t.Errorf("logs: %d records arrived, %d acknowledged", got, sent.LogRecords)
	}
}

// downSink starts a fake OTLP backend that answers 503 while down holds
// (it starts down); it is closed when the test ends.
func downSink(t *testing.T) (*otlpsink.Sink, *atomic.Bool) {
	t.Helper()
	sink, err := otlpsink.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Close() })
	down := &atomic.Bool{}
	down.Store(true)
	sink.SetRespond(func(otlpsink.Request) (int, http.Header, []byte) {
		if down.Load() {
			return http.StatusServiceUnavailable, nil, []byte("backend down for the test")
		}
		return 0, nil, nil
	})
	return sink, down
}

func distinctSpans(s *otlpsink.Sink) int {
	type id struct {
		trace pcommon.TraceID
		span  pcommon.SpanID
	}
	seen := map[id]bool{}
	for _, r := range s.Requests() {
		if r.Signal != otlpsink.Traces {
			continue
		}
		for i := 0; i < r.Traces.ResourceSpans().Len(); i++ {
			ss := r.Traces.ResourceSpans().At(i).ScopeSpans()
			for j := 0; j < ss.Len(); j++ {
				spans := ss.At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					seen[id{spans.At(k).TraceID(), spans.At(k).SpanID()}] = true
				}
			}
		}
	}
	return len(seen)
}

// TestOTLPPresetKilledUnderLoad: configs/otlp.yaml SIGKILLed while a job
// sends (4 ranks, every step shape, a step every 100 ms) and started again
// on the same ports and queue 1 s later. Every span it acknowledged before
// or after the kill reaches the backend (the persistent queue is read back
// at start); what was sent twice is counted.
func TestOTLPPresetKilledUnderLoad(t *testing.T) {
	sink, taken := takingSink(t, func(otlpsink.Request) (int, http.Header, []byte) { return 0, nil, nil })
	env := otlpBackendEnv(t, sink.URL)
	preset := testcollector.Config(t, "otlp.yaml")
	first := testcollector.Start(t, preset, testcollector.Options{Env: env})
	acked := lensemu.NewAckLog()
	job := startJob(t, deadLetterJob(first, "run-killed", 200, acked)) // 20 s
	time.Sleep(6 * time.Second)
	before := len(acked.IDs())
	first.Kill()
	time.Sleep(time.Second)
	second := testcollector.Start(t, preset, testcollector.Options{Env: first.Env})
	_, jobErr := job.wait()
	ids := hexIDs(acked)
	delivered, lettered, dups := waitAccounted(t, deliveryTimeout, ids, taken.snapshot, env["NEMO_TELEMETRY_DIR"], "nemo_otlp")
	second.Stop()
	t.Logf("killed under load: %d spans acknowledged (%d before the kill), %d delivered, %d dead-lettered, %d duplicates; the ranks saw %s",
		len(ids), before, len(delivered), len(lettered), dups, firstLine(jobErr))
	if len(lettered) != 0 {
		t.Errorf("%d spans dead-lettered by a backend that takes everything", len(lettered))
	}
	if before == 0 || len(ids) == before {
		t.Fatalf("acknowledged %d before the kill, %d in all: the kill was not under load", before, len(ids))
	}
}
