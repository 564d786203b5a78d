// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"strings"
	"testing"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// TestNemoRunNeverMergesConcurrentBareJobs: two bare torchrun-style jobs of
// 8 ranks on one host (per-process ids, no job key, the same service and
// world size) start together through the default preset. Their ranks cannot
// be told apart, so nemo_run must not merge them: no run directory holds
// ranks of both jobs; as documented, every rank keeps its own id (16 runs),
// the collector says so once and counts concurrent_launches; nothing
// acknowledged is lost.
func TestNemoRunNeverMergesConcurrentBareJobs(t *testing.T) {
	env := testEnv(t)
	c := testcollector.Start(t, testcollector.Config(t, "file.yaml"), testcollector.Options{Env: env})
	jobA, jobB := torchrunJob(c, ""), torchrunJob(c, "")
	jobOf := map[string]string{}
	for i := range 8 {
		jobA[i].Resource, jobB[i].Resource = nil, nil // no job key: the same host (node000), service and world size
		jobOf[jobA[i].RunID], jobOf[jobB[i].RunID] = "A", "B"
	}
	sent := runJob(t, append(jobA, jobB...)) // all 16 ranks at once
	counted, err := c.WaitForMetric(jobTimeout, func(v float64) bool { return v > 0 },
		"otelcol_processor_nemo_run_unreconciled_ids", "reason=concurrent_launches")
	if err != nil {
		t.Errorf("no unreconciled id counted with reason concurrent_launches: %v", err)
	}
	c.Stop()

	got := readTelemetry(t, env["NEMO_TELEMETRY_DIR"])
	if got.Result != sent {
		t.Errorf("acknowledged %s, found %s", describe(sent), describe(got.Result))
	}
	jobsOfRun := map[string]map[string]bool{}
	for _, rec := range got.SpanRecords {
		run, _ := rec.resource()["nemo.run.id"].(string)
		own := run
		if o, _ := rec.resource()["nemo.original_run_id"].(string); o != "" {
			own = o
		}
		if jobsOfRun[run] == nil {
			jobsOfRun[run] = map[string]bool{}
		}
		jobsOfRun[run][jobOf[own]] = true
	}
	for run, jobs := range jobsOfRun {
		if len(jobs) > 1 {
			t.Errorf("run %s holds ranks of both jobs: the launches were merged", run)
		}
	}
	if len(got.ByRun) != 16 {
		t.Errorf("want every rank under its own id (16 runs), found %d runs", len(got.ByRun))
	}
	if n := strings.Count(c.Logs(), "before their launch was decided"); n != 1 {
		t.Errorf("want one warning that the launches cannot be told apart, found %d; %.0f ids counted", n, counted)
	}
}
