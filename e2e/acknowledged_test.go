// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"context"
	"encoding/hex"
	"fmt"
	"io/fs"
	"maps"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/lensemu"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/otlpsink"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// These tests hold configs/agent.yaml in front of configs/gateway.yaml to
// its promise: what a rank produced arrives, checked span id by span id
// (lensemu.AckLog) against the gateways' files, and the data points and log
// records by count (produced_test.go). What a gateway was sent twice is
// counted and reported (at-least-once).

// runsOnBothGateways probes runs until each of the two gateways owns at
// least one, and returns the owners and the runs of gateway 0's first run's
// owner and of the other. The gateways' ports, and so the load balancer's
// ring, change from run to run: 32 names make all of them hashing to one
// gateway a chance of about 1 in 2^31 (with 8 names it happened once here).
func runsOnBothGateways(t *testing.T, agents []*testcollector.Collector, gws []*gateway) (map[string]int, []string, []string) {
	t.Helper()
	names := []string{"run-alpha", "run-bravo", "run-charlie", "run-delta", "run-echo", "run-foxtrot", "run-golf", "run-hotel"}
	for i := range 24 {
		names = append(names, fmt.Sprintf("run-%02d", i))
	}
	owner := map[string]int{}
	for i := 0; i < len(names); i += 2 {
		o, _, _ := findRunOwners(t, agents, gws, names[i:i+2])
		maps.Copy(owner, o)
		var a, b []string
		for _, run := range names[:i+2] {
			if owner[run] == owner[names[0]] {
				a = append(a, run)
			} else {
				b = append(b, run)
			}
		}
		if len(b) > 0 {
			return owner, a, b
		}
	}
	t.Fatalf("all of %v hash to one gateway", names)
	return nil, nil, nil
}

// producingJob is nodeJob for several runs of 16 ranks (half on OTLP/gRPC,
// half on OTLP/HTTP), the step shapes alternating by run (either
// taxonomy's step span, in the job span or its own root), each rank's SDK
// at its defaults (lensemu.Rank.SDKDefaults), paced at stepEvery, every
// span a rank ends recorded in produced[its protocol].
func producingJob(agents []*testcollector.Collector, runs []string, steps int, produced map[string]*lensemu.AckLog) []lensemu.Rank {
	shapes := []func(*lensemu.Rank){nil, stallShapes["train.iteration/in_job"], stallShapes["train_step/own_root"], stallShapes["train.iteration/own_root"]}
	var ranks []lensemu.Rank
	for i, run := range runs {
		job := nodeJob(agents, run, 16, steps, attribute.String("test.wave", "produced"))
		for j := range job {
			job[j].SDKDefaults = true
			job[j].Produced = produced[job[j].Protocol]
			job[j].StepEvery = stepEvery
			if shape := shapes[i%len(shapes)]; shape != nil {
				shape(&job[j])
			}
		}
		ranks = append(ranks, job...)
	}
	return ranks
}

// runningJob is a lensemu job started in the background.
type runningJob struct {
	done    chan struct{}
	results []lensemu.Result
	err     error
}

func startJob(t *testing.T, ranks []lensemu.Rank) *runningJob {
	ctx, cancel := context.WithTimeout(t.Context(), jobTimeout)
	j := &runningJob{done: make(chan struct{})}
	go func() {
		defer close(j.done)
		defer cancel()
		j.results, j.err = lensemu.Job(ctx, ranks)
	}()
	return j
}

func (j *runningJob) wait() ([]lensemu.Result, error) {
	<-j.done
	return j.results, j.err
}

func jobOver(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	default:
		return false
	}
}

// waitDelivered waits, at most redeliveryTimeout, until every span id of
// produced is in a gateway's traces files and every run's files hold at
// least as many distinct data points and log records as its ranks had
// acknowledged. It returns what is still missing then (empty: nothing) and
// the items found beyond what was acknowledged (duplicates, and what a rank
// was refused but the agent delivered after all).
func waitDelivered(t *testing.T, agents []*testcollector.Collector, gws []*gateway, owner map[string]int, sent map[string]lensemu.Result, produced *lensemu.AckLog) (string, lensemu.Result) {
	t.Helper()
	ids := produced.IDs()
	var missing []string
	for deadline := time.Now().Add(redeliveryTimeout); ; time.Sleep(time.Second) {
		missing = missingItems(t, gws, owner, sent)
		delivered := deliveredSpanIDs(t, gws)
		var lost []string
		for id := range ids {
			if _, ok := delivered[hex.EncodeToString(id[:])]; !ok {
				lost = append(lost, hex.EncodeToString(id[:]))
			}
		}
		if len(lost) > 0 {
			sort.Strings(lost)
			missing = append(missing, describeLost(len(lost), len(ids), lost))
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return "produced but not delivered " + redeliveryTimeout.String() + " after the fault: " + joinLines(missing) + "\nthe agents' errors:\n" + agentErrors(agents), lensemu.Result{}
		}
	}
	var extra lensemu.Result
	for i, g := range gws {
		counts := countLines(t, g.dir())
		for run, n := range counts.total {
			if owner[run] == i {
				extra = extra.Add(n.Sub(sent[run]))
			}
		}
	}
	return "", extra
}

// deliveredSpanIDs returns the span ids (hex) in every gateway's traces
// files, complete lines only (a gateway may still be writing).
func deliveredSpanIDs(t *testing.T, gws []*gateway) map[string]struct{} {
	t.Helper()
	out := map[string]struct{}{}
	for _, g := range gws {
		err := filepath.WalkDir(g.dir(), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !isOutputFile(path) || signalFile(filepath.Base(path)) != "traces.jsonl" {
				return err
			}
			f := openOutput(t, path)
			defer f.Close()
			r := bufio.NewReaderSize(f, 1<<20)
			for {
				line, err := r.ReadBytes('\n')
				if err != nil {
					break
				}
				out[decodeRecord(t, path, line).str("span_id")] = struct{}{}
			}
			return nil
		})
		if err != nil {
			t.Fatalf("walk %s: %v", g.dir(), err)
		}
	}
	return out
}

// describeLost names how many of the produced spans are missing, with a
// few of their ids.
func describeLost(lost, produced int, ids []string) string {
	return fmt.Sprintf("%d of %d produced spans in no gateway's files (e.g. %s)", lost, produced, strings.Join(ids[:min(3, len(ids))], ", "))
}

func joinLines(lines []string) string { return strings.Join(lines, "; ") }

// firstLine is an error's first line, for a log that stays short (a job's
// error joins one line per failed rank).
func firstLine(err error) string {
	if err == nil {
		return "no error"
	}
	first, _, _ := strings.Cut(err.Error(), "\n")
	return first
}

// TestFullPersistentQueueRefusesAndLosesNothing: configs/otlp.yaml with a
// small persistent queue (NEMO_QUEUE_ITEMS) and its backend down (503)
// while a job sends more than the queue holds. Once the queue is full the
// ranks' exports are refused (not acknowledged and then dropped); when the
// backend is back, every span the collector acknowledged arrives.
func TestFullPersistentQueueRefusesAndLosesNothing(t *testing.T) {
	sink, down := downSink(t)
	env := otlpBackendEnv(t, sink.URL)
	env["NEMO_RANK_STRATEGY"] = "all_ranks"
	env["NEMO_QUEUE_ITEMS"] = "10000"
	c := testcollector.Start(t, testcollector.Config(t, "otlp.yaml"), testcollector.Options{Env: env})

	acked := lensemu.NewAckLog()
	ranks := mixedJob(c, "run-full-queue", 8, 200)
	for i := range ranks {
		ranks[i].Acked, ranks[i].NoMetrics, ranks[i].NoLogs = acked, true, true
	}
	ctx, cancel := context.WithTimeout(t.Context(), jobTimeout)
	defer cancel()
	_, jobErr := lensemu.Job(ctx, ranks)
	if jobErr == nil {
		t.Fatalf("the job sent more than the queue holds and no export was refused: %d spans acknowledged", len(acked.IDs()))
	}
	refused, _, err := c.Metric("otelcol_receiver_refused_spans")
	if err != nil {
		t.Fatal(err)
	}
	if n := sink.Count(otlpsink.Traces); n != 0 {
		t.Fatalf("%d spans were accepted while the backend was down", n)
	}

	down.Store(false)
	ids := acked.IDs()
	var lost []string
	waitFor(t, deliveryTimeout, "every acknowledged span at the backend", func() bool {
		got := sinkSpanIDs(sink)
		lost = lost[:0]
		for id := range ids {
			if _, ok := got[hex.EncodeToString(id[:])]; !ok {
				lost = append(lost, hex.EncodeToString(id[:]))
			}
		}
		return len(lost) == 0
	})
	c.Stop()
	t.Logf("queue of 10,000 items, backend down: %d spans acknowledged, %.0f refused (the ranks saw %v); after recovery all acknowledged spans arrived (%d distinct at the backend)",
		len(ids), refused, firstLine(jobErr), distinctSpans(sink))
}

// sinkSpanIDs returns the span ids (hex) the backend received.
func sinkSpanIDs(s *otlpsink.Sink) map[string]struct{} {
	out := map[string]struct{}{}
	for _, r := range s.Requests() {
		if r.Signal != otlpsink.Traces {
			continue
		}
		for _, rs := range r.Traces.ResourceSpans().All() {
			for _, ss := range rs.ScopeSpans().All() {
				for _, span := range ss.Spans().All() {
					id := span.SpanID()
					out[hex.EncodeToString(id[:])] = struct{}{}
				}
			}
		}
	}
	return out
}
