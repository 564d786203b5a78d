// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/otlpsink"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/procstat"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// The benchmarks of this file measure the two tiers on this machine with
// bench/loadgen (built on first use). They take minutes and are not run by
// go test without -bench:
//
//	cd e2e && go test -run '^$' -bench 'ScaleOut|AgentHop' -benchtime 1x -timeout 30m
//
// Every process (load generators, agents, gateways) shares the machine's
// cores: on a small machine the figures compare topologies with each other,
// and CPU-seconds per million spans is the figure that carries to a larger
// one.

// scaleScenario is one topology under one load.
type scaleScenario struct {
	name     string
	agents   int // 0: the load generators send to the gateway directly
	gateways int // behind the agents
	runs     int // 1: every load generator sends the same run; else one run each
	rate     int // spans per second per load generator; 0: as fast as accepted
}

// scaleResult is what one scenario measured.
type scaleResult struct {
	offered, delivered          float64 // spans accepted by the first tier, by the gateways
	seconds                     float64 // from the start of the load until the gateways stopped receiving
	agentCPU, gatewayCPU        float64 // CPU-seconds, load and drain
	agentWrites                 float64 // bytes the agents wrote to disk (their spools), load and drain
	perGateway                  []float64
	refusedAtFirst, lostBetween float64
	ackP99                      float64 // the slowest load generator's p99 acknowledgement, ms
	queueFullLogs               int     // agents' "Sender failed" lines naming a full sending queue
}

const (
	scaleLoadgens = 8
	scaleRanks    = 8 // per load generator
	// scaleWorkers are each load generator's requests in flight at once:
	// 16 per generator, 128 in all, as many ranks' SDKs each wait for their
	// own answer (an agent answers only with its gateway's answer, so a
	// sender with few requests in flight is bound by that latency).
	scaleWorkers = 16
	scalePhase   = 10 * time.Second
	// scaleDrainQuiet ends the drain: longer than the agents' longest retry
	// interval (10s), so that data still being retried is not counted lost.
	scaleDrainQuiet = 12 * time.Second
)

// BenchmarkScaleOut: the same load of one run through one gateway alone,
// through 2 agents and 1 gateway, through 2 agents and 3 gateways; and, for
// contrast, 8 runs through 2 agents and 3 gateways. Each as fast as the
// first tier accepts, and paced at 100,000 spans/s in all, from 8 load
// generators of 8 ranks each (one per run in the 8-run case; the run ids are
// explicit, as nemo_run would merge per-process ids of one SLURM job).
func BenchmarkScaleOut(b *testing.B) {
	loadgen := buildLoadgen(b)
	var scenarios []scaleScenario
	for _, rate := range []int{0, 100_000 / scaleLoadgens} {
		load := "saturation"
		if rate > 0 {
			load = fmt.Sprintf("%dk_per_s", scaleLoadgens*rate/1000)
		}
		scenarios = append(scenarios,
			scaleScenario{name: load + "/gateway_alone/1_run", gateways: 1, runs: 1, rate: rate},
			scaleScenario{name: load + "/2_agents_1_gateway/1_run", agents: 2, gateways: 1, runs: 1, rate: rate},
			scaleScenario{name: load + "/2_agents_3_gateways/1_run", agents: 2, gateways: 3, runs: 1, rate: rate},
			scaleScenario{name: load + "/2_agents_3_gateways/8_runs", agents: 2, gateways: 3, runs: scaleLoadgens, rate: rate},
		)
	}
	for _, sc := range scenarios {
		b.Run(sc.name, func(b *testing.B) {
			for range b.N {
				r := runScaleScenario(b, loadgen, sc)
				perM := r.delivered / 1e6
				b.ReportMetric(r.offered/r.seconds, "offered_spans/s")
				b.ReportMetric(r.delivered/r.seconds, "delivered_spans/s")
				b.ReportMetric(r.agentCPU/perM, "agent_cpu_s/Mspans")
				b.ReportMetric(r.agentWrites/r.delivered, "agent_disk_B/span")
				b.ReportMetric(r.gatewayCPU/perM, "gateway_cpu_s/Mspans")
				b.ReportMetric(r.refusedAtFirst, "refused_spans")
				b.ReportMetric(r.lostBetween, "lost_between_tiers_spans")
				b.ReportMetric(r.ackP99, "ack_p99_ms")
				// The agents answer a rank once its request is in their
				// spool, and send it until a gateway takes it: nothing
				// they accepted may be missing at the gateways.
				if r.lostBetween > 0 {
					b.Errorf("%s: %.0f spans accepted by the agents never reached a gateway", sc.name, r.lostBetween)
				}
				b.Logf("%s: offered %.0f spans/s, delivered %.0f spans/s over %.1fs; per gateway %v; CPU-s/M spans agents %.2f, gateways %.2f; %d batches refused by a full agent queue",
					sc.name, r.offered/r.seconds, r.delivered/r.seconds, r.seconds, r.perGateway, r.agentCPU/perM, r.gatewayCPU/perM, r.queueFullLogs)
			}
		})
	}
}

func runScaleScenario(b *testing.B, loadgen string, sc scaleScenario) scaleResult {
	b.Helper()
	gws := startGateways(b, sc.gateways, nil)
	var (
		agents  []*testcollector.Collector
		first   []*testcollector.Collector
		targets []string
	)
	if sc.agents == 0 {
		first = []*testcollector.Collector{gws[0].Collector}
		for range scaleLoadgens {
			targets = append(targets, gws[0].endpoint())
		}
	} else {
		agents = startAgents(b, sc.agents, gws, nil)
		first = agents
		for i := range scaleLoadgens {
			targets = append(targets, agents[i%len(agents)].GRPCEndpoint())
		}
	}
	gwCollectors := make([]*testcollector.Collector, len(gws))
	for i, g := range gws {
		gwCollectors[i] = g.Collector
	}
	agentCPU0, gatewayCPU0 := cpuSeconds(b, agents...), cpuSeconds(b, gwCollectors...)
	agentWrites0 := writtenBytes(b, agents...)

	start := time.Now()
	type outcome struct {
		ackP99 float64
		err    error
	}
	errs := make(chan outcome, len(targets))
	for i, target := range targets {
		runID := fmt.Sprintf("bench-run-%d", i%sc.runs)
		args := []string{
			"-endpoint", target, "-duration", scalePhase.String(), "-ranks", strconv.Itoa(scaleRanks),
			"-run-id", runID, "-rate", strconv.Itoa(sc.rate), "-seed", strconv.Itoa(i + 1), "-conns", "2", "-workers", strconv.Itoa(scaleWorkers),
		}
		go func() {
			p99, err := runLoadgenProcess(loadgen, args)
			errs <- outcome{p99, err}
		}()
	}
	var ackP99 float64
	for range targets {
		o := <-errs
		if o.err != nil {
			b.Fatal(o.err)
		}
		ackP99 = max(ackP99, o.ackP99)
	}
	// Drain: until the gateways have received what the first tier accepted,
	// or stop receiving for scaleDrainQuiet.
	delivered := func() float64 {
		var sum float64
		for _, g := range gws {
			sum += acceptedSpans(b, g.Collector)
		}
		return sum
	}
	var offered, refused float64
	for _, c := range first {
		offered += acceptedSpans(b, c)
		v, _, _ := c.Metric("otelcol_receiver_refused_spans")
		refused += v
	}
	last, lastGrowth := delivered(), time.Now()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline) && time.Since(lastGrowth) < scaleDrainQuiet && last < offered; {
		time.Sleep(250 * time.Millisecond)
		if v := delivered(); v != last {
			last, lastGrowth = v, time.Now()
		}
	}
	r := scaleResult{
		offered:        offered,
		delivered:      last,
		seconds:        lastGrowth.Sub(start).Seconds(),
		agentCPU:       cpuSeconds(b, agents...) - agentCPU0,
		agentWrites:    writtenBytes(b, agents...) - agentWrites0,
		gatewayCPU:     cpuSeconds(b, gwCollectors...) - gatewayCPU0,
		refusedAtFirst: refused,
		ackP99:         ackP99,
	}
	if sc.agents > 0 {
		r.lostBetween = offered - last
	}
	for _, g := range gws {
		r.perGateway = append(r.perGateway, acceptedSpans(b, g.Collector))
	}
	for _, a := range agents {
		for line := range strings.SplitSeq(a.Logs(), "\n") {
			if strings.Contains(line, "Sender failed") && strings.Contains(line, "sending queue is full") {
				r.queueFullLogs++
			}
		}
	}
	stopTier(agents, gws)
	return r
}

// BenchmarkAgentHopLatency: how much later a span reaches the backend when
// it goes through an agent. One load generator, paced, one step per request,
// steps 1ms long (so a span ends when it is sent); the gateway delivers to a
// fake OTLP backend with configs/otlp.yaml's exporter (merged as
// configs/gateway.yaml documents), which notes, per span, arrival time
// minus end time. Directly to the gateway, then through one agent. At
// 50,000 spans/s the direct path is bound by the gateway's persistent queue,
// which pays per request (bench/runs/2026-12-06-hop-latency.md).
func BenchmarkAgentHopLatency(b *testing.B) {
	loadgen := buildLoadgen(b)
	for _, rate := range []int{2_000, 50_000} {
		for _, viaAgent := range []bool{false, true} {
			name := fmt.Sprintf("%d_spans_per_s/direct", rate)
			if viaAgent {
				name = fmt.Sprintf("%d_spans_per_s/via_agent", rate)
			}
			b.Run(name, func(b *testing.B) {
				for range b.N {
					p50, p99 := measureHopLatency(b, loadgen, rate, viaAgent)
					b.ReportMetric(p50, "p50_ms")
					b.ReportMetric(p99, "p99_ms")
				}
			})
		}
	}
}

func measureHopLatency(b *testing.B, loadgen string, rate int, viaAgent bool) (p50, p99 float64) {
	b.Helper()
	sink, err := otlpsink.Start(nil)
	if err != nil {
		b.Fatal(err)
	}
	defer sink.Close()
	var (
		mu        sync.Mutex
		latencies []float64 // ms
	)
	sink.SetRespond(func(r otlpsink.Request) (int, http.Header, []byte) {
		if r.Signal != otlpsink.Traces {
			return 0, nil, nil
		}
		now := time.Now().UnixNano()
		mu.Lock()
		defer mu.Unlock()
		rss := r.Traces.ResourceSpans()
		for i := 0; i < rss.Len(); i++ {
			for j := 0; j < rss.At(i).ScopeSpans().Len(); j++ {
				spans := rss.At(i).ScopeSpans().At(j).Spans()
				for k := 0; k < spans.Len(); k++ {
					latencies = append(latencies, float64(now-int64(spans.At(k).EndTimestamp()))/1e6)
				}
			}
		}
		return 0, nil, nil
	})
	env := tierEnv(b)
	env["OTLP_BACKEND_PROTOCOL"], env["OTLP_BACKEND_ENDPOINT"] = "http/protobuf", sink.URL
	env["OTLP_BACKEND_METRICS"], env["OTLP_BACKEND_LOGS"] = "true", "true"
	for _, signal := range []string{"TRACES", "METRICS", "LOGS"} {
		env["NEMO_GATEWAY_"+signal+"_EXPORTERS"] = "[nemo_otlp]"
	}
	gw := testcollector.Start(b, testcollector.Config(b, "otlp.yaml"), testcollector.Options{
		Env: env, Args: []string{"--config=" + testcollector.Config(b, "gateway.yaml")},
	})
	port, _ := strconv.Atoi(gw.Env["OTLP_GRPC_PORT"])
	gws := []*gateway{{Collector: gw, grpcPort: port, env: env}}
	target := gws[0].endpoint()
	var agents []*testcollector.Collector
	if viaAgent {
		agents = startAgents(b, 1, gws, nil)
		target = agents[0].GRPCEndpoint()
	}
	args := []string{
		"-endpoint", target, "-duration", scalePhase.String(), "-ranks", "8", "-rate", strconv.Itoa(rate),
		"-microbatches", "4", "-batch", "20", "-step-duration", "1ms",
	}
	if _, err := runLoadgenProcess(loadgen, args); err != nil {
		b.Fatal(err)
	}
	stopTier(agents, gws)
	mu.Lock()
	defer mu.Unlock()
	if len(latencies) == 0 {
		b.Fatal("no span reached the backend")
	}
	slices.Sort(latencies)
	return latencies[len(latencies)/2], latencies[len(latencies)*99/100]
}

// cpuSeconds is the CPU time the collectors' processes have used so far.
func cpuSeconds(b *testing.B, cs ...*testcollector.Collector) float64 {
	return sumOverProcesses(b, cs, func(pid int) (float64, error) {
		cpu, err := procstat.CPU(pid)
		return cpu.Seconds(), err
	})
}

// writtenBytes is what the collectors' processes have written to disk so far.
func writtenBytes(b *testing.B, cs ...*testcollector.Collector) float64 {
	return sumOverProcesses(b, cs, func(pid int) (float64, error) {
		n, err := procstat.WriteBytes(pid)
		return float64(n), err
	})
}

func sumOverProcesses(b *testing.B, cs []*testcollector.Collector, read func(pid int) (float64, error)) float64 {
	b.Helper()
	var sum float64
	for _, c := range cs {
		v, err := read(c.Pid())
		if err != nil {
			b.Fatal(err)
		}
		sum += v
	}
	return sum
}

// runLoadgenProcess runs the load generator to its end (it stops by itself;
// the timeout guards against a hang) and returns its acknowledgement
// latency's p99 in milliseconds.
func runLoadgenProcess(bin string, args []string) (float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), scalePhase+2*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "loadgen-report")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	reportPath := filepath.Join(dir, "report.json")
	out, err := exec.CommandContext(ctx, bin, append(slices.Clone(args), "-out", reportPath)...).CombinedOutput() //nolint:gosec // G204: the load generator this test built, with the test's own arguments
	if err != nil {
		return 0, fmt.Errorf("loadgen %v: %w\n%s", args, err, out)
	}
	raw, err := os.ReadFile(reportPath)
	if err != nil {
		return 0, err
	}
	var report struct {
		LatencyMs map[string]float64 `json:"latency_ms"`
	}
	if err := json.Unmarshal(raw, &report); err != nil {
		return 0, fmt.Errorf("loadgen report: %w", err)
	}
	return report.LatencyMs["p99"], nil
}
