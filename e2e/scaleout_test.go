// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"maps"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.yaml.in/yaml/v3"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/otlpsink"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
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
func startGateway(tb testing.TB, env map[string]string, grpcPort int) *gateway {
	tb.Helper()
	env = maps.Clone(env)
	if grpcPort != 0 {
		env["OTLP_GRPC_PORT"] = strconv.Itoa(grpcPort)
	}
	c := testcollector.Start(tb, testcollector.Config(tb, "gateway.yaml"), testcollector.Options{Env: env})
	port, err := strconv.Atoi(c.Env["OTLP_GRPC_PORT"])
	if err != nil {
		tb.Fatalf("gateway port: %v", err)
	}
	return &gateway{Collector: c, grpcPort: port, env: env}
}

// startGateways starts n gateways, each with tierEnv's values (its own
// output directory) changed by adjust, when not nil.
func startGateways(tb testing.TB, n int, adjust func(env map[string]string)) []*gateway {
	tb.Helper()
	gws := make([]*gateway, n)
	for i := range gws {
		env := tierEnv(tb)
		if adjust != nil {
			adjust(env)
		}
		gws[i] = startGateway(tb, env, 0)
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
func startAgents(tb testing.TB, n int, gws []*gateway, adjust func(env map[string]string), args ...string) []*testcollector.Collector {
	tb.Helper()
	agents := make([]*testcollector.Collector, n)
	for i := range agents {
		env := tierEnv(tb)
		env["GATEWAY_ENDPOINTS"] = gatewayList(gws)
		if adjust != nil {
			adjust(env)
		}
		agents[i] = testcollector.Start(tb, testcollector.Config(tb, "agent.yaml"), testcollector.Options{Env: env, Args: args})
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
	for i := range ranks {
		out[ranks[i].RunID] = out[ranks[i].RunID].Add(results[i])
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
	for i := range outputs {
		if outputs[i].ByRun[run] != (lensemu.Result{}) {
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
func acceptedSpans(tb testing.TB, c *testcollector.Collector) float64 {
	tb.Helper()
	v, _, err := c.Metric("otelcol_receiver_accepted_spans")
	if err != nil {
		tb.Fatalf("scrape: %v", err)
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
	checkStragglerKept(t, outputs[at[0]], sent, straggler, "megatron.train_step", slow)
}

// TestScaleOutAgentDropsRanksBeforeTheNetwork: with the default strategy
// (single_rank, the last rank) on the agents and on the gateway, the spans
// of the ranks the agents drop never reach the gateway: it receives rank
// 15's spans, the one error span the agents kept from rank 3 and the
// summaries of the dropped ranks (a small fraction of their spans), and
// writes exactly rank 15's and rank 3's error span (with rank 3's ERROR
// log record); no summary is written.
func TestScaleOutAgentDropsRanksBeforeTheNetwork(t *testing.T) {
	gws := startGateways(t, 1, func(env map[string]string) { delete(env, "NEMO_RANK_STRATEGY") })
	agents := startAgents(t, 2, gws, func(env map[string]string) { delete(env, "NEMO_RANK_STRATEGY") })
	ranks := nodeJob(agents, "run-single", 16, 3)
	ranks[3].ErrorAtIteration = 2
	sent := runJobByRank(t, ranks)
	stopTier(agents, gws[:0])
	received := acceptedSpans(t, gws[0].Collector)
	gws[0].Stop()
	var dropped int64
	for rank := range 15 {
		dropped += sent[rank].Spans
	}
	if summaries := int64(received) - sent[15].Spans - 1; summaries <= 0 || summaries > dropped/5 {
		t.Errorf("the gateway received %v spans: rank 15's %d, rank 3's error span and %d more, want the summaries of the %d dropped ranks' %d spans (more than none, at most a fifth)",
			received, sent[15].Spans, summaries, 15, dropped)
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
// NEMO_GATEWAY_*_EXPORTERS. Here configs/otlp.yaml's nemo_otlp (http/protobuf), to a
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
		env["NEMO_GATEWAY_"+signal+"_EXPORTERS"] = "[nemo_otlp]"
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
	want := []string{"memory_limiter", "nemo_steps", "rank_strategy", "step_sampling", "tail_sampling"}
	if got := merged.Service.Pipelines["traces"].Processors; !slices.Equal(got, want) {
		t.Errorf("merged traces pipeline processors %v, want %v", got, want)
	}
	if got := merged.Service.Pipelines["metrics"].Processors; slices.Contains(got, "tail_sampling") {
		t.Errorf("the overlay changed the metrics pipeline: %v", got)
	}
}
