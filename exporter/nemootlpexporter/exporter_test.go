// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemootlpexporter

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exportertest"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/nemo-lens/otelcol-nemo/exporter/nemootlpexporter/internal/metadata"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lettertest"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/otlpsink"
)

// spans makes n spans of each run.
func spans(n int, runs ...string) ptrace.Traces {
	td := ptrace.NewTraces()
	for _, run := range runs {
		rs := td.ResourceSpans().AppendEmpty()
		rs.Resource().Attributes().PutStr("nemo.run.id", run)
		ss := rs.ScopeSpans().AppendEmpty()
		for i := range n {
			s := ss.Spans().AppendEmpty()
			s.SetName("megatron.train_step")
			s.SetTraceID([16]byte{1, byte(i)})
			s.SetSpanID([8]byte{2, byte(i)})
		}
	}
	return td
}

// protocols are the clients under test, each against a real OTLP sink.
var protocols = []string{protocolGRPC, protocolHTTPProtobuf, protocolHTTPJSON}

func startSink(t *testing.T, protocol string) *otlpsink.Sink {
	t.Helper()
	var sink *otlpsink.Sink
	var err error
	if protocol == protocolGRPC {
		sink, err = otlpsink.StartGRPC()
	} else {
		sink, err = otlpsink.Start(nil)
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = sink.Close() })
	return sink
}

func testConfig(t *testing.T, protocol string, sink *otlpsink.Sink) *Config {
	t.Helper()
	c := createDefaultConfig().(*Config)
	c.Protocol = protocol
	c.GRPC.Endpoint = sink.Addr
	c.GRPC.TLS.Insecure = true
	c.HTTP.ClientConfig.Endpoint = sink.URL
	c.RetryConfig.InitialInterval = 20 * time.Millisecond
	c.RetryConfig.MaxInterval = 100 * time.Millisecond
	c.DeadLetter.Directory = t.TempDir()
	require.NoError(t, c.Validate())
	return c
}

func startTraces(t *testing.T, c *Config, name string) exporter.Traces {
	t.Helper()
	set := exportertest.NewNopSettings(metadata.Type)
	set.ID = component.NewIDWithName(metadata.Type, name)
	exp, err := NewFactory().CreateTraces(t.Context(), set, c)
	require.NoError(t, err)
	require.NoError(t, exp.Start(t.Context(), componenttest.NewNopHost()))
	return exp
}

func TestDeliveredLeavesNoLetter(t *testing.T) {
	for _, p := range protocols {
		t.Run(p, func(t *testing.T) {
			sink := startSink(t, p)
			c := testConfig(t, p, sink)
			exp := startTraces(t, c, "")
			require.NoError(t, exp.ConsumeTraces(t.Context(), spans(5, "run-a", "run-b")))
			require.NoError(t, exp.Shutdown(t.Context()))
			assert.Equal(t, 10, sink.Count(otlpsink.Traces))
			_, n := lettertest.Traces(t, c.DeadLetter.Directory, "run-a", "nemo_otlp")
			assert.Zero(t, n)
		})
	}
}

func TestARefusalIsDeadLetteredPerRun(t *testing.T) {
	for _, p := range protocols {
		t.Run(p, func(t *testing.T) {
			sink := startSink(t, p)
			sink.SetRespond(func(otlpsink.Request) (int, http.Header, []byte) {
				return http.StatusUnauthorized, nil, []byte("key rotated")
			})
			c := testConfig(t, p, sink)
			exp := startTraces(t, c, "backend")
			require.NoError(t, exp.ConsumeTraces(t.Context(), spans(5, "run-a", "run-b")))
			require.NoError(t, exp.Shutdown(t.Context()))
			for _, run := range []string{"run-a", "run-b"} {
				lines, n := lettertest.Traces(t, c.DeadLetter.Directory, run, "nemo_otlp/backend")
				require.Equal(t, 5, n, run)
				assert.Equal(t, "refused", lettertest.Reason(lines[0]))
				assert.Contains(t, lettertest.Error(lines[0]), map[bool]string{true: "code = Unauthenticated desc = key rotated", false: "HTTP 401: key rotated"}[p == protocolGRPC])
				run0, _ := lines[0].ResourceSpans().At(0).Resource().Attributes().Get("nemo.run.id")
				assert.Equal(t, run, run0.Str(), "a run's file holds only its own resources")
			}
			assert.Zero(t, sink.Count(otlpsink.Traces))
		})
	}
}

func TestAPartialSuccessIsDeadLettered(t *testing.T) {
	for _, p := range protocols {
		t.Run(p, func(t *testing.T) {
			sink := startSink(t, p)
			sink.SetRespond(func(otlpsink.Request) (int, http.Header, []byte) {
				r := ptraceotlp.NewExportResponse()
				r.PartialSuccess().SetRejectedSpans(2)
				r.PartialSuccess().SetErrorMessage("2 spans too old")
				body, err := r.MarshalProto()
				require.NoError(t, err)
				return http.StatusOK, http.Header{"Content-Type": {"application/x-protobuf"}}, body
			})
			c := testConfig(t, p, sink)
			exp := startTraces(t, c, "")
			require.NoError(t, exp.ConsumeTraces(t.Context(), spans(5, "run-a")))
			require.NoError(t, exp.Shutdown(t.Context()))
			lines, n := lettertest.Traces(t, c.DeadLetter.Directory, "run-a", "nemo_otlp")
			require.Equal(t, 5, n, "the whole request: OTLP does not say which items were rejected")
			assert.Equal(t, "partial_success", lettertest.Reason(lines[0]))
			assert.Contains(t, lettertest.Error(lines[0]), "rejected 2 of 5 items: 2 spans too old")
		})
	}
}

func TestAWarningWithoutRejectionIsDelivered(t *testing.T) {
	sink := startSink(t, protocolHTTPProtobuf)
	sink.SetRespond(func(otlpsink.Request) (int, http.Header, []byte) {
		r := ptraceotlp.NewExportResponse()
		r.PartialSuccess().SetErrorMessage("attribute truncated")
		body, err := r.MarshalProto()
		require.NoError(t, err)
		return http.StatusOK, nil, body
	})
	c := testConfig(t, protocolHTTPProtobuf, sink)
	exp := startTraces(t, c, "")
	require.NoError(t, exp.ConsumeTraces(t.Context(), spans(3, "run-a")))
	require.NoError(t, exp.Shutdown(t.Context()))
	_, n := lettertest.Traces(t, c.DeadLetter.Directory, "run-a", "nemo_otlp")
	assert.Zero(t, n)
}

func TestTheRetryWindowRunningOutDeadLetters(t *testing.T) {
	for _, p := range protocols {
		t.Run(p, func(t *testing.T) {
			sink := startSink(t, p)
			sink.SetRespond(func(otlpsink.Request) (int, http.Header, []byte) { return http.StatusServiceUnavailable, nil, nil })
			c := testConfig(t, p, sink)
			c.RetryConfig.MaxElapsedTime = 300 * time.Millisecond
			exp := startTraces(t, c, "")
			require.NoError(t, exp.ConsumeTraces(t.Context(), spans(4, "run-a")))
			var lines []ptrace.Traces
			require.Eventually(t, func() bool {
				l, n := lettertest.Traces(t, c.DeadLetter.Directory, "run-a", "nemo_otlp")
				lines = l
				return n == 4
			}, 10*time.Second, 20*time.Millisecond)
			require.NoError(t, exp.Shutdown(t.Context()))
			assert.Equal(t, "retry_window", lettertest.Reason(lines[0]))
			assert.Contains(t, lettertest.Error(lines[0]), "retry_on_failure::max_elapsed_time 300ms")
			assert.Greater(t, sink.Refused(), 1, "retried before the window ran out")
		})
	}
}

func TestRetriesUntilTheBackendTakesIt(t *testing.T) {
	sink := startSink(t, protocolGRPC)
	refusals := 0
	sink.SetRespond(func(otlpsink.Request) (int, http.Header, []byte) {
		if refusals < 3 {
			refusals++
			return http.StatusServiceUnavailable, nil, nil
		}
		return 0, nil, nil
	})
	c := testConfig(t, protocolGRPC, sink)
	exp := startTraces(t, c, "")
	require.NoError(t, exp.ConsumeTraces(t.Context(), spans(4, "run-a")))
	require.Eventually(t, func() bool { return sink.Count(otlpsink.Traces) == 4 }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, exp.Shutdown(t.Context()))
	_, n := lettertest.Traces(t, c.DeadLetter.Directory, "run-a", "nemo_otlp")
	assert.Zero(t, n)
}

func TestALetterThatCannotBeWrittenStaysQueued(t *testing.T) {
	sink := startSink(t, protocolHTTPProtobuf)
	sink.SetRespond(func(otlpsink.Request) (int, http.Header, []byte) { return http.StatusBadRequest, nil, nil })
	c := testConfig(t, protocolHTTPProtobuf, sink)
	// The directory cannot be made: a regular file stands where it goes.
	blocker := filepath.Join(c.DeadLetter.Directory, "runs")
	require.NoError(t, os.WriteFile(blocker, nil, 0o600))
	c.DeadLetter.Directory = blocker
	exp := startTraces(t, c, "")
	require.NoError(t, exp.ConsumeTraces(t.Context(), spans(3, "run-a")))
	require.Eventually(t, func() bool { return sink.Refused() >= 3 }, 10*time.Second, 10*time.Millisecond)
	// The disk is fixed: the request, still queued, is written.
	require.NoError(t, os.Remove(blocker))
	require.Eventually(t, func() bool { _, n := lettertest.Traces(t, c.DeadLetter.Directory, "run-a", "nemo_otlp"); return n == 3 }, 10*time.Second, 10*time.Millisecond)
	require.NoError(t, exp.Shutdown(t.Context()))
}
