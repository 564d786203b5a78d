// Copyright The otelcol-nemo Authors
// SPDX-License-Identifier: Apache-2.0

package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nemo-lens/otelcol-nemo/internal/testing/otlpsink"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/procstat"
	"github.com/nemo-lens/otelcol-nemo/internal/testing/testcollector"
)

// cpuSampler reads a process's CPU time every interval and keeps the busiest
// interval, in cores.
type cpuSampler struct {
	peakCores atomic.Uint64 // millicores
	peakRSSKB atomic.Int64
	stop      chan struct{}
	done      chan struct{}
}

func startSampler(pid int, every time.Duration) *cpuSampler {
	s := &cpuSampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		last, err := procstat.CPU(pid)
		if err != nil {
			return
		}
		lastAt := time.Now()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
			cpu, err := procstat.CPU(pid)
			if err != nil {
				return
			}
			now := time.Now()
			milli := uint64(float64(cpu-last) / float64(now.Sub(lastAt)) * 1000)
			if milli > s.peakCores.Load() {
				s.peakCores.Store(milli)
			}
			if rss, err := procstat.StatusKiB(pid, "VmRSS"); err == nil && rss > s.peakRSSKB.Load() {
				s.peakRSSKB.Store(rss)
			}
			last, lastAt = cpu, now
		}
	}()
	return s
}

// finish stops sampling and returns the busiest interval in cores.
func (s *cpuSampler) finish() float64 {
	close(s.stop)
	<-s.done
	return float64(s.peakCores.Load()) / 1000
}

// loadgenReport is the part of the load generator's JSON report the harness reads.
type loadgenReport struct {
	ElapsedSeconds float64            `json:"elapsed_seconds"`
	ItemsAccepted  int64              `json:"items_accepted"`
	ItemsRefused   int64              `json:"items_refused"`
	ItemsPerSecond float64            `json:"accepted_items_per_second"`
	Errors         map[string]int64   `json:"errors"`
	CPUSeconds     float64            `json:"cpu_seconds"`
	LatencyMs      map[string]float64 `json:"latency_ms"`
}

// runLoadgen runs the generator to completion (it stops by itself; the
// context only guards against a hang) and returns its report and CPU time.
func runLoadgen(tb testing.TB, bin string, limit time.Duration, args ...string) (loadgenReport, error) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(tb.Context(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var rep loadgenReport
	if jerr := json.Unmarshal(out, &rep); jerr != nil {
		if err == nil { // a clean exit: %w would print a nil error as "%!w(<nil>)"
			return rep, fmt.Errorf("loadgen %v: <nil> (report unreadable: %w)\n%s", args, jerr, stderr.String())
		}
		return rep, fmt.Errorf("loadgen %v: %w (report unreadable: %w)\n%s", args, err, jerr, stderr.String())
	}
	if cmd.ProcessState != nil {
		rep.CPUSeconds = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	}
	if err != nil {
		return rep, fmt.Errorf("loadgen %v: %w\n%s", args, err, stderr.String())
	}
	return rep, nil
}

// collectorSpans reads the collector's own count of spans its receivers
// accepted and refused.
func collectorSpans(c *testcollector.Collector) (accepted, refused float64, err error) {
	accepted, _, err = c.Metric("otelcol_receiver_accepted_spans")
	if err != nil {
		return 0, 0, err
	}
	refused, _, err = c.Metric("otelcol_receiver_refused_spans")
	return accepted, refused, err
}

// waitDrained waits until the pipeline has handed on what it received: one
// batch timeout, then until the exporters' sent+failed span counts stop moving.
func waitDrained(c *testcollector.Collector, batchTimeout time.Duration) {
	time.Sleep(batchTimeout + 200*time.Millisecond)
	deadline := time.Now().Add(15 * time.Second)
	last := -1.0
	for time.Now().Before(deadline) {
		sent, _, err1 := c.Metric("otelcol_exporter_sent_spans")
		failed, _, err2 := c.Metric("otelcol_exporter_send_failed_spans")
		if err1 != nil || err2 != nil {
			return
		}
		if sent+failed == last {
			return
		}
		last = sent + failed
		time.Sleep(500 * time.Millisecond)
	}
}

// startSink starts a local OTLP/HTTP backend for exporter scenarios and
// returns its base URL: it reads and discards every request and answers 200
// with an empty export response, so the exporter is measured and not a
// remote service.
func startSink(tb testing.TB) string {
	tb.Helper()
	s, err := otlpsink.Start(nil)
	if err != nil {
		tb.Fatalf("start the OTLP sink: %v", err)
	}
	s.SetDiscard(true)
	tb.Cleanup(func() { _ = s.Close() })
	return s.URL
}

// loadAvg is /proc/loadavg's first three fields: how busy the machine was.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// componentList returns the component names the binary was built with.
func componentList(tb testing.TB) map[string]bool {
	tb.Helper()
	out, err := testcollector.Run(tb, nil, "components")
	if err != nil {
		tb.Fatalf("otelcol-nemo components: %v\n%s", err, out)
	}
	names := map[string]bool{}
	for line := range strings.SplitSeq(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "- name: "); ok {
			names[strings.TrimSpace(v)] = true
		}
	}
	return names
}

// firstLine returns the first line of s, for compact error notes.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}
