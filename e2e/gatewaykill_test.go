// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"hash/maphash"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// redeliveryTimeout bounds how long the agents may take to deliver what
// they queued for a gateway once it is back: gRPC's reconnect backoff (at
// most 120s, plus jitter, after a long outage) plus one retry interval of
// the agents' otlp exporter (at most 10s). The outages here last seconds,
// so delivery takes seconds; the bound is the worst case, not the wait.
const redeliveryTimeout = 3 * time.Minute

// minOutage is how long the killed gateway stays down at least: long
// enough for several failed reconnects (1s, 1.6s, 2.6s apart).
const minOutage = 5 * time.Second

// TestScaleOutGatewayKilledMidStream: 2 agents, 3 gateways, 4 runs of 16
// ranks. A gateway that owns at least one run is killed with SIGKILL while
// the job streams, started again on the same port and directory while the
// job goes on, and then sent one more short job for its runs.
//
// The gateways acknowledge an agent only once its data is fsynced
// (configs/gateway.yaml), and the agents answer a rank from their spool on
// the node's disk (configs/agent.yaml): no rank's export fails (the
// victim's runs wait in the spool), and nothing the ranks saw acknowledged
// is lost: every
// run, the victim's included, ends with at least the spans, data points and
// log records its ranks had acknowledged (counted as distinct lines), on
// the one gateway it was on before the kill. What a gateway had written but
// not yet answered when it died is sent again, and what a rank gave up
// waiting for may still be delivered by the agent: at-least-once, so both
// are counted and reported, not failed on. Every wait is on a condition (metrics, logs,
// files), bounded in time.
func TestScaleOutGatewayKilledMidStream(t *testing.T) {
	gws := startGateways(t, 3, nil)
	agents := startAgents(t, 2, gws, nil)
	runs := []string{"run-alpha", "run-bravo", "run-charlie", "run-delta"}
	owner, ranks, results := findRunOwners(t, agents, gws, runs)

	victimIdx := owner[runs[0]]
	victim := gws[victimIdx]
	var victimRuns []string
	for _, run := range runs {
		if owner[run] == victimIdx {
			victimRuns = append(victimRuns, run)
		}
	}
	t.Logf("run -> gateway: %v; killing gateway %d (%s), owner of %v", owner, victimIdx, victim.endpoint(), victimRuns)

	// The victim's runs and the others as two jobs: the others must not see
	// an export fail, nor wait for the victim's runs in the agents.
	var victimJob, otherJob []lensemu.Rank
	for _, run := range runs {
		job := nodeJob(agents, run, 16, 150, attribute.String("test.wave", "main"))
		if owner[run] == victimIdx {
			victimJob = append(victimJob, job...)
		} else {
			otherJob = append(otherJob, job...)
		}
	}
	victimRunning, otherRunning := startJob(t, victimJob), startJob(t, otherJob)
	bothOver := func() bool { return jobOver(victimRunning.done) && jobOver(otherRunning.done) }
	start := acceptedSpans(t, victim.Collector)
	lastSeen, err := victim.WaitForMetric(jobTimeout, func(v float64) bool { return v >= start+3000 }, "otelcol_receiver_accepted_spans")
	if err != nil {
		t.Fatalf("the job never reached the victim: %v", err)
	}
	if bothOver() {
		t.Fatal("the job ended before the kill: make it longer")
	}
	agentsAccepted := func() float64 {
		var sum float64
		for _, a := range agents {
			sum += acceptedSpans(t, a)
		}
		return sum
	}
	victim.Kill()
	killedAt := time.Now()
	atKill := agentsAccepted()

	// The job goes on while the gateway is down: its runs' share piles up in
	// the agents' queues for the dead address.
	waitFor(t, deliveryTimeout, "an agent to retry the dead gateway", func() bool {
		return retriesTo(agents, victim.endpoint()) > 0
	})
	waitFor(t, jobTimeout, "10,000 more spans at the agents while the gateway is down (or the job's end)", func() bool {
		return agentsAccepted() >= atKill+10000 || bothOver()
	})
	// The outage lasts minOutage at least: a length of the scenario (nothing
	// is timed), so that the agents' gRPC connections are in reconnect
	// backoff when the gateway comes back, as after a real restart.
	time.Sleep(time.Until(killedAt.Add(minOutage)))
	duringOutage := agentsAccepted() - atKill
	restarted := startGateway(t, victim.env, victim.grpcPort)
	restartedAt := time.Now()
	outage := restartedAt.Sub(killedAt)
	gws[victimIdx] = restarted

	otherResults, otherErr := otherRunning.wait()
	victimResults, victimErr := victimRunning.wait()
	if otherErr != nil {
		t.Fatalf("runs on the gateways that stayed up were refused: %v", otherErr)
	}
	if victimErr != nil {
		t.Errorf("the dead gateway's runs were refused: the agents must answer from their spool: %v", firstLine(victimErr))
	}
	ranks, results = append(ranks, victimJob...), append(results, victimResults...)
	ranks, results = append(ranks, otherJob...), append(results, otherResults...)

	var after []lensemu.Rank
	for _, run := range victimRuns {
		after = append(after, nodeJob(agents, run, 16, 2, attribute.String("test.wave", "after-restart"))...)
	}
	afterResults := runJobByRank(t, after)
	ranks, results = append(ranks, after...), append(results, afterResults...)
	sent := sentByRun(ranks, results)

	// Delivery: every run's files reach what its ranks had acknowledged,
	// the agents still running (and retrying) until they do.
	for deadline := time.Now().Add(redeliveryTimeout); ; time.Sleep(500 * time.Millisecond) {
		missing := missingItems(t, gws, owner, sent)
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after the restart, runs still short of what their ranks had acknowledged: %s\nthe agents' errors:\n%s",
				redeliveryTimeout, strings.Join(missing, "; "), agentErrors(agents))
		}
	}
	delivered := time.Since(restartedAt)
	retries := retriesTo(agents, victim.endpoint())
	stopTier(agents, gws)

	outputs := readGateways(t, gws) // strict decoding and jq, after the stop
	for _, run := range runs {
		if at := holders(outputs, run); len(at) != 1 || at[0] != owner[run] {
			t.Errorf("%s: found on gateways %v, want only gateway %d, where it was before the kill", run, at, owner[run])
		}
	}
	var duplicates, beyond lensemu.Result
	for i, g := range gws {
		lines := countLines(t, g.dir())
		for run, n := range lines.distinct {
			if owner[run] != i {
				continue
			}
			if !n.Covers(sent[run]) {
				t.Errorf("%s: acknowledged to the ranks %s, found %s distinct", run, describe(sent[run]), describe(n))
			}
			beyond = beyond.Add(n.Sub(sent[run]))
			duplicates = duplicates.Add(lines.total[run].Sub(n))
		}
	}
	var afterFound int64
	for _, span := range outputs[victimIdx].SpanRecords {
		if span.resource()["test.wave"] == "after-restart" {
			afterFound++
		}
	}
	if afterSpans := lensemu.Sum(afterResults).Spans; afterFound < afterSpans {
		t.Errorf("spans sent after the restart: acknowledged %d, found %d", afterSpans, afterFound)
	}
	var victimSent lensemu.Result
	for _, run := range victimRuns {
		victimSent = victimSent.Add(sent[run])
	}
	t.Logf("victim %s: killed after accepting at least %v spans of this job, down %s while the agents accepted %v spans (of every run); agents logged %d retries to it; everything delivered %s after the restart",
		victim.endpoint(), lastSeen-start, outage.Round(time.Millisecond), duringOutage, retries, delivered.Round(time.Millisecond))
	t.Logf("victim's runs %v: acknowledged %s, all found; their ranks saw %v; duplicates (at-least-once) over all runs: %s; delivered though a rank was refused: %s",
		victimRuns, describe(victimSent), firstLine(victimErr), describe(duplicates), describe(beyond))
}

// missingItems lists the runs whose gateway files hold fewer distinct items
// than their ranks had acknowledged, with both counts.
func missingItems(t *testing.T, gws []*gateway, owner map[string]int, sent map[string]lensemu.Result) []string {
	t.Helper()
	found := map[string]lensemu.Result{}
	for i, g := range gws {
		for run, n := range countLines(t, g.dir()).distinct {
			if owner[run] == i {
				found[run] = n
			}
		}
	}
	var missing []string
	for run, want := range sent {
		got := found[run]
		if got.Spans < want.Spans || got.DataPoints < want.DataPoints || got.LogRecords < want.LogRecords {
			missing = append(missing, fmt.Sprintf("%s: acknowledged %s, found %s", run, describe(want), describe(got)))
		}
	}
	slices.Sort(missing)
	return missing
}

// agentErrors returns the agents' log lines at warn or error level.
func agentErrors(agents []*testcollector.Collector) string {
	var lines []string
	for i, a := range agents {
		for line := range strings.SplitSeq(a.Logs(), "\n") {
			if strings.Contains(line, "\twarn\t") || strings.Contains(line, "\terror\t") {
				lines = append(lines, fmt.Sprintf("agent %d: %.400s", i, line))
			}
		}
	}
	if len(lines) > 40 {
		lines = append(lines[:20], append([]string{"..."}, lines[len(lines)-20:]...)...)
	}
	return strings.Join(lines, "\n")
}

// findRunOwners finds which gateway owns each run by sending one rank of it
// alone and seeing which gateway's intake grows. It returns the probes'
// ranks and results, to be counted with the rest.
func findRunOwners(t *testing.T, agents []*testcollector.Collector, gws []*gateway, runs []string) (map[string]int, []lensemu.Rank, []lensemu.Result) {
	t.Helper()
	owner := map[string]int{}
	var ranks []lensemu.Rank
	var results []lensemu.Result
	for _, run := range runs {
		before := make([]float64, len(gws))
		for i, g := range gws {
			before[i] = acceptedSpans(t, g.Collector)
		}
		probe := nodeJob(agents, run, 16, 1, attribute.String("test.wave", "probe"))[:1]
		res := runJobByRank(t, probe)
		ranks, results = append(ranks, probe...), append(results, res...)
		waitFor(t, deliveryTimeout, run+"'s probe at a gateway", func() bool {
			var grown float64
			for i, g := range gws {
				grown += acceptedSpans(t, g.Collector) - before[i]
			}
			return int64(grown) == res[0].Spans
		})
		for i, g := range gws {
			if acceptedSpans(t, g.Collector) > before[i] {
				owner[run] = i
			}
		}
	}
	return owner, ranks, results
}

// lineCounts is what a gateway's files hold per run of what the ranks sent
// (not the step points and stall records the collector derived): every
// complete line, and the distinct ones (a line sent twice, at-least-once, is
// the same bytes), also by rank.
type lineCounts struct {
	total, distinct map[string]lensemu.Result
	byRank          map[string]map[int64]lensemu.Result // distinct, by run and rank
}

// countLines reads every JSONL file under dir, whose path is
// <run>/<signal>.jsonl (.zst as the presets write it), while a gateway may
// still be writing: an unterminated last line, or a frame still being
// written, is not counted yet.
func countLines(t *testing.T, dir string) lineCounts {
	t.Helper()
	seed := maphash.MakeSeed()
	out := lineCounts{total: map[string]lensemu.Result{}, distinct: map[string]lensemu.Result{}, byRank: map[string]map[int64]lensemu.Result{}}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !isOutputFile(path) {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		run, file, _ := strings.Cut(rel, string(filepath.Separator))
		one := lineItem(t, file)
		f := openOutput(t, path)
		defer f.Close()
		seen := map[uint64]bool{}
		r := bufio.NewReaderSize(f, 1<<20)
		for {
			line, err := r.ReadBytes('\n')
			if err != nil { // the end, or a line (or frame) still being written
				break
			}
			if derivedLine(line) {
				continue // derived by the collector (nemo_steps), not sent by a rank
			}
			h := maphash.Bytes(seed, line)
			if seen[h] {
				out.total[run] = out.total[run].Add(one)
				continue
			}
			seen[h] = true
			rec := decodeRecord(t, rel, line)
			if ev, _ := rec.attributes()["event.name"].(string); strings.HasPrefix(ev, "nemo.run.") {
				continue // a stall record, derived too
			}
			out.total[run] = out.total[run].Add(one)
			out.distinct[run] = out.distinct[run].Add(one)
			if out.byRank[run] == nil {
				out.byRank[run] = map[int64]lensemu.Result{}
			}
			out.byRank[run][rec.rank()] = out.byRank[run][rec.rank()].Add(one)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return out
}

// derivedLine reports whether a metrics line is one of nemo_steps' points.
func derivedLine(line []byte) bool {
	return bytes.HasPrefix(line, stepPointPrefix) || bytes.HasPrefix(line, stallPointPrefix) || bytes.HasPrefix(line, behindPointPrefix)
}

// retriesTo counts the agents' log lines that retry an export to endpoint.
func retriesTo(agents []*testcollector.Collector, endpoint string) int {
	n := 0
	for _, a := range agents {
		sc := bufio.NewScanner(strings.NewReader(a.Logs()))
		sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
		for sc.Scan() {
			// The spool's slot logs the retry; the gRPC error names the
			// address it could not reach.
			if line := sc.Text(); strings.Contains(line, "Will retry") && strings.Contains(line, endpoint) {
				n++
			}
		}
	}
	return n
}
