// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// The multi-node cluster: a service host (slurmctld and the gateway) and 4
// compute nodes of 4 ranks each, every host a network namespace of its own
// with its own host name (e2e/netns_test.go).
var (
	serviceHost = "svc"
	computeHost = []string{"node1", "node2", "node3", "node4"}
)

const (
	nodesRanksPerNode = 4
	nodesWorld        = 4 * nodesRanksPerNode
	// The slow rank (on node2) computes nodesSlowFactor times longer on nodesSlowIteration.
	nodesSlowRank, nodesSlowIteration, nodesSlowFactor = 6, 4, "3"
	// nodesStepCompute is a rank's compute per step in real time: a step lasts
	// about nodesStepCompute + 30ms.
	nodesStepCompute = 200 * time.Millisecond
	// lostNodeIndex is the node LostNode kills: node3, ranks 8-11.
	lostNodeIndex = 2
)

// TestSlurmMultiNode runs 4-node SLURM jobs (16 emulated ranks, lensrank,
// synchronous: every step ends with a barrier all ranks wait in, across
// nodes) through per-node agents and one gateway, with the committed SLURM
// files, both ways: the per-job template (one agent per node as a job step)
// and always-on agents (otelcol-nemo@agent per node, from
// deploy/slurm/systemd). Then a lost gateway, and a lost node.
func TestSlurmMultiNode(t *testing.T) {
	requireSlurm(t)
	requireNetns(t)
	lensrank := buildLensrank(t)
	began := time.Now()
	l := newLAN(t, append([]string{serviceHost}, computeHost...)...)
	cluster := startSlurmNodes(t, l)
	t.Logf("cluster of %d namespaces up in %s", len(l.hosts), time.Since(began).Round(100*time.Millisecond))
	work := t.TempDir() // the cluster's shared filesystem
	if err := os.Chmod(work, 0o755); err != nil {
		t.Fatal(err)
	}
	logOnFailure(t, func() string { return filesUnder(work, ".out", "collector.log", "agent.log") })

	submit := func(t *testing.T, gw *nsGateway, name, collector string, rankArgs ...string) string {
		t.Helper()
		// --no-requeue: a job whose node fails ends (NODE_FAIL) instead of
		// running again, as SLURM's default JobRequeue=1 would have it.
		args := []string{
			"--parsable", "--nodes=4", "--ntasks=16", "--ntasks-per-node=4", "--chdir=" + work,
			"--job-name=" + name, "--output=%x-%j.out", "--no-requeue",
			filepath.Join(testcollector.RepoRoot(t), "deploy", "slurm", "nemo-telemetry.sbatch"),
			lensrank, "-out", filepath.Join(work, "ranks"), "-barrier", filepath.Join(work, "barrier"), "-compute", nodesStepCompute.String(),
		}
		env := map[string]string{
			"NEMO_SLURM_DIR":        filepath.Join(testcollector.RepoRoot(t), "deploy", "slurm"),
			"OTELCOL_NEMO_BIN":      testcollector.Binary(t),
			"NEMO_COLLECTOR_CONFIG": testcollector.Config(t, "agent.yaml"),
			"NEMO_TELEMETRY_DIR":    filepath.Join(work, "telemetry"),
			"NEMO_COLLECTOR":        collector,
			// What deploy/slurm/systemd/agent.env sets; the per-job agents
			// read it from the job's environment.
			"NEMO_RANK_STRATEGY": "all_ranks",
			"GATEWAY_ENDPOINTS":  "[" + gw.otlpEndpoint() + "]",
		}
		return cluster.sbatch(t, env, append(args, rankArgs...)...)
	}
	finished := func(t *testing.T, jobID string) map[int]lensrankReport {
		t.Helper()
		cluster.waitGone(t, jobID, 2*time.Minute)
		if job := cluster.jobs(t, jobID)[0]; job["JobState"] != "COMPLETED" || job["ExitCode"] != "0:0" {
			t.Fatalf("job %s: state %s, exit code %s", jobID, job["JobState"], job["ExitCode"])
		}
		reports := readRankReports(t, filepath.Join(work, "ranks", jobID, "0"), nodesWorld)
		checkRankReports(t, reports, true)
		return reports
	}

	t.Run("PerJobAgentsTwoJobsAtOnce", func(t *testing.T) {
		// The gateway keeps one rank (the default, single_rank) and the
		// stragglers: the slow rank's step is decided there, across nodes.
		gw := startNSGateway(t, l, filepath.Join(work, "gateway-perjob"), "single_rank")
		slow := []string{"-steps", "8", "-slow-rank", strconv.Itoa(nodesSlowRank), "-slow-iteration", strconv.Itoa(nodesSlowIteration), "-slow-factor", nodesSlowFactor}
		jobA := submit(t, gw, "nemo-nodes-a", "job", slow...)
		jobB := submit(t, gw, "nemo-nodes-b", "job", "-steps", "6")
		for _, job := range []string{jobA, jobB} {
			reports := finished(t, job)
			for _, n := range computeHost {
				checkCollectorExitedCleanly(t, filepath.Join(work, "telemetry", job, n, "collector.log"))
			}
			// The export rank whole; of the others, only job A's slow step.
			var straggler map[int64]lensemu.Result
			if job == jobA {
				straggler = map[int64]lensemu.Result{nodesSlowRank: {Spans: int64(lensemu.SpansPerStep(2))}}
			}
			got := waitGatewayRun(t, gw, job, reports, []int{nodesWorld - 1}, straggler)
			checkStepMetrics(t, got, job, nodesWorld)
			checkHosts(t, got, job)
			// Each job's agents listened on the job's own ports: the other
			// job's ranks never reached them.
			for _, n := range computeHost {
				if log := readFile(t, filepath.Join(work, "telemetry", job, n, "collector.log")); strings.Contains(log, "refused") {
					t.Errorf("%s's agent on %s refused something:\n%s", job, n, log)
				}
			}
		}
		checkStraggler(t, readTelemetry(t, filepath.Join(gw.dir, jobA)).SpanRecords)
	})

	t.Run("AlwaysOnAgentsGatewayKilled", func(t *testing.T) {
		// The agents answer a rank once its data is in their spool on the
		// node's disk: while the gateway is down no rank's export fails
		// (lensrank, which does not retry, would count it and exit 1), the
		// job completes, and what was acknowledged arrives once the
		// gateway is back.
		gw := startNSGateway(t, l, filepath.Join(work, "gateway-alwayson"), "all_ranks")
		for _, n := range computeHost {
			startSystemdAgent(t, l, n, gw, filepath.Join(work, "agents"))
		}
		job := submit(t, gw, "nemo-nodes-svc", "service", "-steps", "40")
		barrier := filepath.Join(work, "barrier", job, "0")
		waitFor(t, time.Minute, "iteration 10 of job "+job, func() bool { return barrierPassed(barrier, 10) })
		gw.proc.Kill()
		killed := time.Now()
		time.Sleep(minOutage)
		gw.start(t)
		restarted := time.Now()
		cluster.waitGone(t, job, 2*time.Minute)
		reports := readRankReports(t, filepath.Join(work, "ranks", job, "0"), nodesWorld)
		refused := 0
		for rank, rep := range reports {
			if !rep.Done || rep.Acknowledged.Spans == 0 {
				t.Errorf("rank %d: %+v, want one that trained to its end with acknowledged spans", rank, rep)
			}
			for _, e := range rep.Errors {
				t.Errorf("rank %d: export error %q while the gateway was down: the agent must answer from its spool", rank, e)
			}
			refused += len(rep.Errors)
		}
		if state := cluster.jobs(t, job)[0]; state["JobState"] != "COMPLETED" || state["ExitCode"] != "0:0" {
			t.Errorf("job %s: state %s, exit code %s, want COMPLETED 0:0", job, state["JobState"], state["ExitCode"])
		}
		got := waitGatewayCovers(t, gw, job, reports)
		delivered := time.Since(restarted)
		checkStepMetrics(t, got, job, nodesWorld)
		checkHosts(t, got, job)
		t.Logf("gateway killed at iteration 10, down %s; %d exports refused meanwhile; every acknowledged item delivered %s after its restart",
			restarted.Sub(killed).Round(100*time.Millisecond), refused, delivered.Round(100*time.Millisecond))
	})

	t.Run("LostNode", func(t *testing.T) {
		// Last: the node stays lost.
		gw := startNSGateway(t, l, filepath.Join(work, "gateway-lost"), "all_ranks")
		lost := computeHost[lostNodeIndex] // ranks 8-11
		job := submit(t, gw, "nemo-nodes-lost", "job", "-steps", "100000")
		barrier := filepath.Join(work, "barrier", job, "0")
		waitFor(t, time.Minute, "iteration 5 of job "+job, func() bool { return barrierPassed(barrier, 5) })
		killed := l.kill(t, lost) // its slurmd, its agent, its ranks: mid-compute of iteration 6
		hung := time.Now()
		stall := waitStall(t, gw, job, 30*time.Second)
		t.Logf("node %s lost (%d processes killed); stall reported %s later: %s", lost, len(killed), time.Since(hung).Round(100*time.Millisecond), stall.str("body"))
		attrs := stall.attributes()
		if got := ints(t, attrs["nemo.stall.culprit_ranks"]); !slices.Equal(got, []int64{8, 9, 10, 11}) {
			t.Errorf("culprit ranks %v, want node3's 8-11", got)
		}
		if got := strs(attrs["nemo.stall.culprit_hosts"]); !slices.Equal(got, []string{lost}) {
			t.Errorf("culprit hosts %v, want [%s]", got, lost)
		}
		if attrs["nemo.stall.kind"] != "behind" {
			t.Errorf("kind %v, want behind", attrs["nemo.stall.kind"])
		}

		// SLURM finds the node gone (here at once, instead of after
		// SlurmdTimeout) and ends the job: the other nodes' ranks, blocked in
		// the all-reduce, and their agents get SIGTERM together. A rank's
		// last flush may then find its node's agent gone (an export error):
		// what was refused was not acknowledged, and everything acknowledged
		// must be at the gateway.
		if out, err := cluster.command("scontrol", "update", "NodeName="+lost, "State=DOWN", "Reason=lost in test"); err != nil {
			t.Fatalf("scontrol: %v\n%s", err, out)
		}
		cluster.waitGone(t, job, 2*time.Minute)
		if state := cluster.jobs(t, job)[0]["JobState"]; state != "NODE_FAIL" {
			t.Errorf("job %s: state %s after its node was lost, want NODE_FAIL", job, state)
		}
		reports := peekRankReports(filepath.Join(work, "ranks", job, "0"))
		var alive []int
		exportErrors := 0
		for rank := range nodesWorld {
			if rank/nodesRanksPerNode == lostNodeIndex {
				continue // killed with its node: it wrote no last report
			}
			rep, ok := reports[rank]
			if !ok || rep.Done || rep.Acknowledged.Spans == 0 {
				t.Errorf("rank %d: report %+v (found %v), want one stopped mid-run after acknowledged spans", rank, rep, ok)
			}
			exportErrors += len(rep.Errors)
			alive = append(alive, rank)
		}
		for _, n := range computeHost {
			if n != lost {
				checkCollectorExitedCleanly(t, filepath.Join(work, "telemetry", job, n, "collector.log"))
			}
		}
		got := waitGatewayRun(t, gw, job, reports, alive, nil)
		checkMissingRanks(t, gw, got)
		t.Logf("the 12 live ranks' acknowledged items all at the gateway; %d last flushes refused by an agent already gone", exportErrors)
	})
}

// checkStraggler checks the slow rank's spans at the gateway: its step of
// nodesSlowIteration whole, marked as a straggler with its scores (busy 615ms
// against the others' 215ms: 0.35), nothing else of it.
func checkStraggler(t *testing.T, spans []record) {
	t.Helper()
	var iterations []int64
	for _, s := range spans {
		if s.rank() != nodesSlowRank {
			continue
		}
		attrs := s.attributes()
		rel, _ := attrs["nemo.rank_strategy.relative_score"].(json.Number).Float64()
		if attrs["nemo.rank_strategy.kept_reason"] != "straggler" || rel <= 0 || rel >= 0.7 || attrs["nemo.rank_strategy.individual_score"] == nil {
			t.Errorf("rank %d span %s: kept_reason %v, scores %v / %v; want straggler, relative < 0.7",
				nodesSlowRank, s.str("name"), attrs["nemo.rank_strategy.kept_reason"], attrs["nemo.rank_strategy.relative_score"], attrs["nemo.rank_strategy.individual_score"])
		}
		if s.str("name") == "megatron.train_step" {
			it, _ := attrs["megatron.iteration"].(json.Number).Int64()
			iterations = append(iterations, it)
		}
	}
	if !slices.Equal(iterations, []int64{nodesSlowIteration}) {
		t.Errorf("straggler steps of rank %d at the gateway: %v, want [%d]", nodesSlowRank, iterations, nodesSlowIteration)
	}
}

// barrierPassed reports whether every rank has reached iteration's barrier
// (lensrank -barrier): they then compute the next iteration.
func barrierPassed(dir string, iteration int) bool {
	entries, err := os.ReadDir(filepath.Join(dir, strconv.Itoa(iteration)))
	return err == nil && len(entries) == nodesWorld
}

// checkRankReports checks each rank's report: its identity as SLURM gave
// it (4 ranks per node, block distribution), and done when done.
func checkRankReports(t *testing.T, reports map[int]lensrankReport, done bool) {
	t.Helper()
	for rank, rep := range reports {
		if rep.Done != done || len(rep.Errors) > 0 || rep.WorldSize != nodesWorld || rep.LocalRank != rank%nodesRanksPerNode {
			t.Errorf("rank %d: %+v", rank, rep)
		}
	}
}

// nsGateway is configs/gateway.yaml on the service host, on its private
// address: per-run JSONL files under dir.
type nsGateway struct {
	l    *lan
	dir  string
	env  map[string]string
	proc *testcollector.Process
}

func startNSGateway(t *testing.T, l *lan, dir, strategy string) *nsGateway {
	t.Helper()
	g := &nsGateway{l: l, dir: dir, env: map[string]string{
		"OTELCOL_LISTEN_HOST": l.addr[serviceHost], "OTLP_GRPC_PORT": "4317", "OTLP_HTTP_PORT": "4318",
		"HEALTH_CHECK_PORT": "13133", "OTELCOL_METRICS_PORT": "8888",
		"NEMO_TELEMETRY_DIR": dir, "NEMO_QUEUE_DIR": filepath.Join(dir, ".queue"),
		"NEMO_RANK_STRATEGY": strategy,
		// Steps of ~230ms: a stall after 3s, steps decided 2s after their
		// first step span.
		"NEMO_STALL_AFTER": "3s", "NEMO_STRAGGLER_WAIT": "2s",
	}}
	if err := os.MkdirAll(g.env["NEMO_QUEUE_DIR"], 0o755); err != nil {
		t.Fatal(err)
	}
	g.start(t)
	t.Cleanup(func() {
		if !g.proc.Terminate(testcollector.StopTimeout) {
			t.Errorf("gateway did not stop on SIGTERM:\n%s", g.proc.Logs())
		}
		if t.Failed() {
			t.Logf("gateway log:\n%s", tail(g.proc.Logs(), 4000))
		}
	})
	return g
}

func (g *nsGateway) start(t *testing.T) {
	t.Helper()
	g.proc = testcollector.StartProcess(t, "gateway", "nsenter",
		g.l.argv(serviceHost, testcollector.Binary(t), "--config="+testcollector.Config(t, "gateway.yaml")), g.env)
	waitFor(t, testcollector.StartTimeout, "the gateway's health check", func() bool {
		select {
		case <-g.proc.Done():
			t.Fatalf("gateway exited: %v\n%s", g.proc.Err(), g.proc.Logs())
		default:
		}
		_, err := g.l.httpGet(serviceHost, g.l.addr[serviceHost]+":13133", "/")
		return err == nil
	})
}

func (g *nsGateway) otlpEndpoint() string { return g.l.addr[serviceHost] + ":4317" }

// metric sums the gateway's own Prometheus metric name (every series).
func (g *nsGateway) metric(t *testing.T, name string) float64 {
	t.Helper()
	body, err := g.l.httpGet(serviceHost, g.l.addr[serviceHost]+":8888", "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for line := range strings.SplitSeq(body, "\n") {
		if strings.HasPrefix(line, name+" ") || strings.HasPrefix(line, name+"{") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
}

// startSystemdAgent starts otelcol-nemo@agent on host as systemd would:
// deploy/slurm/systemd's ExecStart, with /opt/otelcol-nemo as this
// repository, and the environment of agent.env, where the site sets its
// gateway's address.
func startSystemdAgent(t *testing.T, l *lan, host string, gw *nsGateway, logDir string) {
	t.Helper()
	systemd := filepath.Join(testcollector.RepoRoot(t), "deploy", "slurm", "systemd")
	unit := readFile(t, filepath.Join(systemd, "otelcol-nemo@.service"))
	var execStart []string
	for line := range strings.SplitSeq(unit, "\n") {
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			v = strings.ReplaceAll(v, "%i", "agent")
			v = strings.ReplaceAll(v, "/opt/otelcol-nemo/bin/otelcol-nemo", testcollector.Binary(t))
			v = strings.ReplaceAll(v, "/opt/otelcol-nemo/configs/", filepath.Join(testcollector.RepoRoot(t), "configs")+"/")
			execStart = strings.Fields(v)
		}
	}
	if len(execStart) == 0 {
		t.Fatal("otelcol-nemo@.service has no ExecStart")
	}
	env := map[string]string{}
	for line := range strings.SplitSeq(readFile(t, filepath.Join(systemd, "agent.env")), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(line, "#") {
			env[k] = v
		}
	}
	if env["OTELCOL_LISTEN_HOST"] != "127.0.0.1" || env["NEMO_RANK_STRATEGY"] != "all_ranks" {
		t.Fatalf("agent.env: %v", env)
	}
	env["GATEWAY_ENDPOINTS"] = "[" + gw.otlpEndpoint() + "]"
	// The unit's state directory, /var/lib/otelcol-nemo, is the agent's
	// working directory, and its spool is queue/agent there (the unit's
	// NEMO_QUEUE_DIR), one per node.
	stateDir := filepath.Join(logDir, host)
	if !strings.Contains(unit, "Environment=NEMO_QUEUE_DIR=/var/lib/otelcol-nemo/queue/%i") {
		t.Fatal("otelcol-nemo@.service does not give each instance a queue directory of its own")
	}
	env["NEMO_QUEUE_DIR"] = filepath.Join(stateDir, "queue", "agent")
	if err := os.MkdirAll(stateDir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := testcollector.StartProcess(t, "agent-"+host, "nsenter", l.argv(host, execStart[0], execStart[1:]...), env)
	waitFor(t, testcollector.StartTimeout, "the agent on "+host, func() bool {
		select {
		case <-p.Done():
			t.Fatalf("agent on %s exited: %v\n%s", host, p.Err(), p.Logs())
		default:
		}
		_, err := l.httpGet(host, "127.0.0.1:13133", "/")
		return err == nil
	})
	t.Cleanup(func() {
		if !p.Terminate(testcollector.StopTimeout) {
			t.Errorf("agent on %s did not stop on SIGTERM:\n%s", host, p.Logs())
		}
		_ = os.WriteFile(filepath.Join(stateDir, "agent.log"), []byte(p.Logs()), 0o644) //nolint:gosec // G306: test output
	})
}

// waitGatewayRun waits until the gateway's files of run hold, for each of
// the ranks, exactly what the rank's report says the collector
// acknowledged, counted as distinct lines (after a gateway restart, what it
// had written but not answered is sent again: at-least-once), and no item
// of a rank not listed but what extra holds; it returns what the files hold.
func waitGatewayRun(t *testing.T, gw *nsGateway, run string, reports map[int]lensrankReport, ranks []int, extra map[int64]lensemu.Result) telemetry {
	t.Helper()
	want := maps.Clone(extra)
	if want == nil {
		want = map[int64]lensemu.Result{}
	}
	for _, rank := range ranks {
		want[int64(rank)] = reports[rank].Acknowledged
	}
	var got map[int64]lensemu.Result
	deadline := time.Now().Add(redeliveryTimeout)
	for {
		got = countLines(t, gw.dir).byRank[run]
		// A rank killed with its node wrote no report of what it had
		// acknowledged: it may have anything up to what a live rank has.
		for _, r := range lostRanks(got, want) {
			if !want[int64(ranks[0])].Covers(got[r]) {
				t.Fatalf("run %s: lost rank %d has %s at the gateway, more than live rank %d's %s", run, r, describe(got[r]), ranks[0], describe(want[int64(ranks[0])]))
			}
			want[r] = got[r]
		}
		if maps.Equal(got, want) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s at the gateway, by rank: got %v, want (acknowledged) %v", run, got, want)
		}
		time.Sleep(500 * time.Millisecond)
	}
	entries, err := os.ReadDir(gw.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		// Every run is a job: its id is the job's (the queue is .queue).
		if _, err := strconv.Atoi(e.Name()); e.IsDir() && e.Name() != ".queue" && err != nil {
			t.Errorf("gateway directory %s: a run %q that no job is", gw.dir, e.Name())
		}
	}
	return readTelemetry(t, filepath.Join(gw.dir, run))
}

// waitGatewayCovers waits until the gateway has, for every rank of run, at
// least what the rank's report says was acknowledged (more may arrive: what
// a rank gave up waiting for may still have reached the gateway), and
// returns the run's telemetry there.
func waitGatewayCovers(t *testing.T, gw *nsGateway, run string, reports map[int]lensrankReport) telemetry {
	t.Helper()
	waitFor(t, redeliveryTimeout, "every acknowledged item of run "+run+" at the gateway", func() bool {
		got := countLines(t, gw.dir).byRank[run]
		for rank, rep := range reports {
			if !got[int64(rank)].Covers(rep.Acknowledged) {
				return false
			}
		}
		return true
	})
	return readTelemetry(t, filepath.Join(gw.dir, run))
}

// lostRanks are the ranks of got that want does not list and that ran on
// the node LostNode kills: they are not compared, all others are.
func lostRanks(got, want map[int64]lensemu.Result) []int64 {
	var lost []int64
	for r := range got {
		if _, listed := want[r]; !listed && r/nodesRanksPerNode == lostNodeIndex {
			lost = append(lost, r)
		}
	}
	return lost
}

// checkStepMetrics checks the gateway's step metrics of run: every rank of
// the world has its step durations, compared at the gateway across nodes,
// with its node's host name.
func checkStepMetrics(t *testing.T, got telemetry, run string, world int) {
	t.Helper()
	ranks := map[int64]bool{}
	for _, p := range got.StepPoints {
		if p.str("name") != "nemo.step.duration" || p.resource()["nemo.run.id"] != run {
			continue
		}
		attrs := p.attributes()
		rank, err := attrs["nv.dl.rank"].(json.Number).Int64()
		if err != nil {
			t.Fatalf("step point without a rank: %v", p)
		}
		if host := attrs["host.name"]; host != computeHost[rank/nodesRanksPerNode] {
			t.Errorf("run %s rank %d: step point host %v, want %s", run, rank, host, computeHost[rank/nodesRanksPerNode])
		}
		ranks[rank] = true
	}
	if len(ranks) != world {
		t.Errorf("run %s: step durations of %d ranks, want %d: %v", run, len(ranks), world, ranks)
	}
}

// checkHosts checks that every span of run names its rank's node as its host
// (the node's own host name) and its local rank.
func checkHosts(t *testing.T, got telemetry, run string) {
	t.Helper()
	for _, s := range got.SpanRecords {
		res := s.resource()
		wantHost := computeHost[s.rank()/nodesRanksPerNode]
		if res["host.name"] != wantHost || fmt.Sprint(res["nv.dl.local_rank"]) != strconv.Itoa(int(s.rank())%nodesRanksPerNode) || res["slurm.job.id"] != run {
			t.Fatalf("run %s rank %d: host.name %v, local rank %v, slurm.job.id %v; want %s, %d, %s",
				run, s.rank(), res["host.name"], res["nv.dl.local_rank"], res["slurm.job.id"], wantHost, s.rank()%nodesRanksPerNode, run)
		}
	}
}

// waitStall waits for the gateway's nemo.run.stalled record of run.
func waitStall(t *testing.T, gw *nsGateway, run string, timeout time.Duration) record {
	t.Helper()
	var stall record
	waitFor(t, timeout, "a nemo.run.stalled record of run "+run, func() bool {
		for _, rec := range readTelemetry(t, filepath.Join(gw.dir, run)).StallRecords {
			if rec.attributes()["event.name"] == "nemo.run.stalled" {
				stall = rec
				return true
			}
		}
		return false
	})
	return stall
}

// checkMissingRanks compares the gateway's count of ranks missing from
// decided steps with the output: a lost rank's step whose spans it had not
// exported when it died is missing; nobody else's is.
func checkMissingRanks(t *testing.T, gw *nsGateway, got telemetry) {
	t.Helper()
	steps := map[int64]map[int64]bool{} // iteration -> ranks with a step span
	for _, s := range got.SpanRecords {
		if s.str("name") == "megatron.train_step" {
			it, _ := s.attributes()["megatron.iteration"].(json.Number).Int64()
			if steps[it] == nil {
				steps[it] = map[int64]bool{}
			}
			steps[it][s.rank()] = true
		}
	}
	var absent int
	for it, ranks := range steps {
		for rank := range int64(nodesWorld) {
			if !ranks[rank] {
				if rank/nodesRanksPerNode != lostNodeIndex {
					t.Errorf("iteration %d: rank %d of a live node has no step span at the gateway", it, rank)
				}
				absent++
			}
		}
	}
	missing := gw.metric(t, "otelcol_processor_nemo_steps_ranks_missing")
	if int(missing) != absent {
		body, _ := gw.l.httpGet(serviceHost, gw.l.addr[serviceHost]+":8888", "/metrics")
		var lines []string
		for line := range strings.SplitSeq(body, "\n") {
			if strings.Contains(line, "nemo_steps") && !strings.HasPrefix(line, "#") {
				lines = append(lines, line)
			}
		}
		t.Errorf("the gateway counts %v ranks missing from decided steps; the output lacks %d step spans, all of the lost node; its nemo_steps metrics:\n%s",
			missing, absent, strings.Join(lines, "\n"))
	}
	t.Logf("ranks missing from decided steps: %d (the lost node's last steps, not exported when it died)", absent)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
