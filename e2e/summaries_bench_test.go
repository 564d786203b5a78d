// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkTwoTierSummaries: what crosses between the tiers, and what it
// costs each tier, with the agents as committed (single_rank, summaries of
// the ranks they drop) against all_ranks (every span of every rank), the
// gateway as committed. Two agents, one gateway; one load generator per
// agent, each a run of 64 Lens-shaped ranks (bench/loadgen: 20 spans per
// step or 101, 2 pipeline stages, 2 ranks straggling on every step),
// 10,000 or 50,000 spans/s each; and, for the price, the agents of the
// last release (no summaries: NEMO_STRAGGLERS=false). Per
// million spans the ranks produced: the items and bytes the gateway
// received (its receiver's spans; its bytes read, which are the compressed
// OTLP from the agents), the agents' and the gateway's CPU-seconds above
// their idle rate.
//
//	cd e2e && go test -run '^$' -bench TwoTierSummaries -benchtime 1x -timeout 20m
func BenchmarkTwoTierSummaries(b *testing.B) {
	loadgen := buildLoadgen(b)
	summaries := map[string]string{}
	noSummaries := map[string]string{"NEMO_STRAGGLERS": "false"}
	allRanks := map[string]string{"NEMO_RANK_STRATEGY": "all_ranks"}
	for _, sc := range []struct {
		name         string
		env          map[string]string
		microbatches int // spans per rank-step: 8 + 3 x microbatches
		rate         int // per load generator
	}{
		// About NeMo Lens density (101 spans per rank-step) at a pace every
		// mode sustains on two cores (all_ranks' agents answer a rank only
		// with the gateway's answer, so they take fewer spans per second
		// than agents that drop most of them).
		{"101_spans_per_step/20k_per_s/summaries", summaries, 31, 10_000},
		{"101_spans_per_step/20k_per_s/no_summaries", noSummaries, 31, 10_000},
		{"101_spans_per_step/20k_per_s/all_ranks", allRanks, 31, 10_000},
		// The load generator's default step (20 spans).
		{"20_spans_per_step/20k_per_s/summaries", summaries, 4, 10_000},
		{"20_spans_per_step/20k_per_s/all_ranks", allRanks, 4, 10_000},
		// The agents' price at 100,000 spans/s, against the last release's
		// agents.
		{"101_spans_per_step/100k_per_s/summaries", summaries, 31, 50_000},
		{"101_spans_per_step/100k_per_s/no_summaries", noSummaries, 31, 50_000},
	} {
		b.Run(sc.name, func(b *testing.B) {
			for range b.N {
				r := runSummaryScenario(b, loadgen, sc.env, sc.microbatches, sc.rate)
				perM := r.produced / 1e6
				b.ReportMetric(r.items/perM, "gateway_items/Mspans")
				b.ReportMetric(r.bytes/perM, "gateway_bytes/Mspans")
				b.ReportMetric(r.summaries/perM, "summaries/Mspans")
				b.ReportMetric(r.agentCPU/perM, "agent_cpu_s/Mspans")
				b.ReportMetric(r.gatewayCPU/perM, "gateway_cpu_s/Mspans")
				b.ReportMetric(r.produced/r.seconds, "produced_spans/s")
				b.Logf("%s: %.0f spans produced, drained in %.1fs; the gateway received %.0f items (%.0f summaries), %.0f bytes; CPU-s above idle: agents %.2f, gateway %.2f",
					sc.name, r.produced, r.seconds, r.items, r.summaries, r.bytes, r.agentCPU, r.gatewayCPU)
			}
		})
	}
}

type summaryResult struct {
	produced, items, bytes, summaries, seconds, agentCPU, gatewayCPU float64
}

// idleWindow is how long each process's idle CPU (tickers, GC) is measured
// before the load, to leave it out of the figures: the drains differ in
// length (summaries trickle until the agents' last decisions).
const idleWindow = 5 * time.Second

func runSummaryScenario(b *testing.B, loadgen string, env map[string]string, microbatches, rate int) summaryResult {
	b.Helper()
	adjust := asCommitted(env)
	gws := startGateways(b, 1, adjust)
	agents := startAgents(b, 2, gws, adjust)
	gw := gws[0].Collector
	idleAgents, idleGateway := cpuSeconds(b, agents...), cpuSeconds(b, gw)
	time.Sleep(idleWindow)
	agentCPU0, gatewayCPU0, bytes0 := cpuSeconds(b, agents...), cpuSeconds(b, gw), readBytes(b, gw.Pid())
	idleAgents, idleGateway = (agentCPU0-idleAgents)/idleWindow.Seconds(), (gatewayCPU0-idleGateway)/idleWindow.Seconds()
	start := time.Now()
	errs := make(chan error, len(agents))
	for i, a := range agents {
		args := []string{
			"-endpoint", a.GRPCEndpoint(), "-duration", scalePhase.String(), "-ranks", "64", "-batch", strconv.Itoa(5 * (8 + 3*microbatches)),
			"-microbatches", strconv.Itoa(microbatches),
			"-run-id", fmt.Sprintf("bench-summaries-%d", i), "-rate", strconv.Itoa(rate), "-seed", strconv.Itoa(i + 1),
			"-conns", "2", "-workers", strconv.Itoa(scaleWorkers), "-stragglers", "2",
		}
		go func() {
			_, err := runLoadgenProcess(loadgen, args)
			errs <- err
		}()
	}
	for range agents {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	var produced float64
	for _, a := range agents {
		produced += acceptedSpans(b, a)
	}
	// Drain: until the gateway stops receiving (the agents decide their
	// last steps within decision_wait).
	last, lastGrowth := acceptedSpans(b, gw), time.Now()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline) && time.Since(lastGrowth) < 12*time.Second; {
		time.Sleep(250 * time.Millisecond)
		if v := acceptedSpans(b, gw); v != last {
			last, lastGrowth = v, time.Now()
		}
	}
	var summaries float64
	for _, a := range agents {
		v, _, err := a.Metric("otelcol_processor_rank_strategy_summaries")
		if err != nil {
			b.Fatal(err)
		}
		summaries += v
	}
	r := summaryResult{
		summaries: summaries,
		produced:  produced, items: last, bytes: readBytes(b, gw.Pid()) - bytes0,
		seconds: lastGrowth.Sub(start).Seconds(),
	}
	elapsed := time.Since(start).Seconds()
	r.agentCPU = cpuSeconds(b, agents...) - agentCPU0 - idleAgents*elapsed
	r.gatewayCPU = cpuSeconds(b, gw) - gatewayCPU0 - idleGateway*elapsed
	stopTier(agents, gws)
	return r
}

// readBytes is the bytes a process read (rchar: sockets and files).
func readBytes(b *testing.B, pid int) float64 {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "rchar: "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatal("no rchar in /proc/pid/io")
	return 0
}
