package e2e

import (
	"crypto/rand"
	"encoding/hex"
	"testing"

	"go.opentelemetry.io/otel/attribute"

	"github.com/nemo-lens/otelcol-nemo/internal/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testcollector"
)

// torchrunJob is a bare torchrun job on Kubernetes: no NEMO_LENS_RUN_ID and
// no SLURM, so every rank mints its own random 12-hex run id, as NeMo Lens does.
func torchrunJob(c *testcollector.Collector, k8sJob string, worldSize int) []lensemu.Rank {
	ranks := make([]lensemu.Rank, worldSize)
	for i := range ranks {
		b := make([]byte, 6)
		_, _ = rand.Read(b)
		ranks[i] = lensemu.Rank{
			Endpoint:  c.GRPCEndpoint(),
			Protocol:  lensemu.GRPC,
			RunID:     hex.EncodeToString(b),
			Rank:      i,
			WorldSize: worldSize,
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
	first := runJob(t, torchrunJob(c, "llama-pretrain", 8))
	second := runJob(t, torchrunJob(c, "mixtral-sft", 8))
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
