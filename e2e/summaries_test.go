// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// Two tiers as committed: configs/agent.yaml (single_rank, summaries of the
// ranks it drops) in front of configs/gateway.yaml. The gateway receives
// the export rank's spans and summaries of the others, and still judges
// every rank of the run.

// asCommitted adjusts tierEnv's values to the presets as committed (the
// strategy, straggler retention and summaries at their defaults), with env
// added.
func asCommitted(env map[string]string) func(map[string]string) {
	return func(e map[string]string) {
		delete(e, "NEMO_RANK_STRATEGY")
		maps.Copy(e, env)
	}
}

// summaryTier starts two gateways and two agents with the presets as
// committed, with env added to every one of them.
func summaryTier(t *testing.T, env map[string]string) ([]*testcollector.Collector, []*gateway) {
	t.Helper()
	adjust := asCommitted(env)
	gws := startGateways(t, 2, adjust)
	return startAgents(t, 2, gws, adjust), gws
}

// theGateway is the one gateway that holds run.
func theGateway(t *testing.T, outputs []telemetry, run string) telemetry {
	t.Helper()
	at := holders(outputs, run)
	if len(at) != 1 {
		t.Fatalf("%s found on gateways %v, want exactly one", run, at)
	}
	return outputs[at[0]]
}

// TestTwoTiersSeeEveryRank: a synchronous 16-rank job on two nodes, each
// node behind its own agent, rank 5 (node 0) three times as slow on the
// last step, rank 15 (node 1) the export rank. On the gateway that holds
// the run: step metrics for all 16 ranks and every step, with the busy
// times one collector measures (computed from the agents' summaries for
// the 14 dropped ranks that are not the straggler), rank 5 alone scored
// below the threshold on the slow step, and rank 5's slow step kept whole
// as a straggler although its agent's strategy drops it; nothing else of
// the dropped ranks, and no summary, in the traces written; its run page
// counts 16 ranks. All four shapes.
func TestTwoTiersSeeEveryRank(t *testing.T) {
	for name, shape := range stallShapes {
		t.Run(name, func(t *testing.T) {
			agents, gws := summaryTier(t, map[string]string{"NEMO_STRAGGLER_WAIT": "3s"})
			run := runName("run-tiers", name)
			ranks := nodeJob(agents, run, stepRanks, stepCount)
			for i := range ranks {
				if shape != nil {
					shape(&ranks[i])
				}
			}
			ranks[slowRank].ComputeDuration = func(it int) time.Duration {
				if it == slowStep {
					return stepSlowdown * lensemu.DefaultComputeDuration
				}
				return lensemu.DefaultComputeDuration
			}
			sent := runJobByRank(t, ranks)
			waitFor(t, deliveryTimeout, "the run page of "+run+" counting all 16 ranks", func() bool {
				return pageRanks(t, gws, run) == stepRanks
			})
			stopTier(agents, gws)

			got := theGateway(t, readGateways(t, gws), run)
			checkSlowStepGauges(t, stepGaugePoints(t, got, func(record) {}))
			if got.ByRank[stepRanks-1] != sent[stepRanks-1] {
				t.Errorf("export rank: acknowledged %s, found %s", describe(sent[stepRanks-1]), describe(got.ByRank[stepRanks-1]))
			}
			if spans := got.ByRank[slowRank].Spans; spans != int64(lensemu.SpansPerStep(2)) {
				t.Errorf("rank %d: %d spans kept, want its slow step's %d", slowRank, spans, lensemu.SpansPerStep(2))
			}
			for rank, res := range got.ByRank {
				if rank != slowRank && rank != stepRanks-1 {
					t.Errorf("rank %d should have been dropped (summarized), found %s", rank, describe(res))
				}
			}
			for _, rec := range got.SpanRecords {
				if strings.Contains(fmt.Sprint(rec["scope"]), "step-summary") || rec.attributes()["nemo.summary.kind"] != nil {
					t.Fatalf("a step summary was written as a span: %v", rec)
				}
			}
		})
	}
}

// pageRanks is the rank count of run on the run pages (nemo_view's
// /api/runs) of the gateway that holds it; 0 before any has it.
func pageRanks(t *testing.T, gws []*gateway, run string) int {
	t.Helper()
	for _, g := range gws {
		var runs []struct {
			ID    string `json:"id"`
			Ranks int    `json:"ranks"`
		}
		getJSON(t, fmt.Sprintf("http://127.0.0.1:%d/api/runs", g.ViewPort), &runs)
		for _, r := range runs {
			if r.ID == run {
				return r.Ranks
			}
		}
	}
	return 0
}

// TestTwoTiersNameTheHungRank: a job of 8 ranks on two nodes (node-a ranks
// 0-3 behind agent 0, node-b ranks 4-7 behind agent 1) hangs at iteration
// 5 because rank 6 stops in its forward; the others block in grad sync.
// Rank 7 is the export rank, so rank 6 reaches the gateway only as
// summaries and progress beats; the gateway's stall record names rank 6 and
// node-b, in all four shapes.
func TestTwoTiersNameTheHungRank(t *testing.T) {
	for name, shape := range stallShapes {
		t.Run(name, func(t *testing.T) {
			agents, gws := summaryTier(t, map[string]string{
				"NEMO_STALL_AFTER": stallAfter.String(), "NEMO_STRAGGLER_WAIT": "2s", "NEMO_PROGRESS_INTERVAL": "500ms",
			})
			run := runName("run-tier-hang", name)
			runJob(t, hungJobVia(func(rank int) *testcollector.Collector { return agents[rank/4] }, run, 8, map[int]lensemu.HangRole{6: lensemu.Stopped}, shape))
			var rec record
			waitFor(t, deliveryTimeout+10*time.Second, "a stall record on a gateway", func() bool {
				for _, g := range gws {
					for _, r := range readTelemetry(t, g.dir()).StallRecords {
						if r.attributes()["event.name"] == "nemo.run.stalled" && r.resource()["nemo.run.id"] == run {
							rec = r
							return true
						}
					}
				}
				return false
			})
			attrs := rec.attributes()
			if got := ints(t, attrs["nemo.stall.culprit_ranks"]); !slices.Equal(got, []int64{6}) {
				t.Errorf("culprit ranks %v, want [6]; %s", got, rec.str("body"))
			}
			if got := strs(attrs["nemo.stall.culprit_hosts"]); !slices.Equal(got, []string{"node-b"}) {
				t.Errorf("culprit hosts %v, want [node-b]", got)
			}
			if !strings.Contains(rec.str("body"), "rank 6 on node-b last finished megatron.microbatch.forward") {
				t.Errorf("body does not say where rank 6 stopped: %s", rec.str("body"))
			}
			stopTier(agents, gws)
		})
	}
}

// TestTwoTiersAgentRestartedMidRun: a 16-rank run on two nodes trains 4
// iterations; then node 0's agent is killed (SIGKILL) and started again, and
// the run trains 4 more. The gateway's step metrics have every rank's
// every iteration: what the killed agent had summarized and the gateway
// answered was kept, and the new agent summarizes its node's ranks from
// its first step on. (What an agent holds of the step it has not decided
// when it is killed is lost: docs/operating.md.) All four shapes.
func TestTwoTiersAgentRestartedMidRun(t *testing.T) {
	for name, shape := range stallShapes {
		t.Run(name, func(t *testing.T) { checkAgentRestartedMidRun(t, runName("run-tier-restart", name), shape) })
	}
}

func checkAgentRestartedMidRun(t *testing.T, run string, shape func(*lensemu.Rank)) {
	const world, steps = 16, 4
	agents, gws := summaryTier(t, map[string]string{"NEMO_STRAGGLER_WAIT": "2s"})
	job := func(iterations int) []lensemu.Rank {
		ranks := nodeJob(agents, run, world, iterations)
		for i := range ranks {
			if shape != nil {
				shape(&ranks[i])
			}
		}
		return ranks
	}
	runJob(t, job(steps))
	waitFor(t, deliveryTimeout, "the gateway's step metrics of every rank and iteration so far", func() bool {
		points := busyPoints(t, gws, run)
		for rank := range int64(world) {
			if points[rank] != steps {
				return false
			}
		}
		return true
	})
	killed := agents[0]
	killed.Kill()
	agents[0] = testcollector.Start(t, testcollector.Config(t, "agent.yaml"), testcollector.Options{Env: killed.Env})
	// Iterations steps+1 to 2*steps, after the first ones.
	again := job(2 * steps)
	start := time.Now()
	for i := range again {
		again[i].FirstIteration, again[i].Start = steps+1, start
	}
	runJob(t, again)
	// The agent answered from its spool: wait for the gateway to have
	// everything before stopping the tiers (a stopped agent keeps what it
	// has not sent yet on its disk, for its next start).
	waitFor(t, deliveryTimeout, "the gateway's step metrics of every rank and iteration", func() bool {
		points := busyPoints(t, gws, run)
		for rank := range int64(world) {
			if points[rank] != 2*steps {
				return false
			}
		}
		return true
	})
	stopTier(agents, gws)

	busy := busyPoints(t, gws, run)
	for rank := range int64(world) {
		if busy[rank] != 2*steps {
			t.Errorf("rank %d: %d busy time points, want one per iteration (%d)", rank, busy[rank], 2*steps)
		}
	}
}

// busyPoints counts the nemo.step.busy_time points of run on the gateways,
// by rank.
func busyPoints(t *testing.T, gws []*gateway, run string) map[int64]int {
	t.Helper()
	busy := map[int64]int{}
	for _, g := range gws {
		for _, p := range readTelemetry(t, g.dir()).StepPoints {
			if p.str("name") != "nemo.step.busy_time" || p.resource()["nemo.run.id"] != run {
				continue
			}
			n, _ := p.attributes()["nv.dl.rank"].(json.Number).Int64()
			busy[n]++
		}
	}
	return busy
}
