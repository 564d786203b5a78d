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

	"github.com/nemo-lens/otelcol-nemo/internal/testing/procstat"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// BenchmarkTwoTierSummaries: what crosses between the tiers, and what it
// costs each tier, with the agents as committed (single_rank, summaries of
// the ranks they drop) against all_ranks (every span of every rank), the
// gateway as committed. Two agents, one gateway; one load generator per
// agent, each a run of 64 Lens-shaped ranks (bench/loadgen: 20 spans per
// step, 2 pipeline stages, 2 straggling ranks), 50,000 spans/s each. Per
// million spans the ranks produced: the items and bytes the gateway
// received (its receiver's spans; its bytes read, which are the compressed
// OTLP from the agents), the agents' and the gateway's CPU-seconds.
//
//	cd e2e && go test -run '^$' -bench TwoTierSummaries -benchtime 1x -timeout 20m
func BenchmarkTwoTierSummaries(b *testing.B) {
	loadgen := buildLoadgen(b)
	for _, mode := range []struct {
		name string
		env  map[string]string
	}{
		{"summaries", map[string]string{}},
		{"all_ranks", map[string]string{"NEMO_RANK_STRATEGY": "all_ranks"}},
	} {
		b.Run(mode.name, func(b *testing.B) {
			for range b.N {
				r := runSummaryScenario(b, loadgen, mode.env)
				perM := r.produced / 1e6
				b.ReportMetric(r.items/perM, "gateway_items/Mspans")
				b.ReportMetric(r.bytes/perM, "gateway_bytes/Mspans")
				b.ReportMetric(r.agentCPU/perM, "agent_cpu_s/Mspans")
				b.ReportMetric(r.gatewayCPU/perM, "gateway_cpu_s/Mspans")
				b.ReportMetric(r.produced/r.seconds, "produced_spans/s")
				b.Logf("%s: %.0f spans produced in %.1fs; the gateway received %.0f items, %.0f bytes; CPU-s agents %.2f, gateway %.2f",
					mode.name, r.produced, r.seconds, r.items, r.bytes, r.agentCPU, r.gatewayCPU)
			}
		})
	}
}

type summaryResult struct {
	produced, items, bytes, seconds, agentCPU, gatewayCPU float64
}

func runSummaryScenario(b *testing.B, loadgen string, env map[string]string) summaryResult {
	b.Helper()
	adjust := func(e map[string]string) {
		delete(e, "NEMO_RANK_STRATEGY")
		for k, v := range env {
			e[k] = v
		}
	}
	gws := startGateways(b, 1, adjust)
	agents := startAgents(b, 2, gws, adjust)
	gw := gws[0].Collector
	cpu := func(cs ...*testcollector.Collector) float64 {
		var sum float64
		for _, c := range cs {
			d, err := procstat.CPU(c.Pid())
			if err != nil {
				b.Fatal(err)
			}
			sum += d.Seconds()
		}
		return sum
	}
	agentCPU0, gatewayCPU0, bytes0 := cpu(agents...), cpu(gw), readBytes(b, gw.Pid())
	start := time.Now()
	errs := make(chan error, len(agents))
	for i, a := range agents {
		args := []string{
			"-endpoint", a.GRPCEndpoint(), "-duration", scalePhase.String(), "-ranks", "64", "-batch", "100",
			"-run-id", fmt.Sprintf("bench-summaries-%d", i), "-rate", "50000", "-seed", strconv.Itoa(i + 1),
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
	r := summaryResult{
		produced: produced, items: last, bytes: readBytes(b, gw.Pid()) - bytes0,
		seconds: lastGrowth.Sub(start).Seconds(), agentCPU: cpu(agents...) - agentCPU0, gatewayCPU: cpu(gw) - gatewayCPU0,
	}
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
