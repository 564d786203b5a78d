package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testcollector"
)

// TestStragglerStepsAreKept: 32 ranks through the file preset with
// single_rank and straggler retention on; rank 9 is twice as slow on
// iterations 2 and 4. The output holds everything of rank 31 (the export
// rank) plus exactly rank 9's step subtrees of those two iterations, each span
// marked with the reason, and nothing else.
func TestStragglerStepsAreKept(t *testing.T) {
	const straggler, worldSize, steps = 9, 32, 5
	slow := map[int]bool{2: true, 4: true}
	env := testEnv(t)
	delete(env, "NEMO_RANK_STRATEGY")
	env["NEMO_STRAGGLERS"] = "true"
	env["NEMO_STRAGGLER_WAIT"] = "2s"
	c := testcollector.Start(t, testcollector.Config(t, "file.yaml"), testcollector.Options{Env: env})
	ranks := mixedJob(c, "run-straggler", worldSize, steps)
	ranks[straggler].StepDuration = func(it int) time.Duration {
		if slow[it] {
			return 200 * time.Millisecond
		}
		return 100 * time.Millisecond
	}
	sent := runJobByRank(t, ranks)
	c.Stop() // shutdown decides every open step and flushes what it keeps

	got := readTelemetry(t, env["NEMO_TELEMETRY_DIR"])
	if got.ByRank[worldSize-1] != sent[worldSize-1] {
		t.Errorf("export rank %d: acknowledged %s, found %s", worldSize-1, describe(sent[worldSize-1]), describe(got.ByRank[worldSize-1]))
	}
	want := lensemu.Result{Spans: int64(len(slow) * lensemu.SpansPerStep(2))}
	if got.ByRank[straggler] != want {
		t.Errorf("straggler rank %d: want only its %d slow-step spans, found %s", straggler, want.Spans, describe(got.ByRank[straggler]))
	}
	for rank, res := range got.ByRank {
		if rank != straggler && rank != worldSize-1 {
			t.Errorf("rank %d should have been dropped, found %s", rank, describe(res))
		}
	}
	iterations := map[string]int{}
	for _, span := range got.SpanRecords {
		if span.rank() != straggler {
			continue
		}
		if reason := span.attributes()["nemo.rank_strategy.kept_reason"]; reason != "straggler" {
			t.Errorf("straggler span %s has kept_reason %v", span.str("name"), reason)
		}
		if span.str("name") == "megatron.train_step" {
			iterations[fmt.Sprint(span.attributes()["megatron.iteration"])]++
		}
	}
	if len(iterations) != 2 || iterations["2"] != 1 || iterations["4"] != 1 {
		t.Errorf("kept straggler steps by iteration: %v, want iterations 2 and 4", iterations)
	}
}
