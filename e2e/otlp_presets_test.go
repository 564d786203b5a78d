// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/otlpsink"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

const deliveryTimeout = 60 * time.Second

// sinkResult counts what a fake backend kept, per signal, leaving out the
// collector's own metrics (nemo_steps': derived, not sent by a rank).
func sinkResult(s *otlpsink.Sink) lensemu.Result {
	return lensemu.Result{
		Spans:      int64(s.Count(otlpsink.Traces)),
		DataPoints: int64(s.Count(otlpsink.Metrics) - derivedPoints(s)),
		LogRecords: int64(s.Count(otlpsink.Logs)),
	}
}

// derivedPrefixes start the names of nemo_steps' metrics: the step
// metrics, and the stall and goodput metrics of runs and ranks (the goodput
// ones at every tick).
var derivedPrefixes = []string{"nemo.step.", "nemo.run.", "nemo.rank."}

// derivedPoints counts nemo_steps' data points a fake backend received.
func derivedPoints(s *otlpsink.Sink) int {
	n := 0
	for _, r := range s.Requests() {
		if r.Signal != otlpsink.Metrics {
			continue
		}
		rms := r.Metrics.ResourceMetrics()
		for i := 0; i < rms.Len(); i++ {
			sms := rms.At(i).ScopeMetrics()
			for j := 0; j < sms.Len(); j++ {
				ms := sms.At(j).Metrics()
				for k := 0; k < ms.Len(); k++ {
					if m := ms.At(k); slices.ContainsFunc(derivedPrefixes, func(p string) bool { return strings.HasPrefix(m.Name(), p) }) {
						n += pointCount(m)
					}
				}
			}
		}
	}
	return n
}

// pointCount is a metric's number of data points, whatever its type.
func pointCount(m pmetric.Metric) int {
	switch m.Type() {
	case pmetric.MetricTypeGauge:
		return m.Gauge().DataPoints().Len()
	case pmetric.MetricTypeSum:
		return m.Sum().DataPoints().Len()
	case pmetric.MetricTypeHistogram:
		return m.Histogram().DataPoints().Len()
	case pmetric.MetricTypeExponentialHistogram:
		return m.ExponentialHistogram().DataPoints().Len()
	case pmetric.MetricTypeSummary:
		return m.Summary().DataPoints().Len()
	}
	return 0
}

// TestHoneycombPreset runs configs/honeycomb.yaml against a fake Honeycomb
// that decodes OTLP and checks both Honeycomb headers on every request of
// every signal.
func TestHoneycombPreset(t *testing.T) {
	sink, err := otlpsink.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	const key, dataset = "hc-test-key-5f1e", "nemo-e2e"
	sink.SetRespond(func(r otlpsink.Request) (int, http.Header, []byte) {
		if r.Header.Get("x-honeycomb-team") != key {
			return http.StatusUnauthorized, nil, []byte(`{"message":"unknown API key"}`)
		}
		return 0, nil, nil
	})
	env := testEnv(t)
	env["HONEYCOMB_ENDPOINT"] = sink.URL
	env["HONEYCOMB_API_KEY"] = key
	env["HONEYCOMB_DATASET"] = dataset
	c := testcollector.Start(t, testcollector.Config(t, "honeycomb.yaml"), testcollector.Options{Env: env})
	sent := runJob(t, mixedJob(c, "run-hc", 4, 3))
	waitFor(t, deliveryTimeout, "every item at the fake Honeycomb", func() bool { return sinkResult(sink) == sent })
	c.Stop()

	seen := map[string]bool{}
	for _, r := range sink.Requests() {
		seen[r.Signal] = true
		if got := r.Header.Get("x-honeycomb-dataset"); got != dataset {
			t.Errorf("%s request: x-honeycomb-dataset = %q, want %q", r.Signal, got, dataset)
		}
		if got := r.Header.Get("Content-Encoding"); got != "gzip" {
			t.Errorf("%s request: Content-Encoding = %q, want gzip", r.Signal, got)
		}
		if r.Path != "/v1/"+r.Signal {
			t.Errorf("%s request went to %s", r.Signal, r.Path)
		}
	}
	if len(seen) != 3 || sink.Refused() != 0 {
		t.Fatalf("signals seen %v, refused %d", seen, sink.Refused())
	}
	if strings.Contains(c.Logs(), key) {
		t.Errorf("the collector logged the API key")
	}
}

// TestOTLPPreset runs configs/otlp.yaml over http/protobuf with its own
// variables, every signal switched on: a base endpoint (paths appended), a
// per-signal traces endpoint (used verbatim) and headers in the
// OTEL_EXPORTER_OTLP_HEADERS format. The job's OTEL_EXPORTER_OTLP_ENDPOINT
// in the collector's environment changes nothing.
func TestOTLPPreset(t *testing.T) {
	paths := map[string]string{
		"/custom/traces-in": otlpsink.Traces,
		"/base/v1/metrics":  otlpsink.Metrics,
		"/base/v1/logs":     otlpsink.Logs,
	}
	sink, err := otlpsink.Start(func(p string) string { return paths[p] })
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	env := otlpBackendEnv(t, sink.URL+"/base")
	env["OTLP_BACKEND_TRACES_ENDPOINT"] = sink.URL + "/custom/traces-in"
	env["OTLP_BACKEND_HEADERS"] = "Authorization=Bearer%20e2e-token,x-scope-orgid=tenant-7"
	env["OTLP_BACKEND_METRICS"] = "true"
	env["OTLP_BACKEND_LOGS"] = "true"
	env["OTEL_EXPORTER_OTLP_ENDPOINT"] = "http://127.0.0.1:9" // the job's variable, in a shared shell
	c := testcollector.Start(t, testcollector.Config(t, "otlp.yaml"), testcollector.Options{Env: env})
	defer func() {
		if t.Failed() {
			t.Log(c.Logs())
		}
	}()
	sent := runJob(t, mixedJob(c, "run-otlp", 4, 3))
	waitFor(t, deliveryTimeout, "every item at the OTLP backend", func() bool {
		if got := sinkResult(sink); got != sent {
			t.Logf("at the backend %s, acknowledged %s; refused %d", describe(got), describe(sent), sink.Refused())
			return false
		}
		return true
	})
	c.Stop()

	for _, r := range sink.Requests() {
		if got := r.Header.Get("Authorization"); got != "Bearer e2e-token" {
			t.Errorf("%s request: Authorization = %q", r.Signal, got)
		}
		if got := r.Header.Get("x-scope-orgid"); got != "tenant-7" {
			t.Errorf("%s request: x-scope-orgid = %q", r.Signal, got)
		}
	}
}

// otlpBackendEnv is the test environment for configs/otlp.yaml over
// http/protobuf to endpoint.
func otlpBackendEnv(t *testing.T, endpoint string) map[string]string {
	env := testEnv(t)
	env["OTLP_BACKEND_PROTOCOL"] = "http/protobuf"
	env["OTLP_BACKEND_ENDPOINT"] = endpoint
	return env
}

// TestOTLPPresetTracesToJaeger runs configs/otlp.yaml as a Jaeger user would:
// the defaults (gRPC, traces only) to a real Jaeger. Every span arrives, and
// no metrics or logs request is ever made (Jaeger would refuse them forever).
func TestOTLPPresetTracesToJaeger(t *testing.T) {
	jaeger := startJaeger(t)
	env := testEnv(t)
	env["OTLP_BACKEND_ENDPOINT"] = jaeger.OTLPEndpoint
	env["OTLP_BACKEND_INSECURE"] = "true"
	env["NEMO_RANK_STRATEGY"] = "all_ranks"
	c := testcollector.Start(t, testcollector.Config(t, "otlp.yaml"), testcollector.Options{Env: env})
	sent := runJob(t, mixedJob(c, "run-otlp-jaeger", 4, 3))
	waitFor(t, deliveryTimeout, "every span in Jaeger", func() bool { return int64(jaeger.SpanCount(t, "nemo")) >= sent.Spans })
	c.Stop()
	if got := jaeger.SpanCount(t, "nemo"); int64(got) != sent.Spans {
		t.Errorf("Jaeger holds %d spans, %d acknowledged", got, sent.Spans)
	}
	if logs := c.Logs(); strings.Contains(logs, "Exporting failed") {
		t.Errorf("an export failed (metrics or logs sent to a traces-only backend?):\n%s", logs)
	}
}
