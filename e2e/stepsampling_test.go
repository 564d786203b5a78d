// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"testing"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// sampledStep is step_sampling's documented choice, written out again here
// so that the test does not trust the processor's own code: iteration it of
// run is kept when the first 8 bytes of SHA-256("<run>:<it>"), big-endian,
// shifted right by 11 and divided by 2^53, are below rate.
func sampledStep(run string, it int, rate float64) bool {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s:%d", run, it)))
	u := float64(binary.BigEndian.Uint64(sum[:8])>>11) / (1 << 53)
	return u < rate
}

const (
	sampleRanks = 8
	sampleSteps = 40
	sampleRate  = 0.1
	sampleRunID = "run-step-sampling"
	errorRank   = 3
)

// keptIterations lists, per rank, the iterations whose step span is in the
// JSONL output, and checks that every kept step is whole and says why.
func keptIterations(t *testing.T, dir, stepName string) (map[int64][]int, map[int64]lensemu.Result) {
	t.Helper()
	got := readTelemetry(t, dir)
	kept := map[int64][]int{}
	for _, rec := range got.SpanRecords {
		if rec.str("name") != stepName {
			continue
		}
		attrs := rec.attributes()
		n, _ := attrs["megatron.iteration"].(json.Number)
		it, _ := n.Int64()
		kept[rec.rank()] = append(kept[rec.rank()], int(it))
		if reason, _ := attrs["nemo.rank_strategy.kept_reason"].(string); reason != "sampled_step" && reason != "error" {
			t.Errorf("rank %d iteration %d kept with reason %q, want sampled_step or error", rec.rank(), it, reason)
		}
	}
	for r := range kept {
		slices.Sort(kept[r])
	}
	return kept, got.ByRank
}

// TestStepSamplingKeepsTheSameStepsOnEveryRank: 8 ranks x 40 steps through
// the file preset with all_ranks and NEMO_STEP_SAMPLE_RATE=0.1, the ranks
// split over two collectors (as an agent tier would, or a restart): every
// rank on both keeps exactly the iterations the documented hash picks, each
// step whole; rank 3's error step, on an iteration the sample drops, is kept
// on rank 3 only; every rank's job spans are kept. Both trace shapes and
// both Megatron step names.
func TestStepSamplingKeepsTheSameStepsOnEveryRank(t *testing.T) {
	for _, tc := range []struct {
		stepName string
		roots    bool
	}{{"megatron.train_step", false}, {"megatron.train.iteration", true}} {
		t.Run(fmt.Sprintf("%s roots=%v", tc.stepName, tc.roots), func(t *testing.T) { checkStepSampling(t, tc.stepName, tc.roots) })
	}
}

func checkStepSampling(t *testing.T, stepName string, roots bool) {
	var want []int
	errorIt := 0
	for it := 1; it <= sampleSteps; it++ {
		if sampledStep(sampleRunID, it, sampleRate) {
			want = append(want, it)
		} else if errorIt == 0 && it > 1 {
			errorIt = it
		}
	}
	// Binomial(40, 0.1): mean 4, standard deviation 1.9.
	if len(want) < 1 || len(want) > 12 {
		t.Fatalf("the hash keeps %d of %d steps at rate %.1f: outside the binomial bounds [1, 12]", len(want), sampleSteps, sampleRate)
	}
	envs := [2]map[string]string{testEnv(t), testEnv(t)}
	var cs [2]*testcollector.Collector
	for i := range cs {
		envs[i]["NEMO_STEP_SAMPLE_RATE"] = fmt.Sprint(sampleRate)
		cs[i] = testcollector.Start(t, testcollector.Config(t, "file.yaml"), testcollector.Options{Env: envs[i]})
	}
	ranks := jobVia(func(rank int) *testcollector.Collector { return cs[rank%2] }, sampleRunID, sampleRanks, sampleSteps)
	for i := range ranks {
		ranks[i].StepSpanName, ranks[i].StepsAreRoots = stepName, roots
	}
	ranks[errorRank].ErrorAtIteration = errorIt
	runJob(t, ranks)
	for _, c := range cs {
		c.Stop()
	}

	for i := range cs {
		kept, byRank := keptIterations(t, envs[i]["NEMO_TELEMETRY_DIR"], stepName)
		for r := int64(i); r < sampleRanks; r += 2 {
			wantRank := want
			if r == errorRank {
				wantRank = append(slices.Clone(want), errorIt)
				slices.Sort(wantRank)
			}
			if !slices.Equal(kept[r], wantRank) {
				t.Errorf("collector %d, rank %d: kept iterations %v, want %v", i, r, kept[r], wantRank)
			}
			wantSpans := int64(lensemu.JobSpans + len(wantRank)*lensemu.SpansPerStep(2))
			if byRank[r].Spans != wantSpans {
				t.Errorf("collector %d, rank %d: %d spans, want %d (its job spans and %d whole steps)", i, r, byRank[r].Spans, wantSpans, len(wantRank))
			}
		}
	}
	t.Logf("rate %.1f kept iterations %v of %d on every rank; the error step %d on rank %d", sampleRate, want, sampleSteps, errorIt, errorRank)
}
