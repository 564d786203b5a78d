package e2e

import (
	"context"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nemo-lens/otelcol-nemo/internal/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testcollector"
)

// TestKillDuringJSONLWritesLosesNothingAcknowledged: ranks send as fast as
// they can into a collector whose jsonl_file exporter writes and fsyncs
// before acknowledging; the collector is killed with SIGKILL mid-stream. A
// kill inside a multi-page write(2) may leave an unterminated last line,
// which the exporter removes when it reopens the file, so the collector is
// restarted on the same directory and stopped cleanly. Then every line of
// every file is a complete JSON object (jq agrees), and every span, data
// point and log record acknowledged before the kill is in the files.
func TestKillDuringJSONLWritesLosesNothingAcknowledged(t *testing.T) {
	dir := t.TempDir()
	env := testEnv(t)
	env["NEMO_TELEMETRY_DIR"] = dir
	config := filepath.Join(testcollector.RepoRoot(t), "e2e", "testdata", "jsonl-durable.yaml")
	c := testcollector.Start(t, config, testcollector.Options{Env: env})

	ranks := mixedJob(c, "run-crash", 4, 400)
	ctx, cancel := context.WithTimeout(context.Background(), jobTimeout)
	defer cancel()
	var (
		wg    sync.WaitGroup
		acked []lensemu.Result
	)
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Export errors after the kill are expected; only the counts matter.
		acked, _ = lensemu.Job(ctx, ranks)
	}()
	if _, err := c.WaitForMetric(jobTimeout, func(v float64) bool { return v >= 2000 }, "otelcol_receiver_accepted_spans"); err != nil {
		t.Fatalf("load never reached the collector: %v", err)
	}
	c.Kill()
	wg.Wait()
	total := lensemu.Sum(acked)
	if total.Spans == 0 {
		t.Fatal("nothing was acknowledged before the kill")
	}

	restarted := testcollector.Start(t, config, testcollector.Options{Env: env})
	restarted.Stop()
	got := readTelemetry(t, dir) // fails on any torn or invalid line
	t.Logf("acknowledged before SIGKILL: %s; in the files: %s", describe(total), describe(got.Result))
	if got.Spans < total.Spans || got.DataPoints < total.DataPoints || got.LogRecords < total.LogRecords {
		t.Fatalf("acknowledged %s before the kill, but the files hold only %s", describe(total), describe(got.Result))
	}
}
