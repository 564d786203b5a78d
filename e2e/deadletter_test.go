// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"encoding/hex"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/otlpsink"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// These tests hold configs/otlp.yaml to its promise: every span it
// acknowledged is delivered or in a run's dead-letter file, with the
// reason, and configs/replay.yaml sends the letters again. On the stock
// otlp_http exporter (main before nemo_otlp) the refused and rejected spans
// were dropped with a log line, and these tests fail: acknowledged spans
// are neither at the backend nor in any file.

// deadLetterJob is a job of 4 ranks (2 on OTLP/gRPC, 2 on OTLP/HTTP), one
// step shape each, paced at stepEvery, recording what the collector
// acknowledged.
func deadLetterJob(c *testcollector.Collector, run string, steps int, acked *lensemu.AckLog) []lensemu.Rank {
	ranks := mixedJob(c, run, 4, steps)
	shapes := []string{"train_step/in_job", "train.iteration/in_job", "train_step/own_root", "train.iteration/own_root"}
	for i := range ranks {
		ranks[i].Acked, ranks[i].NoMetrics, ranks[i].NoLogs = acked, true, true
		ranks[i].StepEvery = stepEvery
		if shape := stallShapes[shapes[i%len(shapes)]]; shape != nil {
			shape(&ranks[i])
		}
	}
	return ranks
}

// deadLetters reads the traces dead letters of every run for one
// destination: span id -> the reasons it was dead-lettered for (one per
// letter), and the letters' resources' attributes checked on the way.
func deadLetters(t *testing.T, dir, destination string) map[string][]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "*", "dead-letters", destination, "traces.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, path := range files {
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			td, err := (&ptrace.JSONUnmarshaler{}).UnmarshalTraces(sc.Bytes())
			if err != nil {
				t.Fatalf("%s: a line that is not an OTLP JSON request: %v", path, err)
			}
			for _, rs := range td.ResourceSpans().All() {
				reason, _ := rs.Resource().Attributes().Get("nemo.dead_letter.reason")
				for _, ss := range rs.ScopeSpans().All() {
					for _, s := range ss.Spans().All() {
						id := s.SpanID()
						out[hex.EncodeToString(id[:])] = append(out[hex.EncodeToString(id[:])], reason.Str())
					}
				}
			}
		}
		_ = f.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// accounted checks acknowledged = delivered + dead-lettered, span id by
// span id, and returns what is in neither (empty: nothing) and the spans
// found in both or more than once (duplicates).
func accounted(acked map[string]struct{}, delivered map[string]int, lettered map[string][]string) (missing []string, duplicates int) {
	for id := range acked {
		n := delivered[id] + len(lettered[id])
		if n == 0 {
			missing = append(missing, id)
		}
		if n > 1 {
			duplicates += n - 1
		}
	}
	return missing, duplicates
}

func hexIDs(a *lensemu.AckLog) map[string]struct{} {
	out := map[string]struct{}{}
	for id := range a.IDs() {
		out[hex.EncodeToString(id[:])] = struct{}{}
	}
	return out
}

// takenSpans counts the span ids of the trace requests a responder
// accepted whole.
type takenSpans struct {
	mu  sync.Mutex
	ids map[string]int
}

func (a *takenSpans) add(td ptrace.Traces) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, rs := range td.ResourceSpans().All() {
		for _, ss := range rs.ScopeSpans().All() {
			for _, s := range ss.Spans().All() {
				id := s.SpanID()
				a.ids[hex.EncodeToString(id[:])]++
			}
		}
	}
}

func (a *takenSpans) snapshot() map[string]int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return maps.Clone(a.ids)
}

// takingSink starts a fake OTLP/HTTP backend that answers as answer says
// (status 0: it takes the request) and records the span ids it took.
func takingSink(t *testing.T, answer func(otlpsink.Request) (int, http.Header, []byte)) (*otlpsink.Sink, *takenSpans) {
	t.Helper()
	sink, err := otlpsink.Start(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Close() })
	taken := &takenSpans{ids: map[string]int{}}
	sink.SetRespond(func(r otlpsink.Request) (int, http.Header, []byte) {
		status, header, body := answer(r)
		if status == 0 && r.Signal == otlpsink.Traces {
			taken.add(r.Traces)
		}
		return status, header, body
	})
	return sink, taken
}

// waitAccounted waits, at most timeout, until every acknowledged
// span is delivered or dead-lettered by destination.
func waitAccounted(t *testing.T, timeout time.Duration, acked map[string]struct{}, delivered func() map[string]int, dir, destination string) (map[string]int, map[string][]string, int) {
	t.Helper()
	var got map[string]int
	var lettered map[string][]string
	var missing []string
	var dups int
	for deadline := time.Now().Add(timeout); ; time.Sleep(time.Second) {
		got, lettered = delivered(), deadLetters(t, dir, destination)
		missing, dups = accounted(acked, got, lettered)
		if len(missing) == 0 {
			return got, lettered, dups
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d acknowledged spans neither delivered nor dead-lettered %s after the job (e.g. %v)", len(missing), len(acked), timeout, missing[:min(3, len(missing))])
		}
	}
}

func countReasons(lettered map[string][]string) map[string]int {
	out := map[string]int{}
	for _, rs := range lettered {
		for _, r := range rs {
			out[r]++
		}
	}
	return out
}

// TestOTLPPresetBackendRefusingAMinute: the backend answers 401 to every
// request for the first minute (a key rotated) while a job sends, then
// takes everything. What it refused is in the runs' dead-letter files, the
// rest arrived; then configs/replay.yaml sends the letters and every
// acknowledged span is at the backend.
func TestOTLPPresetBackendRefusingAMinute(t *testing.T) {
	var refusing atomic.Bool
	refusing.Store(true)
	sink, accepted := takingSink(t, func(otlpsink.Request) (int, http.Header, []byte) {
		if refusing.Load() {
			return http.StatusUnauthorized, nil, []byte("invalid API key")
		}
		return 0, nil, nil
	})
	env := otlpBackendEnv(t, sink.URL)
	c := testcollector.Start(t, testcollector.Config(t, "otlp.yaml"), testcollector.Options{Env: env})
	time.AfterFunc(time.Minute, func() { refusing.Store(false) })

	acked := lensemu.NewAckLog()
	runJob(t, deadLetterJob(c, "run-key-rotated", 700, acked)) // 70 s
	ids := hexIDs(acked)
	delivered, lettered, dups := waitAccounted(t, deliveryTimeout, ids, accepted.snapshot, env["NEMO_TELEMETRY_DIR"], "nemo_otlp")
	reasons := countReasons(lettered)
	c.Stop()
	t.Logf("backend refusing (401) for the first minute of a 70 s job: %d spans acknowledged, %d delivered, %d dead-lettered %v, %d duplicates",
		len(ids), len(delivered), len(lettered), reasons, dups)
	if len(lettered) == 0 || reasons["refused"] != len(lettered) {
		t.Fatalf("dead letters %v: want every refused span as reason refused", reasons)
	}
	if len(delivered) == 0 {
		t.Fatal("nothing was delivered after the backend took the key back")
	}

	// The replay preset, pointed at the same runs' directory and backend.
	renv := otlpBackendEnv(t, sink.URL)
	renv["NEMO_TELEMETRY_DIR"] = env["NEMO_TELEMETRY_DIR"]
	replayAll(t, renv, sink, accepted, ids)
}

// replayAll runs configs/replay.yaml with renv until every span of ids is
// at the backend (bounded), and checks that no replayed span carries its
// letter's attributes or file name.
func replayAll(t *testing.T, renv map[string]string, sink *otlpsink.Sink, accepted *takenSpans, ids map[string]struct{}) {
	t.Helper()
	replay := testcollector.Start(t, testcollector.Config(t, "replay.yaml"), testcollector.Options{Env: renv})
	var missing []string
	waitFor(t, deliveryTimeout, "every acknowledged span at the backend after the replay", func() bool {
		got := accepted.snapshot()
		missing = missing[:0]
		for id := range ids {
			if got[id] == 0 {
				missing = append(missing, id)
			}
		}
		return len(missing) == 0
	})
	replay.Stop()
	for _, r := range sink.Requests() {
		for _, rs := range r.Traces.ResourceSpans().All() {
			if _, ok := rs.Resource().Attributes().Get("nemo.dead_letter.reason"); ok {
				t.Fatal("a replayed span still carries its dead letter's nemo.dead_letter.reason")
			}
			for _, ss := range rs.ScopeSpans().All() {
				for _, s := range ss.Spans().All() {
					if _, ok := s.Attributes().Get("log.file.name"); ok {
						t.Fatal("a replayed span carries the dead-letter file's name (log.file.name)")
					}
				}
			}
		}
	}
	t.Logf("replayed: every one of the %d acknowledged spans is at the backend", len(ids))
}

// TestOTLPPresetPartialSuccessIsDeadLettered: the backend answers every
// third traces request with a partial success rejecting one span. Those
// requests are dead-lettered whole (OTLP does not say which span was
// rejected), the others delivered.
func TestOTLPPresetPartialSuccessIsDeadLettered(t *testing.T) {
	partial := ptraceotlp.NewExportResponse()
	partial.PartialSuccess().SetRejectedSpans(1)
	partial.PartialSuccess().SetErrorMessage("span too old")
	body, err := partial.MarshalProto()
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	sink, accepted := takingSink(t, func(r otlpsink.Request) (int, http.Header, []byte) {
		if r.Signal == otlpsink.Traces && n.Add(1)%3 == 0 {
			return http.StatusOK, http.Header{"Content-Type": {"application/x-protobuf"}}, body
		}
		return 0, nil, nil
	})
	env := otlpBackendEnv(t, sink.URL)
	c := testcollector.Start(t, testcollector.Config(t, "otlp.yaml"), testcollector.Options{Env: env})
	acked := lensemu.NewAckLog()
	runJob(t, deadLetterJob(c, "run-partial", 100, acked))
	ids := hexIDs(acked)
	delivered, lettered, dups := waitAccounted(t, deliveryTimeout, ids, accepted.snapshot, env["NEMO_TELEMETRY_DIR"], "nemo_otlp")
	reasons := countReasons(lettered)
	c.Stop()
	t.Logf("partial success on every third request: %d spans acknowledged, %d delivered, %d dead-lettered %v, %d duplicates",
		len(ids), len(delivered), len(lettered), reasons, dups)
	if reasons["partial_success"] == 0 || reasons["partial_success"] != len(lettered) {
		t.Fatalf("dead letters %v: want the partially rejected requests as reason partial_success", reasons)
	}
}

// TestOTLPPresetRetryWindowRunningOut: the backend answers 503 to every
// traces request; with NEMO_RETRY_WINDOW=30s every acknowledged span is
// dead-lettered (reason retry_window) once its request has failed for 30 s.
func TestOTLPPresetRetryWindowRunningOut(t *testing.T) {
	sink, _ := downSink(t)
	env := otlpBackendEnv(t, sink.URL)
	env["NEMO_RETRY_WINDOW"] = "30s"
	c := testcollector.Start(t, testcollector.Config(t, "otlp.yaml"), testcollector.Options{Env: env})
	acked := lensemu.NewAckLog()
	runJob(t, deadLetterJob(c, "run-backend-down", 50, acked))
	ids := hexIDs(acked)
	_, lettered, dups := waitAccounted(t, 2*time.Minute, ids, func() map[string]int { return nil }, env["NEMO_TELEMETRY_DIR"], "nemo_otlp")
	reasons := countReasons(lettered)
	c.Stop()
	t.Logf("backend down, retry window 30 s: %d spans acknowledged, %d dead-lettered %v, %d duplicates, %d requests refused",
		len(ids), len(lettered), reasons, dups, sink.Refused())
	if reasons["retry_window"] != len(lettered) {
		t.Fatalf("dead letters %v: want every span as reason retry_window", reasons)
	}
}
