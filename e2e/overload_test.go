// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/otlpsink"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/procstat"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// loadReport is the part of bench/loadgen's JSON report the test reads.
type loadReport struct {
	ItemsAccepted int64            `json:"items_accepted"`
	ItemsRefused  int64            `json:"items_refused"`
	Errors        map[string]int64 `json:"errors"`
}

// buildLoadgen compiles bench/loadgen into a temporary directory.
func buildLoadgen(tb testing.TB) string {
	tb.Helper()
	return testcollector.BuildTool(tb, "bench/loadgen")
}

func runLoad(t *testing.T, bin string, args ...string) loadReport {
	t.Helper()
	cmd := exec.Command(bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil && len(out) == 0 {
		t.Fatalf("loadgen %v: %v\n%s", args, err, stderr.String())
	}
	var rep loadReport
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("loadgen report: %v\n%s", err, out)
	}
	return rep
}

// TestOverloadIsRefusedRetryablyAndRecovers offers several times what the
// collector can pass on (its backend answers slowly): memory_limiter makes
// the receivers refuse with retryable errors (gRPC UNAVAILABLE or
// RESOURCE_EXHAUSTED, HTTP 429 or 503), the process stays alive with its
// memory bounded, and once the backend is fast again it drains and accepts.
func TestOverloadIsRefusedRetryablyAndRecovers(t *testing.T) {
	const limitMiB, spikeMiB = 256, 64
	loadgen := buildLoadgen(t)
	var slow atomic.Bool
	slow.Store(true)
	sink, err := otlpsink.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	sink.SetRespond(func(otlpsink.Request) (int, http.Header, []byte) {
		if slow.Load() {
			time.Sleep(500 * time.Millisecond)
		}
		return 0, nil, nil
	})
	env := testEnv(t)
	env["SLOW_BACKEND"] = sink.URL
	env["OVERLOAD_LIMIT_MIB"] = strconv.Itoa(limitMiB)
	env["OVERLOAD_SPIKE_MIB"] = strconv.Itoa(spikeMiB)
	// The Go runtime's soft limit at memory_limiter's limit keeps the heap from
	// growing to twice the live data between collections (the collector's
	// documented setting; see docs/operating.md).
	env["GOMEMLIMIT"] = strconv.Itoa(limitMiB) + "MiB"
	config := filepath.Join(testcollector.RepoRoot(t), "e2e", "testdata", "overload.yaml")
	c := testcollector.Start(t, config, testcollector.Options{Env: env})

	var (
		wg      sync.WaitGroup
		reports [2]loadReport
	)
	for i, proto := range []struct{ name, endpoint string }{{"grpc", c.GRPCEndpoint()}, {"http", c.HTTPEndpoint()}} {
		wg.Go(func() {
			reports[i] = runLoad(t, loadgen, "-protocol", proto.name, "-endpoint", proto.endpoint,
				"-ranks", "64", "-batch", "2000", "-duration", "15s", "-conns", "2", "-workers", "4", "-timeout", "5s")
		})
	}
	wg.Wait()
	peakKiB, err := procstat.StatusKiB(c.Pid(), "VmHWM")
	if err != nil {
		t.Fatal(err)
	}
	if code := httpStatus(t, fmt.Sprintf("http://127.0.0.1:%d/", c.HealthPort)); code != http.StatusOK {
		t.Fatalf("collector unhealthy after the overload (%d)", code)
	}

	var accepted, refused int64
	retryable := map[string]bool{"grpc Unavailable": true, "grpc ResourceExhausted": true, "http 429": true, "http 503": true}
	for _, rep := range reports {
		accepted += rep.ItemsAccepted
		refused += rep.ItemsRefused
		for code, n := range rep.Errors {
			if !retryable[code] {
				t.Errorf("%d requests refused with %q, which a client does not retry", n, code)
			}
		}
	}
	t.Logf("overload: %d spans accepted, %d refused (%v / %v); peak RSS %d MiB with memory_limiter at %d MiB (spike %d)",
		accepted, refused, reports[0].Errors, reports[1].Errors, peakKiB/1024, limitMiB, spikeMiB)
	if refused == 0 {
		t.Fatalf("nothing was refused: the test did not overload the collector")
	}
	// memory_limiter bounds the heap; RSS adds the runtime, stacks and
	// buffers in flight: allow half the limit on top.
	if peakKiB > limitMiB*1024*3/2 {
		t.Errorf("peak RSS %d MiB, more than 1.5x memory_limiter's %d MiB", peakKiB/1024, limitMiB)
	}

	slow.Store(false)
	if _, err := c.WaitForMetric(3*time.Minute, func(v float64) bool { return v == 0 }, "otelcol_exporter_queue_size"); err != nil {
		t.Fatalf("the queue did not drain once the backend recovered: %v", err)
	}
	after := runLoad(t, loadgen, "-protocol", "grpc", "-endpoint", c.GRPCEndpoint(), "-ranks", "8", "-batch", "500", "-count", "20000", "-duration", "30s")
	if after.ItemsRefused != 0 || after.ItemsAccepted < 20000 {
		t.Errorf("after recovery: %d accepted, %d refused (%v)", after.ItemsAccepted, after.ItemsRefused, after.Errors)
	}
	c.Stop()
}
