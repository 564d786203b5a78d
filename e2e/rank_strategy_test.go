// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"testing"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// TestSingleRankKeepsLastRankAndErrors: 16 ranks through the file preset with
// its default strategy (single_rank, export_rank -1): only rank 15's spans,
// metrics and logs arrive, plus the error span (and the ERROR log) that
// rank 3 emits.
func TestSingleRankKeepsLastRankAndErrors(t *testing.T) {
	env := testEnv(t)
	delete(env, "NEMO_RANK_STRATEGY")
	c := testcollector.Start(t, testcollector.Config(t, "file.yaml"), testcollector.Options{Env: env})
	ranks := mixedJob(c, "run-single", 16, 3)
	ranks[3].ErrorAtIteration = 2
	sent := runJobByRank(t, ranks)
	c.Stop()

	got := readTelemetry(t, env["NEMO_TELEMETRY_DIR"])
	if got.ByRank[15] != sent[15] {
		t.Errorf("rank 15: acknowledged %s, found %s", describe(sent[15]), describe(got.ByRank[15]))
	}
	if want := []string{"3/megatron.optimizer_step"}; len(got.ErrorSpans) != 1 || got.ErrorSpans[0] != want[0] {
		t.Errorf("error spans in the output: %v, want %v", got.ErrorSpans, want)
	}
	if got.Severities["3/ERROR"] != 1 {
		t.Errorf("rank 3's ERROR log record did not arrive exactly once: %v", got.Severities)
	}
	for rank, res := range got.ByRank {
		switch rank {
		case 15:
		case 3:
			if res.Spans != 1 || res.DataPoints != 0 || res.LogRecords != 1 {
				t.Errorf("rank 3: want only its error span and ERROR log, found %s", describe(res))
			}
		default:
			t.Errorf("rank %d should have been dropped, found %s", rank, describe(res))
		}
	}
}
