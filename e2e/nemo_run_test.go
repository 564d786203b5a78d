// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// torchrunWorldSize is the number of ranks of a torchrunJob.
const torchrunWorldSize = 8

// torchrunJob is a bare torchrun job on Kubernetes of torchrunWorldSize
// ranks: no NEMO_LENS_RUN_ID and no SLURM, so every rank mints its own
// random 12-hex run id, as NeMo Lens does.
func torchrunJob(c *testcollector.Collector, k8sJob string) []lensemu.Rank {
	ranks := make([]lensemu.Rank, torchrunWorldSize)
	for i := range ranks {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		ranks[i] = lensemu.Rank{
			Endpoint:  c.GRPCEndpoint(),
			Protocol:  lensemu.GRPC,
			RunID:     hex.EncodeToString(b),
			Rank:      i,
			WorldSize: torchrunWorldSize,
			LocalRank: i,
			Steps:     2,
			Resource: []attribute.KeyValue{
				attribute.String("k8s.namespace.name", "ml"),
				attribute.String("k8s.job.name", k8sJob),
			},
		}
		if i%2 == 1 {
			ranks[i].Endpoint, ranks[i].Protocol = c.HTTPEndpoint(), lensemu.HTTP
		}
	}
	return ranks
}

// TestNemoRunReconcilesTorchrunJob: 8 ranks of one torchrun job, each with
// its own random nemo.run.id and the same Kubernetes Job, come out of the file
// preset under one run id, derived from the Job (sha256 of the job keys, so
// the same on every collector); a second job gets a different one.
func TestNemoRunReconcilesTorchrunJob(t *testing.T) {
	env := testEnv(t)
	c := testcollector.Start(t, testcollector.Config(t, "file.yaml"), testcollector.Options{Env: env})
	first := runJob(t, torchrunJob(c, "llama-pretrain"))
	second := runJob(t, torchrunJob(c, "mixtral-sft"))
	c.Stop()

	got := readTelemetry(t, env["NEMO_TELEMETRY_DIR"])
	// printf 'k8s.namespace.name=ml\nk8s.job.name=llama-pretrain\n' | sha256sum | cut -c1-12
	const firstID, secondID = "57e2fc99eb03", "c22ebadddbc7"
	if got.ByRun[firstID] != first {
		t.Errorf("run %s: acknowledged %s, found %s", firstID, describe(first), describe(got.ByRun[firstID]))
	}
	if got.ByRun[secondID] != second {
		t.Errorf("run %s: acknowledged %s, found %s", secondID, describe(second), describe(got.ByRun[secondID]))
	}
	if len(got.ByRun) != 2 {
		t.Errorf("want exactly two run ids in the output, found %d: %v", len(got.ByRun), got.ByRun)
	}
}

// TestNemoRunReconcilesSingleNodeJob: a bare `torchrun --nproc_per_node=8`
// on one host, with no job key at all (no SLURM, no Kubernetes Job, no
// NEMO_LENS_RUN_ID): every rank mints its own id, and the default preset
// writes one run directory holding all eight ranks, named by one of their
// ids, the others' ids kept in nemo.original_run_id.
func TestNemoRunReconcilesSingleNodeJob(t *testing.T) {
	env := testEnv(t)
	c := testcollector.Start(t, testcollector.Config(t, "file.yaml"), testcollector.Options{Env: env})
	ranks := torchrunJob(c, "")
	ids := map[string]bool{}
	for i := range ranks {
		ranks[i].Resource = nil // no job key: the same host (node000), service and world size
		ids[ranks[i].RunID] = true
	}
	sent := runJob(t, ranks)
	c.Stop()

	got := readTelemetry(t, env["NEMO_TELEMETRY_DIR"])
	if len(got.ByRun) != 1 {
		t.Fatalf("want one run directory for the job, found %d: %v", len(got.ByRun), got.ByRun)
	}
	for run, res := range got.ByRun {
		if !ids[run] {
			t.Errorf("the run is %q, none of the ranks' ids %v", run, ids)
		}
		if res != sent {
			t.Errorf("run %s: acknowledged %s, found %s", run, describe(sent), describe(res))
		}
	}
	original := map[string]bool{}
	for _, rec := range got.SpanRecords {
		if o, _ := rec.resource()["nemo.original_run_id"].(string); o != "" {
			original[o] = true
		}
	}
	if len(original) != 7 {
		t.Errorf("want the 7 reconciled ranks' own ids in nemo.original_run_id, found %d: %v", len(original), original)
	}
	for r := range 8 {
		if got.ByRank[int64(r)].Spans == 0 {
			t.Errorf("no span of rank %d", r)
		}
	}
}
