// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"sync"
	"testing"
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// TestKillDuringJSONLWritesLosesNothingAcknowledged: the default preset as
// committed (configs/file.yaml, every rank kept; zstd-compressed, its
// default, then gzip and plain) under steady heavy load: three load
// generators of 64 ranks each, spans over gRPC, data points over HTTP and
// log records over gRPC, each with several requests in flight, send up to
// senderRate items a second each; the collector is killed with SIGKILL
// mid-stream, once it has accepted 100,000 spans. The README's recipes read
// the files while they are being written and after the kill: the tolerant
// one (`zstd -dc | jq -R 'fromjson?'`, zcat, jq) finds every acknowledged
// record. A kill inside a large write(2) may leave a cut last line or frame
// (holding only unacknowledged records), which the exporter removes when it
// starts again, so the collector is restarted on the same directory and
// stopped cleanly. Then every line of every file is a complete JSON object
// (jq and the strict recipe agree), and every span, data point and log
// record the senders saw acknowledged is in the files.
func TestKillDuringJSONLWritesLosesNothingAcknowledged(t *testing.T) {
	loadgen := buildLoadgen(t)
	for _, compression := range []string{"", "gzip", "none"} {
		name := compression
		if name == "" {
			name = "preset_default_zstd"
		}
		t.Run(name, func(t *testing.T) {
			env := testEnv(t)
			if compression != "" {
				env["NEMO_JSONL_COMPRESSION"] = compression
			}
			killDuringWrites(t, loadgen, env)
		})
	}
}

// senderRate caps each sender, so what the recipes read back after the kill
// stays bounded: uncapped, the log sender ran ahead of the spans that time
// the kill, by more the longer the JSONL group commit waits.
const senderRate = "50000"

func killDuringWrites(t *testing.T, loadgen string, env map[string]string) {
	config := testcollector.Config(t, "file.yaml")
	c := testcollector.Start(t, config, testcollector.Options{Env: env})
	dir := env["NEMO_TELEMETRY_DIR"]

	senders := []struct{ signal, protocol, endpoint string }{
		{"traces", "grpc", c.GRPCEndpoint()},
		{"metrics", "http", c.HTTPEndpoint()},
		{"logs", "grpc", c.GRPCEndpoint()},
	}
	var (
		wg      sync.WaitGroup
		reports = make([]loadReport, len(senders))
		start   = time.Now()
	)
	for i, s := range senders {
		wg.Go(func() {
			// Sends for 12s at most: the kill comes first; requests after it
			// fail fast and are not counted as accepted.
			reports[i] = runLoad(t, loadgen, "-signal", s.signal, "-protocol", s.protocol, "-endpoint", s.endpoint,
				"-ranks", "64", "-batch", "512", "-duration", "12s", "-conns", "2", "-workers", "4", "-timeout", "5s",
				"-rate", senderRate,
				"-run-id", "run-crash", "-error-backoff", "50ms")
		})
	}
	if _, err := c.WaitForMetric(jobTimeout, func(v float64) bool { return v >= 100_000 }, "otelcol_receiver_accepted_spans"); err != nil {
		t.Fatalf("load never reached the collector: %v", err)
	}
	// A reader of the files while the collector writes them: the tolerant
	// recipe, started just before the kill (started earlier, it would only
	// let the load pile up while it reads).
	requireRecipeTools(t)
	var live lensemu.Result
	wg.Go(func() { live = readWithRecipe(t, dir, false) })
	c.Kill()
	sent := time.Since(start)
	wg.Wait()
	if live.Spans == 0 {
		t.Errorf("the README's recipe found no span in the files being written: %s", describe(live))
	}
	var acked lensemu.Result
	acked.Spans, acked.DataPoints, acked.LogRecords = reports[0].ItemsAccepted, reports[1].ItemsAccepted, reports[2].ItemsAccepted
	if acked.Spans == 0 || acked.DataPoints == 0 || acked.LogRecords == 0 {
		t.Fatalf("some signal had nothing acknowledged before the kill: %s", describe(acked))
	}
	if killed := readWithRecipe(t, dir, false); !killed.Covers(acked) {
		t.Errorf("after the kill, before a restart, the README's recipe finds %s, but %s were acknowledged", describe(killed), describe(acked))
	}

	restarted := testcollector.Start(t, config, testcollector.Options{Env: env})
	restarted.Stop()
	got := readTelemetry(t, dir) // fails on any torn or invalid line
	t.Logf("acknowledged in the %v before SIGKILL: %s; in the files: %s", sent.Round(time.Millisecond), describe(acked), describe(got.Result))
	if !got.Covers(acked) {
		t.Fatalf("acknowledged %s before the kill, but the files hold only %s", describe(acked), describe(got.Result))
	}
	if strict := readWithRecipe(t, dir, true); !strict.Covers(acked) {
		t.Errorf("after the restart the strict recipe finds %s, want at least %s", describe(strict), describe(acked))
	}
}
