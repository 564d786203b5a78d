// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// Jaeger v1.76.0 (built by `make jaeger`), the real OTLP backend of
// TestFanoutPreset and TestJaegerPreset: its process and its query API.

// Timeouts of the Jaeger process.
const (
	jaegerStartTimeout = 60 * time.Second
	jaegerStopTimeout  = 15 * time.Second
)

// jaegerProc is a running Jaeger v2 with in-memory storage.
type jaegerProc struct {
	// OTLPEndpoint is its OTLP/gRPC receiver, host:port.
	OTLPEndpoint string
	// QueryURL is its query HTTP API base, http://host:port.
	QueryURL string

	proc *testcollector.Process
	once sync.Once
}

// jaegerBinary returns $OTELCOL_NEMO_JAEGER_BIN or .tools/jaeger in the
// repository, skipping the test when it is missing (failing it under
// `make test`, which builds it).
func jaegerBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("OTELCOL_NEMO_JAEGER_BIN")
	if bin == "" {
		bin = filepath.Join(testcollector.RepoRoot(t), ".tools", "jaeger")
	}
	testcollector.RequireFile(t, bin, "Jaeger binary", "make jaeger")
	return bin
}

// startJaeger runs Jaeger with e2e/testdata/jaeger.yaml on free 127.0.0.1
// ports and waits until its query API answers. It is stopped when the test
// ends (after the collector, whose cleanup was registered later).
func startJaeger(t *testing.T) *jaegerProc {
	t.Helper()
	bin := jaegerBinary(t)
	config := filepath.Join(testcollector.RepoRoot(t), "e2e", "testdata", "jaeger.yaml")
	otlpPort, httpPort, grpcPort := testcollector.FreePort(t), testcollector.FreePort(t), testcollector.FreePort(t)
	j := &jaegerProc{
		OTLPEndpoint: "127.0.0.1:" + strconv.Itoa(otlpPort),
		QueryURL:     "http://127.0.0.1:" + strconv.Itoa(httpPort),
	}
	j.proc = testcollector.StartProcess(t, "jaeger", bin, []string{"--config=" + config}, map[string]string{
		"JAEGER_OTLP_GRPC_PORT":  strconv.Itoa(otlpPort),
		"JAEGER_QUERY_HTTP_PORT": strconv.Itoa(httpPort),
		"JAEGER_QUERY_GRPC_PORT": strconv.Itoa(grpcPort),
	})
	t.Cleanup(func() {
		j.stop(t)
		if t.Failed() {
			t.Logf("Jaeger's log:\n%s", j.logs())
		}
	})

	switch err := j.proc.WaitForOK(j.QueryURL+"/api/services", jaegerStartTimeout); {
	case errors.Is(err, testcollector.ErrExited):
		t.Fatalf("Jaeger exited during start-up (%v); its log:\n%s", j.proc.Err(), j.logs())
	case err != nil:
		t.Fatalf("Jaeger's query API did not answer within %s; its log:\n%s", jaegerStartTimeout, j.logs())
	}
	return j
}

func (j *jaegerProc) logs() string { return j.proc.Logs() }

// stop sends SIGTERM, and SIGKILL when Jaeger does not exit in time.
func (j *jaegerProc) stop(t *testing.T) {
	j.once.Do(func() {
		select {
		case <-j.proc.Done():
			t.Errorf("Jaeger exited before the test ended (%v)", j.proc.Err())
			return
		default:
		}
		if !j.proc.Terminate(jaegerStopTimeout) {
			t.Errorf("Jaeger did not stop within %s of SIGTERM", jaegerStopTimeout)
		}
	})
}

// Jaeger's query API JSON (its UI model).
type jaegerTrace struct {
	TraceID   string                   `json:"traceID"`
	Spans     []jaegerSpan             `json:"spans"`
	Processes map[string]jaegerProcess `json:"processes"`
}

type jaegerSpan struct {
	TraceID       string      `json:"traceID"`
	SpanID        string      `json:"spanID"`
	OperationName string      `json:"operationName"`
	ProcessID     string      `json:"processID"`
	Tags          []jaegerTag `json:"tags"`
}

type jaegerProcess struct {
	ServiceName string      `json:"serviceName"`
	Tags        []jaegerTag `json:"tags"`
}

type jaegerTag struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Value any    `json:"value"`
}

func tagValue(tags []jaegerTag, key string) (string, bool) {
	for _, tg := range tags {
		if tg.Key == key {
			return fmt.Sprint(tg.Value), true
		}
	}
	return "", false
}

func (s jaegerSpan) tag(key string) string { v, _ := tagValue(s.Tags, key); return v }

func (s jaegerSpan) has(key string) bool { _, ok := tagValue(s.Tags, key); return ok }

func (p jaegerProcess) tag(key string) string { v, _ := tagValue(p.Tags, key); return v }

func (p jaegerProcess) has(key string) bool { _, ok := tagValue(p.Tags, key); return ok }

// Traces queries GET /api/traces?service=NAME (over Jaeger's default
// lookback; the emulator's synthetic timestamps are seconds old).
func (j *jaegerProc) Traces(t *testing.T, service string) []jaegerTrace {
	t.Helper()
	traces, err := j.traces(service)
	if err != nil {
		t.Fatalf("Jaeger query: %v", err)
	}
	return traces
}

// SpanCount is the number of spans of service that Jaeger returns (0 while
// the query fails: it is polled).
func (j *jaegerProc) SpanCount(t *testing.T, service string) int {
	traces, err := j.traces(service)
	if err != nil {
		t.Logf("Jaeger query: %v", err)
		return 0
	}
	n := 0
	for _, tr := range traces {
		n += len(tr.Spans)
	}
	return n
}

func (j *jaegerProc) traces(service string) ([]jaegerTrace, error) {
	q := url.Values{"service": {service}, "limit": {"1000"}}
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(j.QueryURL + "/api/traces?" + q.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode == http.StatusNotFound {
		return nil, nil // service not seen yet
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/traces: %s: %.300s", resp.Status, body)
	}
	var out struct {
		Data   []jaegerTrace `json:"data"`
		Errors []struct {
			Code int    `json:"code"`
			Msg  string `json:"msg"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(body, &out); err != nil {
		return nil, fmt.Errorf("decode /api/traces: %w", err)
	}
	if len(out.Errors) > 0 {
		return nil, fmt.Errorf("/api/traces errors: %+v", out.Errors)
	}
	return out.Data, nil
}
