// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// TestRunPagesSurviveARestart: the default preset as committed; four runs
// (one per shape) of 4 ranks on two hosts, rank 2 three times as slow on
// iterations 2 to 4, hung in iteration 5 (rank 1 stops). The collector is
// stopped and started again on the same directories: its pages list the
// four runs with the same ranks, heatmap, step times, straggler rows and
// stalls as before, and their goodput, read back from file_storage.
func TestRunPagesSurviveARestart(t *testing.T) {
	env := testEnv(t)
	delete(env, "NEMO_RANK_STRATEGY")
	env["NEMO_STALL_AFTER"] = stallAfter.String()
	env["NEMO_STRAGGLER_WAIT"] = "2s"
	c := testcollector.Start(t, testcollector.Config(t, "file.yaml"), testcollector.Options{Env: env})
	before := map[string]map[string]any{}
	for name, shape := range stallShapes {
		run := runName("run-restart", name)
		ranks := hungJob(c, run, 4, map[int]lensemu.HangRole{1: lensemu.Stopped}, shape)
		ranks[2].ComputeDuration = func(it int) time.Duration {
			if it >= 2 {
				return stepSlowdown * lensemu.DefaultComputeDuration
			}
			return lensemu.DefaultComputeDuration
		}
		runJob(t, ranks)
		stallRecords(t, env["NEMO_TELEMETRY_DIR"], run, "nemo.run.stalled")
		waitFor(t, deliveryTimeout, "the page of "+run+" with its stall and goodput", func() bool {
			p := restartPage(t, c.ViewPort, run)
			return p["stalls"] != nil && len(p["stalls"].([]any)) == 1 && p["goodput"] != nil
		})
		before[run] = restartPage(t, c.ViewPort, run)
	}
	c.Stop()

	again := testcollector.Start(t, testcollector.Config(t, "file.yaml"), testcollector.Options{Env: env})
	defer again.Stop()
	for run, want := range before {
		if pageKey(t, again.ViewPort, run) == "" {
			t.Errorf("%s: not on the pages after the restart", run)
			continue
		}
		got := restartPage(t, again.ViewPort, run)
		for k, w := range want {
			if fmt.Sprint(got[k]) != fmt.Sprint(w) {
				t.Errorf("%s, %s after the restart:\n %v\nbefore:\n %v", run, k, got[k], w)
			}
		}
		if got["goodput"] == nil {
			t.Errorf("%s: no goodput after the restart", run)
		}
	}
}

// restartPage is what a run page shows that a restart must keep: its
// steps (runPage), its stalls' kind, iteration and culprits, whether it
// has goodput.
func restartPage(t *testing.T, viewPort int, run string) map[string]any {
	t.Helper()
	detail := runDetail(t, viewPort, run)
	page := stepsShown(detail)
	var stalls []any
	for _, s := range asList(detail["stalls"]) {
		m, _ := s.(map[string]any)
		stalls = append(stalls, fmt.Sprint(m["kind"], m["iteration"], m["culprit_ranks"], m["culprit_hosts"]))
	}
	page["stalls"] = stalls
	if g, ok := detail["goodput_detail"].(map[string]any); ok {
		page["goodput"] = g["goodput"] != nil
	}
	return page
}
