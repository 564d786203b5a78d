// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
)

// TestTwoTiersSpoolDiskFullRefusesAndLosesNothing: the agent's spool on a
// full disk (an 8 MiB tmpfs) while its gateway is frozen. Once the disk is
// full the agent refuses the ranks, retryably (UNAVAILABLE), instead of
// answering and dropping; it keeps running, and once the gateway is back
// every span a rank saw acknowledged is in the gateway's files.
func TestTwoTiersSpoolDiskFullRefusesAndLosesNothing(t *testing.T) {
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		t.Skip("mounting a tmpfs needs root")
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })

	gws := startGateways(t, 1, nil)
	agents := startAgents(t, 1, gws, func(env map[string]string) { env["NEMO_QUEUE_DIR"] = dir })
	if err := syscall.Kill(gws[0].Pid(), syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(gws[0].Pid(), syscall.SIGCONT)
		}
	}
	defer resume()

	// Retries off, the batcher blocking (lensemu's default): every export
	// is answered once, and what is answered OK is recorded.
	acked := lensemu.NewAckLog()
	job := nodeJob(agents, "run-diskfull", 16, 400, attribute.String("test.wave", "diskfull"))
	for i := range job {
		job[i].Acked = acked
	}
	results, jobErr := startJob(t, job).wait()
	if jobErr == nil {
		t.Fatal("no export was refused: the job did not fill the 8 MiB disk; make it longer")
	}
	if !strings.Contains(jobErr.Error(), "Unavailable") && !strings.Contains(jobErr.Error(), "503") {
		t.Errorf("the full disk's refusal is not retryable (want UNAVAILABLE or 503): %v", firstLine(jobErr))
	}
	if _, _, err := agents[0].Metric("otelcol_receiver_accepted_spans"); err != nil {
		t.Fatalf("the agent stopped answering on a full disk (%v):\n%s", err, agents[0].Logs())
	}
	resume()
	owner := map[string]int{"run-diskfull": 0}
	lost, extra := waitDelivered(t, agents, gws, owner, sentByRun(job, results), acked)
	if lost != "" {
		t.Fatal(lost)
	}
	// The slots report what they hold against their bound: nothing once
	// every span is delivered.
	if v, err := agents[0].WaitForMetric(30*time.Second, func(v float64) bool { return v == 0 }, "otelcol_exporter_spool_queue_bytes"); err != nil {
		t.Errorf("otelcol_exporter_spool_queue_bytes: %v (last %v), want 0 once delivered", err, v)
	}
	if capacity, found, err := agents[0].Metric("otelcol_exporter_spool_queue_capacity"); err != nil || !found || capacity <= 0 {
		t.Errorf("otelcol_exporter_spool_queue_capacity: %v (found %v, %v), want the slots' bound", capacity, found, err)
	}
	t.Logf("disk full: %d spans acknowledged before and between refusals (%s), all delivered once the gateway was back; duplicates: %s",
		len(acked.IDs()), firstLine(jobErr), describe(extra))
}
