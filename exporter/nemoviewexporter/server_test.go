// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package nemoviewexporter

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/collector/pdata/pmetric"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.uber.org/zap"

	"github.com/nemo-lens/otelcol-nemo/internal/deadletter"
)

func get(t *testing.T, srv *httptest.Server, path string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp, string(b)
}

func TestPagesAndJSON(t *testing.T) {
	s := testStore(10, 10, 10)
	hostile := `run</script><script>alert(1)</script>&"`
	md := pmetric.NewMetrics()
	stepPoints(md, "run-1", 0, 1, "node-a", 0.2, 1)
	stepPoints(md, hostile, 0, 1, `<img src=x onerror=alert(1)>`, 0.2, 1)
	s.addMetrics(md)
	cfg := createDefaultConfig().(*Config)
	srv := httptest.NewServer(newHandler(s, cfg))
	defer srv.Close()

	resp, body := get(t, srv, "/")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, body, `href="/runs/run-1"`)
	assert.NotContains(t, body, "<script>alert(1)", "run ids are escaped")
	assert.Contains(t, resp.Header.Get("Content-Security-Policy"), "default-src 'self'")

	var runs []runSummary
	_, body = get(t, srv, "/api/runs")
	require.NoError(t, json.Unmarshal([]byte(body), &runs))
	require.Len(t, runs, 2)

	resp, body = get(t, srv, "/runs/"+url.PathEscape(hostile))
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.NotContains(t, body, "<script>alert(1)")
	assert.NotContains(t, body, "<img src=x")
	assert.Contains(t, body, `src="/assets/view.js"`)

	resp, body = get(t, srv, "/runs/run-1?save=1")
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Contains(t, resp.Header.Get("Content-Disposition"), `filename="nemo-run-run-1.html"`)
	assert.NotContains(t, body, `src="/assets`, "the saved page is self-contained")
	assert.NotContains(t, body, `href="/assets`)
	assert.Contains(t, body, `data-static="true"`)
	assert.Contains(t, body, "function viridis", "the script is inline")

	var d runDetail
	_, body = get(t, srv, "/api/runs/run-1")
	require.NoError(t, json.Unmarshal([]byte(body), &d))
	assert.Equal(t, "run-1", d.ID)
	assert.Equal(t, []int64{1}, d.Iterations)

	resp, body = get(t, srv, "/runs/nope")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	assert.Contains(t, body, "no run")
	resp, _ = get(t, srv, "/api/runs/nope")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, _ = get(t, srv, "/assets/view.js")
	assert.Equal(t, "text/javascript; charset=utf-8", resp.Header.Get("Content-Type"))
	resp, _ = get(t, srv, "/assets/secret")
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
}

// TestARunPageListsItsDeadLetters: the run's dead-letter files (written by
// nemo_otlp or the spool, read from disk at each request) are in its JSON
// and so on its page; a run without letters has none.
func TestARunPageListsItsDeadLetters(t *testing.T) {
	s := testStore(10, 10, 10)
	md := pmetric.NewMetrics()
	stepPoints(md, "run-1", 0, 1, "node-a", 0.2, 1)
	stepPoints(md, "run-2", 0, 1, "node-a", 0.2, 1)
	s.addMetrics(md)
	cfg := createDefaultConfig().(*Config)
	cfg.DeadLetterDirectory = t.TempDir()
	w := deadletter.NewWriter(deadletter.Config{Directory: cfg.DeadLetterDirectory, RunAttribute: "nemo.run.id", MissingRun: "unknown"}, "nemo_otlp/honeycomb", zap.NewNop(), func(deadletter.Reason, int) {})
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("nemo.run.id", "run-1")
	rs.ScopeSpans().AppendEmpty().Spans().AppendEmpty().SetName("megatron.train_step")
	require.NoError(t, deadletter.Write(w, deadletter.Traces, td, deadletter.Refused, "HTTP 401"))
	srv := httptest.NewServer(newHandler(s, cfg))
	defer srv.Close()

	var d runDetail
	_, body := get(t, srv, "/api/runs/run-1")
	require.NoError(t, json.Unmarshal([]byte(body), &d))
	require.Len(t, d.DeadLetters, 1)
	assert.Equal(t, "nemo_otlp_honeycomb", d.DeadLetters[0].Destination)
	assert.Equal(t, "traces", d.DeadLetters[0].Signal)
	assert.Positive(t, d.DeadLetters[0].Bytes)

	_, body = get(t, srv, "/api/runs/run-2")
	assert.NotContains(t, body, "dead_letters")
	_, body = get(t, srv, "/runs/run-1")
	assert.Contains(t, body, `id="dead-letters"`)
	assert.Contains(t, body, `nemo_otlp_honeycomb`, "the page's data holds the letters")
}
