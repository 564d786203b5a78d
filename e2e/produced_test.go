// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/hex"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// What the job produced arrives. configs/agent.yaml in front of two
// configs/gateway.yaml; two runs of 16 ranks, one on each gateway (their
// step shapes differ), each rank a real OpenTelemetry SDK at its defaults
// (retries only inside the 10s export timeout, a 2,048-span queue that
// drops while full) paced at a step every 100ms (about 220 spans/s a
// rank). Every span a rank ended is counted (lensemu.Rank.Produced), and
// after the fault every one of them must be in a gateway's files: the
// agent answers the ranks from its node's disk (the spool), so a gateway
// out for longer than the SDKs' timeout costs the job nothing.

// stepEvery paces the ranks of these tests in real time.
const stepEvery = 100 * time.Millisecond

// TestTwoTiersGatewayFrozenLosesNothingTheJobProduced: the gateway of one
// run is frozen (SIGSTOP) 40s while both runs stream.
func TestTwoTiersGatewayFrozenLosesNothingTheJobProduced(t *testing.T) {
	producedThroughAFault(t, 40*time.Second, true, false, func(t *testing.T, _ []*testcollector.Collector, gws []*gateway, victim int) func() {
		if err := syscall.Kill(gws[victim].Pid(), syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		return func() { _ = syscall.Kill(gws[victim].Pid(), syscall.SIGCONT) }
	})
}

// TestTwoTiersGatewayDownLosesNothingTheJobProduced: the gateway of one run
// is killed (SIGKILL) and started again 60s later, on its port and
// directory.
func TestTwoTiersGatewayDownLosesNothingTheJobProduced(t *testing.T) {
	producedThroughAFault(t, 60*time.Second, true, false, func(t *testing.T, _ []*testcollector.Collector, gws []*gateway, victim int) func() {
		g := gws[victim]
		g.Kill()
		return func() { gws[victim] = startGateway(t, g.env, g.grpcPort) }
	})
}

// TestTwoTiersAgentKilledLosesNothingTheJobProduced: the agent is killed
// (SIGKILL) while both runs stream and started again 3s later on its ports
// and spool: what it had answered is sent from its disk, and the ranks'
// SDKs send again what it had not. Asserted for the ranks on OTLP/gRPC,
// whose SDK retries a refused connection within its export timeout; the Go
// SDK's OTLP/HTTP exporter does not retry a refused connection (only
// 429/502/503/504 answers and timeouts), so what its ranks export while no
// agent listens is lost in the job: measured and logged, not asserted (no
// collector can answer while it is down; docs/operating.md).
func TestTwoTiersAgentKilledLosesNothingTheJobProduced(t *testing.T) {
	producedThroughAFault(t, 3*time.Second, false, false, func(t *testing.T, agents []*testcollector.Collector, _ []*gateway, _ int) func() {
		a := agents[0]
		a.Kill()
		return func() {
			agents[0] = testcollector.Start(t, testcollector.Config(t, "agent.yaml"), testcollector.Options{Env: a.Env})
		}
	})
}

// TestTwoTiersGatewaysSharingADirectoryOneRestarting: the two gateways
// write their runs' files into one directory (one shared volume), and the
// gateway of one run is killed (SIGKILL) and started again 10s later on its
// port: at its start it repairs the files it finds there, without cutting
// the other gateway's files as it writes them (flock: a file another
// collector has open is left alone), and every span the ranks produced is
// in the shared files.
func TestTwoTiersGatewaysSharingADirectoryOneRestarting(t *testing.T) {
	producedThroughAFault(t, 10*time.Second, true, true, func(t *testing.T, _ []*testcollector.Collector, gws []*gateway, victim int) func() {
		g := gws[victim]
		g.Kill()
		return func() { gws[victim] = startGateway(t, g.env, g.grpcPort) }
	})
}

// producedThroughAFault runs the two runs for outage plus 30s, applies
// fault (to gateway victim, the first run's, or to the agent) once the
// victim has taken 3,000 spans, undoes it outage later, and checks that
// every span the ranks produced reached a gateway's files (for an agent
// fault, the gRPC ranks'), that the other gateway's run kept flowing
// meanwhile and that no rank saw an export fail (a gateway fault). With
// sharedDir both gateways write into one directory.
func producedThroughAFault(t *testing.T, outage time.Duration, gatewayFault, sharedDir bool, fault func(t *testing.T, agents []*testcollector.Collector, gws []*gateway, victim int) (undo func())) {
	var adjust func(env map[string]string)
	if sharedDir {
		dir := t.TempDir()
		adjust = func(env map[string]string) { env["NEMO_TELEMETRY_DIR"] = dir }
	}
	gws := startGateways(t, 2, adjust)
	agents := startAgents(t, 1, gws, nil)
	owner, victimRuns, otherRuns := runsOnBothGateways(t, agents, gws)
	runs := []string{victimRuns[0], otherRuns[0]}
	victim, other := owner[runs[0]], owner[runs[1]]

	produced := map[string]*lensemu.AckLog{lensemu.GRPC: lensemu.NewAckLog(), lensemu.HTTP: lensemu.NewAckLog()}
	if gatewayFault {
		produced[lensemu.HTTP] = produced[lensemu.GRPC]
	}
	steps := int((outage + 30*time.Second) / stepEvery)
	job := producingJob(agents, runs, steps, produced)
	running := startJob(t, job)
	start := acceptedSpans(t, gws[victim].Collector)
	waitFor(t, jobTimeout, "3,000 spans at the victim's gateway", func() bool {
		return acceptedSpans(t, gws[victim].Collector) >= start+3000 || jobOver(running.done)
	})
	if jobOver(running.done) {
		t.Fatal("the job ended before the fault: make it longer")
	}
	otherAtFault := acceptedSpans(t, gws[other].Collector)
	undo := fault(t, agents, gws, victim)
	faultAt := time.Now()
	time.Sleep(outage)
	otherDuring := acceptedSpans(t, gws[other].Collector) - otherAtFault
	undo()
	results, jobErr := running.wait()

	if gatewayFault {
		if jobErr != nil {
			t.Errorf("a rank saw an export fail while a gateway was out (the agent must answer from its disk): %v", firstLine(jobErr))
		}
		if otherDuring == 0 {
			t.Errorf("the other gateway's run %s did not flow while %s was out (head-of-line blocking in the agent)", runs[1], gws[victim].endpoint())
		}
	}
	sent := sentByRun(job, results)
	lost, extra := waitDelivered(t, agents, gws, owner, sent, produced[lensemu.GRPC])
	if lost != "" {
		t.Fatal(lost)
	}
	asserted := len(produced[lensemu.GRPC].IDs())
	note := "every rank's"
	if !gatewayFault {
		delivered := deliveredSpanIDs(t, gws)
		missing := 0
		httpIDs := produced[lensemu.HTTP].IDs()
		for id := range httpIDs {
			if _, ok := delivered[hex.EncodeToString(id[:])]; !ok {
				missing++
			}
		}
		note = fmt.Sprintf("the gRPC ranks'; the HTTP ranks' SDK lost %d of %d in the job (it does not retry a refused connection)", missing, len(httpIDs))
	}
	t.Logf("fault for %s: produced %d spans (%s), all delivered %s after the fault began; the other run's gateway took %.0f spans meanwhile; the ranks saw %s; duplicates: %s",
		outage, asserted, note, time.Since(faultAt).Round(time.Second), otherDuring, firstLine(jobErr), describe(extra))
}
