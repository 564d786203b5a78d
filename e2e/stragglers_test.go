// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// TestStragglerStepsAreKept: 32 ranks in synchronous data parallelism
// through the file preset as committed (single_rank, straggler retention on); rank
// 9 computes twice as long on iterations 2 and 4 and every other rank waits
// for it in grad_sync, so every rank's step spans last the same. The output
// holds everything of rank 31 (the export rank) plus exactly rank 9's step
// subtrees of those two iterations, each span marked with the reason and
// the rank's scores, and nothing else. Both Megatron-LM span taxonomies and
// both trace shapes (a step under the run-long job span, a step as its own
// trace root) give the same result.
func TestStragglerStepsAreKept(t *testing.T) {
	for _, tc := range []struct {
		name, stepName string
		roots          bool
	}{
		{"train_step under the job span", "megatron.train_step", false},
		{"train.iteration as trace roots", "megatron.train.iteration", true},
	} {
		t.Run(tc.name, func(t *testing.T) { checkStragglerStepsKept(t, tc.stepName, tc.roots) })
	}
}

func checkStragglerStepsKept(t *testing.T, stepName string, roots bool) {
	const straggler, worldSize, steps = 9, 32, 5
	slow := map[int]bool{2: true, 4: true}
	env := testEnv(t)
	delete(env, "NEMO_RANK_STRATEGY") // the preset as committed: single_rank, stragglers on
	c := testcollector.Start(t, testcollector.Config(t, "file.yaml"), testcollector.Options{Env: env})
	ranks := mixedJob(c, "run-straggler", worldSize, steps)
	for i := range ranks {
		ranks[i].StepSpanName, ranks[i].StepsAreRoots = stepName, roots
	}
	ranks[straggler].ComputeDuration = func(it int) time.Duration {
		if slow[it] {
			return 2 * lensemu.DefaultComputeDuration
		}
		return lensemu.DefaultComputeDuration
	}
	sent := runJobByRank(t, ranks)
	c.Stop() // shutdown decides every open step and flushes what it keeps

	checkStragglerKept(t, readTelemetry(t, env["NEMO_TELEMETRY_DIR"]), sent, straggler, stepName, slow)
}

// checkStragglerKept checks what single_rank with straggler retention kept
// of a job whose rank straggler computed twice as long on the iterations in
// slow: everything the export rank (the last) had acknowledged, exactly the
// straggler's slow step subtrees (steps named stepName), each span marked
// with its scores, and nothing of any other rank.
func checkStragglerKept(t *testing.T, got telemetry, sent []lensemu.Result, straggler int, stepName string, slow map[int]bool) {
	t.Helper()
	exportRank := len(sent) - 1
	if got.ByRank[int64(exportRank)] != sent[exportRank] {
		t.Errorf("export rank %d: acknowledged %s, found %s", exportRank, describe(sent[exportRank]), describe(got.ByRank[int64(exportRank)]))
	}
	want := lensemu.Result{Spans: int64(len(slow) * lensemu.SpansPerStep(2))}
	if got.ByRank[int64(straggler)] != want {
		t.Errorf("straggler rank %d: want only its %d slow-step spans, found %s", straggler, want.Spans, describe(got.ByRank[int64(straggler)]))
	}
	for rank, res := range got.ByRank {
		if rank != int64(straggler) && rank != int64(exportRank) {
			t.Errorf("rank %d should have been dropped, found %s", rank, describe(res))
		}
	}

	// Busy time = step - grad sync = compute + optimizer: 85ms for every
	// rank, 155ms for the straggler on its slow steps; its own best is 85ms.
	busy := lensemu.DefaultComputeDuration + lensemu.OptimizerTime
	slowBusy := 2*lensemu.DefaultComputeDuration + lensemu.OptimizerTime
	wantScore := fmt.Sprintf("%.3f", float64(busy)/float64(slowBusy))
	missing := maps.Clone(slow)
	for iteration, n := range keptSubtrees(t, got.SpanRecords, int64(straggler), stepName, wantScore) {
		if !slow[iteration] || n != lensemu.SpansPerStep(2) {
			t.Errorf("rank %d: kept %d spans of the subtree of iteration %d, want %d of iterations 2 and 4 only", straggler, n, iteration, lensemu.SpansPerStep(2))
		}
		delete(missing, iteration)
	}
	if len(missing) != 0 {
		t.Errorf("rank %d: no subtree kept for iterations %v", straggler, missing)
	}
}

// keptSubtrees checks that every span of rank in records is marked as a
// straggler with both scores equal to score, and counts the spans of each
// kept step subtree (the step span, named stepName, and its descendants) by
// iteration. A span under no kept step span is an error.
func keptSubtrees(t *testing.T, records []record, rank int64, stepName, score string) map[int]int {
	t.Helper()
	parent := map[string]string{}
	iteration := map[string]int{}
	var mine []record
	for _, span := range records {
		if span.rank() != rank {
			continue
		}
		mine = append(mine, span)
		attrs := span.attributes()
		if reason := attrs["nemo.rank_strategy.kept_reason"]; reason != "straggler" {
			t.Errorf("straggler span %s has kept_reason %v", span.str("name"), reason)
		}
		for _, key := range []string{"nemo.rank_strategy.relative_score", "nemo.rank_strategy.individual_score"} {
			if v, _ := attrs[key].(json.Number); v.String() != score {
				t.Errorf("straggler span %s: %s = %v, want %s", span.str("name"), key, attrs[key], score)
			}
		}
		parent[span.str("span_id")] = span.str("parent_id")
		if span.str("name") == stepName {
			n, _ := attrs["megatron.iteration"].(json.Number)
			it, _ := n.Int64()
			iteration[span.str("span_id")] = int(it)
		}
	}
	counts := map[int]int{}
	for _, span := range mine {
		id := span.str("span_id")
		for depth := range 10 {
			if it, ok := iteration[id]; ok {
				counts[it]++
				break
			}
			next, ok := parent[id]
			if !ok || depth == 9 {
				t.Errorf("straggler span %s is in no kept step subtree", span.str("name"))
				break
			}
			id = next
		}
	}
	return counts
}
