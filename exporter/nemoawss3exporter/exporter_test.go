// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoawss3exporter

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/exporterhelper"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/nemo-lens/otelcol-nemo/exporter/nemoawss3exporter/internal/metadatatest"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/lettertest"
)

// s3 answers PUTs as S3 does: 200, or an S3 error document with its status.
type s3 struct {
	mu     sync.Mutex
	status int // 0: 200
	code   string
	puts   []string // the object keys put
}

func startS3(t *testing.T, status int, code string) (*s3, string) {
	s := &s3{status: status, code: code}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if r.Method != http.MethodPut {
			http.Error(w, "only PUT", http.StatusMethodNotAllowed)
			return
		}
		s.puts = append(s.puts, r.URL.Path)
		if s.status != 0 {
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(s.status)
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>` + s.code + `</Code><Message>` + s.code + ` said the store</Message><RequestId>1</RequestId></Error>`))
		}
	}))
	t.Cleanup(srv.Close)
	return s, srv.URL
}

func (s *s3) keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.puts...)
}

// testConfig sends to endpoint without a queue (ConsumeTraces returns the
// outcome), the SDK's own retries off, and fast retries.
func testConfig(t *testing.T, endpoint string) *Config {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test-secret")
	c := createDefaultConfig().(*Config)
	c.stock.S3Uploader.S3Bucket = "archive"
	c.stock.S3Uploader.Endpoint = endpoint
	c.stock.S3Uploader.S3ForcePathStyle = true
	c.stock.S3Uploader.RetryMode = "nop"
	c.stock.ResourceAttrsToS3.S3Prefix = "nemo.run.id"
	c.stock.QueueSettings = configoptional.None[exporterhelper.QueueBatchConfig]()
	c.stock.BackOffConfig.InitialInterval = 5 * time.Millisecond
	c.stock.BackOffConfig.MaxInterval = 20 * time.Millisecond
	c.stock.BackOffConfig.MaxElapsedTime = 10 * time.Second
	c.DeadLetter.Directory = t.TempDir()
	return c
}

func startTraces(t *testing.T, c *Config, tel *componenttest.Telemetry) exporter.Traces {
	exp, err := NewFactory().CreateTraces(t.Context(), metadatatest.NewSettings(tel), c)
	require.NoError(t, err)
	require.NoError(t, exp.Start(t.Context(), componenttest.NewNopHost()))
	t.Cleanup(func() { require.NoError(t, exp.Shutdown(t.Context())) })
	return exp
}

// spans makes n spans of run-a.
func spans(n int) ptrace.Traces {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("nemo.run.id", "run-a")
	ss := rs.ScopeSpans().AppendEmpty()
	for i := range n {
		s := ss.Spans().AppendEmpty()
		s.SetName("step")
		s.SetSpanID([8]byte{byte(i + 1)})
	}
	return td
}

func TestStoredLeavesNoLetter(t *testing.T) {
	store, url := startS3(t, 0, "")
	tel := componenttest.NewTelemetry()
	c := testConfig(t, url)
	exp := startTraces(t, c, tel)

	require.NoError(t, exp.ConsumeTraces(t.Context(), spans(3)))
	keys := store.keys()
	require.Len(t, keys, 1)
	assert.True(t, strings.HasPrefix(keys[0], "/archive/run-a/"), "one prefix per run: %s", keys[0])
	_, n := lettertest.Traces(t, c.DeadLetter.Directory, "run-a", "nemo_awss3")
	assert.Zero(t, n)
}

// What S3 refuses for good (403 AccessDenied, 404 NoSuchBucket, ...) is
// dead-lettered at once, with S3's answer; the stock exporter retried it
// for its retry window and then dropped it.
func TestARefusalIsDeadLettered(t *testing.T) {
	for _, tc := range []struct {
		status int
		code   string
	}{{http.StatusForbidden, "AccessDenied"}, {http.StatusNotFound, "NoSuchBucket"}} {
		t.Run(tc.code, func(t *testing.T) {
			store, url := startS3(t, tc.status, tc.code)
			tel := componenttest.NewTelemetry()
			c := testConfig(t, url)
			exp := startTraces(t, c, tel)

			require.NoError(t, exp.ConsumeTraces(t.Context(), spans(3)), "dead-lettered, the request leaves the queue")
			assert.Len(t, store.keys(), 1, "not retried")
			lines, n := lettertest.Traces(t, c.DeadLetter.Directory, "run-a", "nemo_awss3")
			require.Len(t, lines, 1)
			assert.Equal(t, 3, n)
			assert.Equal(t, "refused", lettertest.Reason(lines[0]))
			assert.Contains(t, lettertest.Error(lines[0]), tc.code)
			metadatatest.AssertEqualExporterNemoAwss3DeadLetters(t, tel, []metricdata.DataPoint[int64]{
				{Value: 3, Attributes: attribute.NewSet(attribute.String("exporter", "nemo_awss3"), attribute.String("reason", "refused"))},
			}, metricdatatest.IgnoreTimestamp(), metricdatatest.IgnoreExemplars())
		})
	}
}

func TestTheRetryWindowRunningOutDeadLetters(t *testing.T) {
	store, url := startS3(t, http.StatusServiceUnavailable, "SlowDown")
	tel := componenttest.NewTelemetry()
	c := testConfig(t, url)
	c.stock.BackOffConfig.MaxElapsedTime = 300 * time.Millisecond
	exp := startTraces(t, c, tel)

	start := time.Now()
	require.NoError(t, exp.ConsumeTraces(t.Context(), spans(2)))
	assert.GreaterOrEqual(t, time.Since(start), 300*time.Millisecond)
	assert.Greater(t, len(store.keys()), 2, "retried")
	lines, n := lettertest.Traces(t, c.DeadLetter.Directory, "run-a", "nemo_awss3")
	require.Len(t, lines, 1)
	assert.Equal(t, 2, n)
	assert.Equal(t, "retry_window", lettertest.Reason(lines[0]))
	assert.Contains(t, lettertest.Error(lines[0]), "SlowDown")
}

func TestRetriesUntilTheStoreTakesIt(t *testing.T) {
	store, url := startS3(t, http.StatusServiceUnavailable, "SlowDown")
	tel := componenttest.NewTelemetry()
	c := testConfig(t, url)
	exp := startTraces(t, c, tel)
	time.AfterFunc(200*time.Millisecond, func() {
		store.mu.Lock()
		store.status = 0
		store.mu.Unlock()
	})

	require.NoError(t, exp.ConsumeTraces(t.Context(), spans(2)))
	assert.Greater(t, len(store.keys()), 1)
	_, n := lettertest.Traces(t, c.DeadLetter.Directory, "run-a", "nemo_awss3")
	assert.Zero(t, n)
}
