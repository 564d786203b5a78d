package e2e

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.yaml.in/yaml/v3"

	"github.com/nemo-lens/otelcol-nemo/internal/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/otlpsink"
	"github.com/nemo-lens/otelcol-nemo/internal/procstat"
	"github.com/nemo-lens/otelcol-nemo/internal/testcollector"
)

// The two-tier deployment on loopback: configs/agent.yaml in front of
// configs/gateway.yaml, each a separate process of the built binary, the
// agents finding the gateways with the static resolver (GATEWAY_ENDPOINTS).

// gateway is one gateway process and what it takes to start it again in its
// place (same OTLP/gRPC port, same output directory).
type gateway struct {
	*testcollector.Collector
	grpcPort int
	env      map[string]string
}

// endpoint is the address the agents send to.
func (g *gateway) endpoint() string { return "127.0.0.1:" + strconv.Itoa(g.grpcPort) }

func (g *gateway) dir() string { return g.env["NEMO_TELEMETRY_DIR"] }

// tierEnv is what a gateway or an agent of these tests needs from testEnv:
// its own output and queue directories, and every rank kept.
func tierEnv(tb testing.TB) map[string]string {
	return map[string]string{
		"NEMO_TELEMETRY_DIR": tb.TempDir(),
		"NEMO_QUEUE_DIR":     tb.TempDir(),
		"NEMO_RANK_STRATEGY": "all_ranks",
	}
}

// startGateway runs configs/gateway.yaml with env on grpcPort (0: a free port).
func startGateway(t testing.TB, env map[string]string, grpcPort int) *gateway {
	t.Helper()
	env = maps.Clone(env)
	if grpcPort != 0 {
		env["OTLP_GRPC_PORT"] = strconv.Itoa(grpcPort)
	}
	c := testcollector.Start(t, testcollector.Config(t, "gateway.yaml"), testcollector.Options{Env: env})
	port, err := strconv.Atoi(c.Env["OTLP_GRPC_PORT"])
	if err != nil {
		t.Fatalf("gateway port: %v", err)
	}
	return &gateway{Collector: c, grpcPort: port, env: env}
}

// startGateways starts n gateways, each with tierEnv's values (its own
// output directory) changed by adjust, when not nil.
func startGateways(t testing.TB, n int, adjust func(env map[string]string)) []*gateway {
	t.Helper()
	gws := make([]*gateway, n)
	for i := range gws {
		env := tierEnv(t)
		if adjust != nil {
			adjust(env)
		}
		gws[i] = startGateway(t, env, 0)
	}
	return gws
}

// gatewayList is the agents' GATEWAY_ENDPOINTS: a YAML flow list.
func gatewayList(gws []*gateway) string {
	eps := make([]string, len(gws))
	for i, g := range gws {
		eps[i] = g.endpoint()
	}
	return "[" + strings.Join(eps, ",") + "]"
}

// startAgents starts n agents (configs/agent.yaml) sending to gws, with
// tierEnv's values changed by adjust, when not nil, and extra arguments.
func startAgents(t testing.TB, n int, gws []*gateway, adjust func(env map[string]string), args ...string) []*testcollector.Collector {
	t.Helper()
	agents := make([]*testcollector.Collector, n)
	for i := range agents {
		env := tierEnv(t)
		env["GATEWAY_ENDPOINTS"] = gatewayList(gws)
		if adjust != nil {
			adjust(env)
		}
		agents[i] = testcollector.Start(t, testcollector.Config(t, "agent.yaml"), testcollector.Options{Env: env, Args: args})
	}
	return agents
}

// nodeJob returns the ranks of one run laid out on nodes of 8 ranks (the
// emulator's host.name is node<rank/8>), each node sending to its own agent:
// node k to agents[k % len(agents)]. As in mixedJob, half the ranks use
// http/protobuf and the rank attributes vary in spelling and type.
func nodeJob(agents []*testcollector.Collector, runID string, worldSize, steps int, extra ...attribute.KeyValue) []lensemu.Rank {
	return jobVia(func(rank int) *testcollector.Collector { return agents[(rank/8)%len(agents)] }, runID, worldSize, steps, extra...)
}

// sentByRun adds up what was acknowledged per run.
func sentByRun(ranks []lensemu.Rank, results []lensemu.Result) map[string]lensemu.Result {
	out := map[string]lensemu.Result{}
	for i, r := range ranks {
		out[r.RunID] = out[r.RunID].Add(results[i])
	}
	return out
}

// stopTier stops the agents first, so that they deliver what they hold,
// then the gateways, so that they write it.
func stopTier(agents []*testcollector.Collector, gws []*gateway) {
	for _, a := range agents {
		a.Stop()
	}
	for _, g := range gws {
		g.Stop()
	}
}

// holders returns the indexes of the outputs that hold anything of run.
func holders(outputs []telemetry, run string) []int {
	var idx []int
	for i, o := range outputs {
		if o.ByRun[run] != (lensemu.Result{}) {
			idx = append(idx, i)
		}
	}
	return idx
}

func readGateways(t *testing.T, gws []*gateway) []telemetry {
	t.Helper()
	out := make([]telemetry, len(gws))
	for i, g := range gws {
		out[i] = readTelemetry(t, g.dir())
	}
	return out
}

// acceptedSpans is a collector's otelcol_receiver_accepted_spans (0 before
// the first span).
func acceptedSpans(t testing.TB, c *testcollector.Collector) float64 {
	t.Helper()
	v, _, err := c.Metric("otelcol_receiver_accepted_spans")
	if err != nil {
		t.Fatalf("scrape: %v", err)
	}
	return v
}

// TestScaleOutRoutesEachRunToOneGateway: 2 agents, 3 gateways, 4 runs of 16
// ranks, each run's ranks on two nodes with an agent each. Every run's
// spans, data points and log records are all on exactly one gateway, as
// many as the ranks had acknowledged, and nowhere else.
func TestScaleOutRoutesEachRunToOneGateway(t *testing.T) {
	gws := startGateways(t, 3, nil)
	agents := startAgents(t, 2, gws, nil)
	runs := []string{"run-alpha", "run-bravo", "run-charlie", "run-delta"}
	var ranks []lensemu.Rank
	for _, run := range runs {
		ranks = append(ranks, nodeJob(agents, run, 16, 3)...)
	}
	results := runJobByRank(t, ranks)
	for i, a := range agents {
		if acceptedSpans(t, a) == 0 {
			t.Errorf("agent %d received nothing: the job was not spread over both agents", i)
		}
	}
	stopTier(agents, gws)

	sent := sentByRun(ranks, results)
	outputs := readGateways(t, gws)
	placement := map[string]int{}
	for _, run := range runs {
		at := holders(outputs, run)
		if len(at) != 1 {
			t.Errorf("%s: found on gateways %v, want exactly one", run, at)
			continue
		}
		placement[run] = at[0]
		if got := outputs[at[0]].ByRun[run]; got != sent[run] {
			t.Errorf("%s on gateway %d: acknowledged %s, found %s", run, at[0], describe(sent[run]), describe(got))
		}
	}
	var total lensemu.Result
	for i, o := range outputs {
		total = total.Add(o.Result)
		for run := range o.ByRun {
			if !slices.Contains(runs, run) {
				t.Errorf("gateway %d holds data of unexpected run %q", i, run)
			}
		}
	}
	if want := lensemu.Sum(results); total != want {
		t.Errorf("the gateways hold %s in all, the ranks had %s acknowledged", describe(total), describe(want))
	}
	t.Logf("run -> gateway: %v (gateways %s)", placement, gatewayList(gws))
}

// TestScaleOutStragglersAcrossAgents: straggler retention on the gateways,
// the agents forwarding every rank (all_ranks). One run of 16 ranks on two
// nodes, so the ranks reach the gateway through two agents; rank 5 (node 0)
// computes twice as long on iterations 2 and 4 (the others wait for it in
// grad sync, as in synchronous training), rank 15 (node 1) is the export
// rank. The gateway that holds the run keeps all of rank 15 and exactly rank
// 5's two slow step subtrees, marked as stragglers; the others hold nothing.
func TestScaleOutStragglersAcrossAgents(t *testing.T) {
	const straggler, worldSize, steps = 5, 16, 5
	slow := map[int]bool{2: true, 4: true}
	gws := startGateways(t, 3, func(env map[string]string) {
		delete(env, "NEMO_RANK_STRATEGY") // single_rank, last rank; stragglers on
	})
	agents := startAgents(t, 2, gws, nil) // all_ranks (tierEnv)
	ranks := nodeJob(agents, "run-straggler", worldSize, steps)
	ranks[straggler].ComputeDuration = func(it int) time.Duration {
		if slow[it] {
			return 2 * lensemu.DefaultComputeDuration
		}
		return lensemu.DefaultComputeDuration
	}
	if ranks[straggler].Endpoint == ranks[worldSize-1].Endpoint {
		t.Fatal("the straggler and the export rank must reach the gateway through different agents")
	}
	sent := runJobByRank(t, ranks)
	stopTier(agents, gws) // the gateways decide every open step at shutdown

	outputs := readGateways(t, gws)
	at := holders(outputs, "run-straggler")
	if len(at) != 1 {
		t.Fatalf("run found on gateways %v, want exactly one", at)
	}
	for i, o := range outputs {
		if i != at[0] && o.Result != (lensemu.Result{}) {
			t.Errorf("gateway %d holds %s, want nothing", i, describe(o.Result))
		}
	}
	got := outputs[at[0]]
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
	busy := lensemu.DefaultComputeDuration + lensemu.OptimizerTime
	wantScore := fmt.Sprintf("%.3f", float64(busy)/float64(busy+lensemu.DefaultComputeDuration))
	for iteration, n := range keptSubtrees(t, got.SpanRecords, straggler, "megatron.train_step", wantScore) {
		if !slow[iteration] || n != lensemu.SpansPerStep(2) {
			t.Errorf("rank %d: kept %d spans of iteration %d's subtree, want %d of iterations 2 and 4 only", straggler, n, iteration, lensemu.SpansPerStep(2))
		}
		delete(slow, iteration)
	}
	if len(slow) != 0 {
		t.Errorf("rank %d: no subtree kept for iterations %v", straggler, slow)
	}
}

// TestScaleOutAgentDropsRanksBeforeTheNetwork: with the default strategy
// (single_rank, the last rank) on the agents and on the gateway, the ranks
// the agents drop never reach the gateway: it receives rank 15's spans and
// the one error span the agents kept from rank 3, and applying the strategy
// again there keeps exactly that (with rank 3's ERROR log record).
func TestScaleOutAgentDropsRanksBeforeTheNetwork(t *testing.T) {
	gws := startGateways(t, 1, func(env map[string]string) { delete(env, "NEMO_RANK_STRATEGY") })
	agents := startAgents(t, 2, gws, func(env map[string]string) { delete(env, "NEMO_RANK_STRATEGY") })
	ranks := nodeJob(agents, "run-single", 16, 3)
	ranks[3].ErrorAtIteration = 2
	sent := runJobByRank(t, ranks)
	stopTier(agents, gws[:0])
	received := acceptedSpans(t, gws[0].Collector)
	gws[0].Stop()
	if int64(received) != sent[15].Spans+1 {
		t.Errorf("the gateway received %v spans, want rank 15's %d and rank 3's error span", received, sent[15].Spans)
	}
	got := readTelemetry(t, gws[0].dir())
	if got.ByRank[15] != sent[15] {
		t.Errorf("rank 15: acknowledged %s, found %s", describe(sent[15]), describe(got.ByRank[15]))
	}
	if want := (lensemu.Result{Spans: 1, LogRecords: 1}); got.ByRank[3] != want || len(got.ErrorSpans) != 1 || got.Severities["3/ERROR"] != 1 {
		t.Errorf("rank 3: found %s, error spans %v, log severities %v; want its error span and its ERROR log record only",
			describe(got.ByRank[3]), got.ErrorSpans, got.Severities)
	}
	if len(got.ByRank) != 2 {
		t.Errorf("ranks in the output: %v, want 3 and 15 only", slices.Collect(maps.Keys(got.ByRank)))
	}
}

// TestScaleOutDNSResolver: the agent with deploy/kubernetes/config/agent-dns.yaml
// merged after configs/agent.yaml finds its gateway through the dns resolver
// (here GATEWAY_DNS_NAME=127.0.0.1, which resolves to itself, with the
// gateway's port as GATEWAY_OTLP_PORT) instead of GATEWAY_ENDPOINTS, which
// is left unset, and everything arrives.
func TestScaleOutDNSResolver(t *testing.T) {
	gws := startGateways(t, 1, nil)
	overlay := testcollector.RepoRoot(t) + "/deploy/kubernetes/config/agent-dns.yaml"
	agents := startAgents(t, 1, gws, func(env map[string]string) {
		delete(env, "GATEWAY_ENDPOINTS")
		env["GATEWAY_DNS_NAME"] = "127.0.0.1"
		env["GATEWAY_OTLP_PORT"] = strconv.Itoa(gws[0].grpcPort)
	}, "--config="+overlay)
	sent := runJob(t, nodeJob(agents, "run-dns", 8, 3))
	backends, found, err := agents[0].Metric("otelcol_loadbalancer_num_backends", "resolver=dns")
	if err != nil || !found || backends != 1 {
		t.Errorf("otelcol_loadbalancer_num_backends{resolver=dns} = %v (found %v, %v), want 1", backends, found, err)
	}
	stopTier(agents, gws)
	if got := readTelemetry(t, gws[0].dir()); got.ByRun["run-dns"] != sent {
		t.Errorf("acknowledged %s, the gateway holds %s", describe(sent), describe(got.ByRun["run-dns"]))
	}
}

// TestScaleOutGatewayWithPresetExporter: a gateway that delivers with a
// destination preset's exporter, as configs/gateway.yaml documents: the
// preset first, gateway.yaml second, the pipelines' exporters named by
// NEMO_GATEWAY_*_EXPORTERS. Here configs/otlp.yaml's otlp_http/protobuf, to a
// fake OTLP backend: every item the ranks had acknowledged arrives, and
// nothing is written to the JSONL directory.
func TestScaleOutGatewayWithPresetExporter(t *testing.T) {
	sink, err := otlpsink.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	sink.SetRespond(func(otlpsink.Request) (int, http.Header, []byte) { return 0, nil, nil })
	env := otlpBackendEnv(t, sink.URL)
	env["OTLP_BACKEND_METRICS"], env["OTLP_BACKEND_LOGS"] = "true", "true"
	for _, signal := range []string{"TRACES", "METRICS", "LOGS"} {
		env["NEMO_GATEWAY_"+signal+"_EXPORTERS"] = "[otlp_http/protobuf]"
	}
	gw := testcollector.Start(t, testcollector.Config(t, "otlp.yaml"), testcollector.Options{
		Env:  env,
		Args: []string{"--config=" + testcollector.Config(t, "gateway.yaml")},
	})
	port, _ := strconv.Atoi(gw.Env["OTLP_GRPC_PORT"])
	gws := []*gateway{{Collector: gw, grpcPort: port, env: env}}
	agents := startAgents(t, 2, gws, nil)
	sent := runJob(t, nodeJob(agents, "run-preset", 16, 3))
	waitFor(t, deliveryTimeout, "every item at the OTLP backend", func() bool { return sinkResult(sink) == sent })
	stopTier(agents, gws)
	if got := readTelemetry(t, env["NEMO_TELEMETRY_DIR"]); got.Result != (lensemu.Result{}) {
		t.Errorf("the gateway also wrote %s to JSONL files", describe(got.Result))
	}
}

// The benchmarks below measure the two tiers on this machine with
// bench/loadgen (built on first use). They take minutes and are not run by
// go test without -bench:
//
//	go test ./e2e -run '^$' -bench 'ScaleOut|AgentHop' -benchtime 1x -timeout 30m
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
	perGateway                  []float64
	refusedAtFirst, lostBetween float64
	queueFullLogs               int // agents' "Sender failed" lines naming a full sending queue
}

const (
	scaleLoadgens = 8
	scaleRanks    = 8 // per load generator
	scalePhase    = 10 * time.Second
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
	loadgen := buildLoadgenBinary(b)
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
				b.ReportMetric(r.gatewayCPU/perM, "gateway_cpu_s/Mspans")
				b.ReportMetric(r.refusedAtFirst, "refused_spans")
				b.ReportMetric(r.lostBetween, "lost_between_tiers_spans")
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
	cpuOf := func(cs []*testcollector.Collector) float64 {
		var sum float64
		for _, c := range cs {
			cpu, err := procstat.CPU(c.Pid())
			if err != nil {
				b.Fatal(err)
			}
			sum += cpu.Seconds()
		}
		return sum
	}
	gwCollectors := make([]*testcollector.Collector, len(gws))
	for i, g := range gws {
		gwCollectors[i] = g.Collector
	}
	agentCPU0, gatewayCPU0 := cpuOf(agents), cpuOf(gwCollectors)

	start := time.Now()
	errs := make(chan error, len(targets))
	for i, target := range targets {
		runID := fmt.Sprintf("bench-run-%d", i%sc.runs)
		args := []string{"-endpoint", target, "-duration", scalePhase.String(), "-ranks", strconv.Itoa(scaleRanks),
			"-run-id", runID, "-rate", strconv.Itoa(sc.rate), "-seed", strconv.Itoa(i + 1), "-conns", "1", "-workers", "2"}
		go func() { errs <- runLoadgenProcess(loadgen, args) }()
	}
	for range targets {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
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
		agentCPU:       cpuOf(agents) - agentCPU0,
		gatewayCPU:     cpuOf(gwCollectors) - gatewayCPU0,
		refusedAtFirst: refused,
	}
	if sc.agents > 0 {
		r.lostBetween = offered - last
	}
	for _, g := range gws {
		r.perGateway = append(r.perGateway, acceptedSpans(b, g.Collector))
	}
	for _, a := range agents {
		for _, line := range strings.Split(a.Logs(), "\n") {
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
// minus end time. Directly to the gateway, then through one agent.
func BenchmarkAgentHopLatency(b *testing.B) {
	loadgen := buildLoadgenBinary(b)
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
		env["NEMO_GATEWAY_"+signal+"_EXPORTERS"] = "[otlp_http/protobuf]"
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
	args := []string{"-endpoint", target, "-duration", scalePhase.String(), "-ranks", "8", "-rate", strconv.Itoa(rate),
		"-microbatches", "4", "-batch", "20", "-step-duration", "1ms"}
	if err := runLoadgenProcess(loadgen, args); err != nil {
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

// buildLoadgenBinary compiles bench/loadgen into a temporary directory.
func buildLoadgenBinary(b *testing.B) string {
	b.Helper()
	bin := b.TempDir() + "/loadgen"
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./bench/loadgen")
	cmd.Dir = testcollector.RepoRoot(b)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("build bench/loadgen: %v\n%s", err, out)
	}
	return bin
}

// runLoadgenProcess runs the load generator to its end (it stops by itself;
// the timeout guards against a hang).
func runLoadgenProcess(bin string, args []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), scalePhase+2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("loadgen %v: %w\n%s", args, err, out)
	}
	return nil
}

// TestGatewayTailSamplingOverlayValidates: configs/overlays/gateway-tail-sampling.yaml
// merges onto configs/gateway.yaml into a config the collector
// accepts, with tail_sampling in the traces pipeline.
func TestGatewayTailSamplingOverlayValidates(t *testing.T) {
	overlay := filepath.Join(testcollector.RepoRoot(t), "configs", "overlays", "gateway-tail-sampling.yaml")
	args := []string{"--config=" + testcollector.Config(t, "gateway.yaml"), "--config=" + overlay}
	if out, err := testcollector.Run(t, tierEnv(t), append([]string{"validate"}, args...)...); err != nil {
		t.Fatalf("validate gateway.yaml + the tail_sampling overlay: %v\n%s", err, out)
	}
	out, err := testcollector.Run(t, tierEnv(t), append([]string{"print-config"}, args...)...)
	if err != nil {
		t.Fatalf("print-config: %v\n%s", err, out)
	}
	var merged struct {
		Service struct {
			Pipelines map[string]struct {
				Processors []string `yaml:"processors"`
			} `yaml:"pipelines"`
		} `yaml:"service"`
	}
	if err := yaml.Unmarshal([]byte(out), &merged); err != nil {
		t.Fatalf("print-config output: %v\n%s", err, out)
	}
	want := []string{"rank_strategy", "step_sampling", "tail_sampling"}
	if got := merged.Service.Pipelines["traces"].Processors; !slices.Equal(got, want) {
		t.Errorf("merged traces pipeline processors %v, want %v", got, want)
	}
	if got := merged.Service.Pipelines["metrics"].Processors; slices.Contains(got, "tail_sampling") {
		t.Errorf("the overlay changed the metrics pipeline: %v", got)
	}
}
