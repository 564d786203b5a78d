// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

// Package e2e runs the otelcol-nemo binary that `make build` produced with the
// presets in configs/, fed by emulated NeMo Lens ranks, and checks what real
// consumers read back.
package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// jobTimeout bounds every emulated job.
const jobTimeout = 4 * time.Minute

// testEnv holds a value for every environment variable any preset requires,
// so that every preset can be validated and started without a real backend.
func testEnv(t *testing.T) map[string]string {
	return map[string]string{
		"NEMO_TELEMETRY_DIR": t.TempDir(),
		// Tests that count every item keep every rank; the rank_strategy
		// tests set their own strategy.
		"NEMO_RANK_STRATEGY":    "all_ranks",
		"NEMO_QUEUE_DIR":        t.TempDir(),
		"HONEYCOMB_API_KEY":     "test-honeycomb-key-0123456789abcdef",
		"OTLP_BACKEND_ENDPOINT": "127.0.0.1:9",
		"OTLP_BEARER_TOKEN":     "test-bearer-token",
		"WANDB_API_KEY":         "test-wandb-key",
		"GATEWAY_ENDPOINTS":     "[127.0.0.1:4317]",                    // configs/agent.yaml; validate does not connect
		"GATEWAY_CA_FILE":       "testdata/not-loaded-by-validate.crt", // configs/overlays/agent-tls.yaml
		"GATEWAY_BEARER_TOKEN":  "test-gateway-token",
		"OTLP_TLS_CERT_FILE":    "testdata/not-loaded-by-validate.crt",
		"OTLP_TLS_KEY_FILE":     "testdata/not-loaded-by-validate.key",
		"NEMO_S3_BUCKET":        "test-bucket", // configs/overlays/s3-archive.yaml; validate does not connect
	}
}

// mixedJob returns ranks of one run, half over gRPC and half over
// http/protobuf, alternating the rank-attribute spelling and type.
func mixedJob(c *testcollector.Collector, runID string, worldSize, steps int) []lensemu.Rank {
	return jobVia(func(int) *testcollector.Collector { return c }, runID, worldSize, steps)
}

// jobVia is mixedJob with each rank sending to the collector collectorOf
// returns for it, and extra resource attributes on every rank.
func jobVia(collectorOf func(rank int) *testcollector.Collector, runID string, worldSize, steps int, extra ...attribute.KeyValue) []lensemu.Rank {
	ranks := make([]lensemu.Rank, worldSize)
	for i := range ranks {
		c := collectorOf(i)
		r := lensemu.Rank{
			Endpoint:     c.GRPCEndpoint(),
			Protocol:     lensemu.GRPC,
			RunID:        runID,
			Rank:         i,
			WorldSize:    worldSize,
			LocalRank:    i % 8,
			LegacyKeys:   i%4 >= 2,
			RankAsString: i%3 == 0,
			Steps:        steps,
			Resource:     append([]attribute.KeyValue{attribute.String("slurm.job.id", "4242")}, extra...),
		}
		if i%2 == 1 {
			r.Endpoint, r.Protocol = c.HTTPEndpoint(), lensemu.HTTP
		}
		ranks[i] = r
	}
	return ranks
}

// runJob runs the ranks and returns the total the collector acknowledged.
func runJob(t *testing.T, ranks []lensemu.Rank) lensemu.Result {
	t.Helper()
	return lensemu.Sum(runJobByRank(t, ranks))
}

// runJobByRank runs the ranks and returns what the collector acknowledged
// from each, failing the test on any export error.
func runJobByRank(t *testing.T, ranks []lensemu.Rank) []lensemu.Result {
	t.Helper()
	return runJobWithin(t, ranks, jobTimeout)
}

// runJobWithin is runJobByRank with the job bounded by timeout.
func runJobWithin(t *testing.T, ranks []lensemu.Rank, timeout time.Duration) []lensemu.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	results, err := lensemu.Job(ctx, ranks)
	if err != nil {
		t.Fatalf("emulated job: %v", err)
	}
	for i, res := range results {
		if res.Spans == 0 || (res.DataPoints == 0 && !ranks[i].NoMetrics) || (res.LogRecords == 0 && !ranks[i].NoLogs) {
			t.Fatalf("rank %d sent nothing of some signal: %+v", ranks[i].Rank, res)
		}
	}
	return results
}

// waitFor polls cond every 100ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func describe(r lensemu.Result) string {
	return fmt.Sprintf("%d spans, %d data points, %d log records", r.Spans, r.DataPoints, r.LogRecords)
}
